package azblob

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/urlcheck"
)

// Scheme is the URL scheme this package registers with
// leaderelection.RegisterScheme:
//
//	azblob://CONTAINER/BLOB[?storage_account=NAME&endpoint=URL]
//
// The blob name is the URL's path without its leading slash, percent-decoded;
// the container, the host, must be named as Azure requires (see NewDecider).
// Following gocloud.dev's azureblob driver, credentials come from the
// environment, the first of these that is set:
//
//   - AZURE_STORAGE_CONNECTION_STRING: a connection string, which also names
//     the account and endpoint (storage_account and endpoint are then refused).
//   - AZURE_STORAGE_KEY: the account's shared key.
//   - AZURE_STORAGE_SAS_TOKEN: a SAS token, appended to the container's URL.
//   - otherwise azidentity.NewDefaultAzureCredential: environment, workload
//     identity, managed identity, Azure CLI, ... Its tokens go only to an
//     https endpoint: an http one is refused.
//
// The account is storage_account, or AZURE_STORAGE_ACCOUNT. endpoint is the
// service URL, "https://ACCOUNT.blob.core.windows.net" by default; set it
// for another cloud, a private endpoint or Azurite
// ("http://127.0.0.1:10000/devstoreaccount1"). No other query parameter is
// accepted, nor one given twice or empty ("storage_account="), a fragment,
// user information or a port; for any other client setting, call NewDecider
// with a client of your own. Errors never repeat a key or SAS token.
const Scheme = "azblob"

// The environment variables Scheme's opener reads.
const (
	EnvConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
	EnvAccount          = "AZURE_STORAGE_ACCOUNT"
	EnvKey              = "AZURE_STORAGE_KEY"
	EnvSASToken         = "AZURE_STORAGE_SAS_TOKEN"
)

const form = "azblob://CONTAINER/BLOB?storage_account=NAME&endpoint=URL"

// accountName is what Azure takes as a storage account's name.
var accountName = regexp.MustCompile(`^[a-z0-9]{3,24}$`)

func init() {
	leaderelection.RegisterScheme(Scheme, leaderelection.URLOpener{
		Open:   openURL,
		Params: []string{"storage_account", "endpoint"},
		Form:   form,
	})
}

func openURL(_ context.Context, u *url.URL) (leaderelection.RaceDecider, error) {
	if err := urlcheck.Check(u); err != nil {
		return nil, fmt.Errorf("%w: %w; want %s", leaderelection.ErrBadURL, err, form)
	}
	containerName, blobName := u.Host, strings.TrimPrefix(u.Path, "/")
	switch {
	case u.Opaque != "":
		return nil, fmt.Errorf("%w: want %s", leaderelection.ErrBadURL, form)
	case containerName == "":
		return nil, fmt.Errorf("%w: no container; want %s", leaderelection.ErrBadURL, form)
	case strings.Contains(containerName, ":"): // a port, or an empty one
		return nil, fmt.Errorf("%w: container %q has a port: the host is the container name; for Azurite at that address, use ?endpoint=http://%s/ACCOUNT; want %s",
			leaderelection.ErrBadURL, containerName, containerName, form)
	case blobName == "":
		return nil, fmt.Errorf("%w: no blob name; want %s", leaderelection.ErrBadURL, form)
	}
	q := u.Query()
	account, endpoint := q.Get("storage_account"), q.Get("endpoint")
	if endpoint != "" {
		if _, err := urlcheck.Endpoint("endpoint", endpoint); err != nil {
			return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
		}
	}
	client, err := containerClient(containerName, account, endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
	}
	d, err := NewDecider(client, blobName)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", leaderelection.ErrBadURL, err)
	}
	return d, nil
}

// containerClient makes a client for containerName from the environment, as
// Scheme's documentation describes.
func containerClient(containerName, account, endpoint string) (*container.Client, error) {
	if cs := os.Getenv(EnvConnectionString); cs != "" {
		if account != "" || endpoint != "" {
			return nil, fmt.Errorf("%s is set and names the account and endpoint: drop storage_account and endpoint from the URL", EnvConnectionString)
		}
		c, err := container.NewClientFromConnectionString(cs, containerName, nil)
		if err != nil {
			// The SDK's message does not repeat the string; ours must not.
			return nil, fmt.Errorf("%s: %w", EnvConnectionString, err)
		}
		return c, nil
	}
	if account == "" {
		account = os.Getenv(EnvAccount)
	}
	if account != "" && !accountName.MatchString(account) {
		// It names the endpoint's host when there is no endpoint.
		return nil, fmt.Errorf("storage account %q (storage_account or %s): want 3 to 24 lowercase letters and digits", account, EnvAccount)
	}
	if endpoint == "" {
		if account == "" {
			return nil, fmt.Errorf("no storage account: add ?storage_account=NAME to the URL, set %s, or set %s", EnvAccount, EnvConnectionString)
		}
		endpoint = "https://" + account + ".blob.core.windows.net"
	}
	containerURL := strings.TrimSuffix(endpoint, "/") + "/" + url.PathEscape(containerName)
	if key := os.Getenv(EnvKey); key != "" {
		if account == "" {
			return nil, fmt.Errorf("%s is set but names no account: add ?storage_account=NAME to the URL or set %s", EnvKey, EnvAccount)
		}
		cred, err := container.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, fmt.Errorf("%s for account %q is not a valid key (want base64)", EnvKey, account)
		}
		return container.NewClientWithSharedKeyCredential(containerURL, cred, nil)
	}
	if sas := os.Getenv(EnvSASToken); sas != "" {
		return container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(sas, "?"), nil)
	}
	if strings.HasPrefix(strings.ToLower(endpoint), "http://") {
		// azcore sends a token only over https, and would fail every
		// request without sending it.
		return nil, fmt.Errorf("endpoint %q is not https, and Azure's default credential chain (used as none of %s, %s or %s is set) sends tokens only over https: for Azurite, set %s or %s",
			endpoint, EnvConnectionString, EnvKey, EnvSASToken, EnvKey, EnvConnectionString)
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("no %s, %s or %s set, and Azure's default credential chain failed: %w",
			EnvConnectionString, EnvKey, EnvSASToken, err)
	}
	return container.NewClient(containerURL, cred, nil)
}
