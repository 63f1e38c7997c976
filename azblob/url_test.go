package azblob_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	leaderelection "github.com/racedecider/leaderelection"
	leazblob "github.com/racedecider/leaderelection/azblob"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
)

// clearEnv unsets every variable the URL opener reads, for this test.
func clearEnv(t *testing.T) {
	for _, v := range []string{leazblob.EnvConnectionString, leazblob.EnvAccount, leazblob.EnvKey, leazblob.EnvSASToken} {
		t.Setenv(v, "")
	}
}

func TestOpenURLRejects(t *testing.T) {
	clearEnv(t)
	const key = "c2VjcmV0LWtleQ=="
	cases := []struct {
		url  string
		env  map[string]string
		want string
	}{
		{"azblob:///b", nil, "no container"},
		{"azblob://c", nil, "no blob name"},
		{"azblob://c/", nil, "no blob name"},
		{"azblob://c:10/b", nil, "want azblob://CONTAINER/BLOB"},
		{"azblob://c:/b", nil, `container "c:" has a port`},
		{"azblob://u@c/b", nil, "want azblob://CONTAINER/BLOB"},
		{"azblob://c/b?region=x", nil, "region"},
		{"azblob://c/b?endpoint=ftp://x", nil, `endpoint="ftp://x"`},
		{"azblob://c/b", nil, "no storage account"},
		{"azblob://c/b?storage_account=a", map[string]string{leazblob.EnvConnectionString: "AccountName=a;AccountKey=" + key}, "drop storage_account"},
		{"azblob://c/b?endpoint=http://127.0.0.1:1/a", map[string]string{leazblob.EnvKey: key}, "names no account"},
		{"azblob://c/b?storage_account=acct", map[string]string{leazblob.EnvKey: "not base64!" + key}, "not a valid key"},
		// Pasted into the host name: a slash would send requests, and
		// their credentials, to another host.
		{"azblob://c/b?storage_account=a%2Fb", nil, `storage account "a/b"`},
		{"azblob://c/b?storage_account=ab", nil, "want 3 to 24 lowercase letters and digits"},
		{"azblob://c/b", map[string]string{leazblob.EnvAccount: "Acct"}, `storage account "Acct" (storage_account or ` + leazblob.EnvAccount + `)`},
		{"azblob://c/b?endpoint=http://127.0.0.1:1/a?x=1", nil, "no user information, query or fragment"},
		{"azblob://c/b", map[string]string{leazblob.EnvConnectionString: "nonsense" + key}, leazblob.EnvConnectionString},
		{"azblob://c/b.", map[string]string{leazblob.EnvAccount: "acct", leazblob.EnvSASToken: "sig=x"}, "ends with"},
		// No key, SAS token or connection string: Azure's default
		// credential chain, whose tokens azcore sends only over https.
		{"azblob://c/b?storage_account=devstoreaccount1&endpoint=http://127.0.0.1:1/devstoreaccount1", nil, `endpoint "http://127.0.0.1:1/devstoreaccount1" is not https`},
		{"azblob://c/b%FF", map[string]string{leazblob.EnvAccount: "acct", leazblob.EnvSASToken: "sig=x"}, `blob name "b\xff" is not valid UTF-8`},
		// Present but empty is not left out: no fallback to the environment.
		{"azblob://c/b?storage_account=", map[string]string{leazblob.EnvAccount: "a", leazblob.EnvKey: key}, "query parameter storage_account is empty"},
		{"azblob://c/b?storage_account=a&endpoint=", map[string]string{leazblob.EnvKey: key}, "query parameter endpoint is empty"},
		{"azblob://c/b?storage_account=a&storage_account=b", map[string]string{leazblob.EnvKey: key}, "query parameter storage_account is given 2 times"},
		{"azblob://c/jobs?storage_account=a#1", map[string]string{leazblob.EnvKey: key}, `fragment "#1"`},
		{"azblob://u:" + key + "@c/b?storage_account=a", map[string]string{leazblob.EnvKey: key}, `user information "u:xxxxx@"`},
		{"azblob://c:10/b?storage_account=a", map[string]string{leazblob.EnvKey: key}, `container "c:10" has a port`},
		{"azblob://Elections/b?storage_account=acct", map[string]string{leazblob.EnvKey: key}, `container name "Elections" is not one Azure takes: it holds an uppercase letter`},
		{"azblob://le_jobs/b?storage_account=acct", map[string]string{leazblob.EnvKey: key}, `container name "le_jobs" is not one Azure takes: it holds '_'`},
		{"azblob://le--jobs/b?storage_account=acct", map[string]string{leazblob.EnvKey: key}, `container name "le--jobs"`},
		{"azblob://le/b?storage_account=acct", map[string]string{leazblob.EnvKey: key}, `container name "le" is not one Azure takes: its length is 2`},
		{"azblob://c/b?storage_account=a&endpoint=http://u:pw@127.0.0.1:1/a", map[string]string{leazblob.EnvKey: key}, "no user information"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			d, err := leaderelection.OpenDecider(t.Context(), tc.url)
			if err == nil {
				t.Fatalf("OpenDecider(%q) = %v, nil; want an error", tc.url, d)
			}
			if !errors.Is(err, leaderelection.ErrBadURL) {
				t.Errorf("error %q does not wrap ErrBadURL", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("error %q repeats the key", err)
			}
		})
	}
}

// TestOpenURL opens Azurite's blobs by URL with each kind of credential.
func TestOpenURL(t *testing.T) {
	s := azurite(t)
	clearEnv(t)
	sasURL, err := s.client(t, "", s.container).GetSASURL(
		sas.ContainerPermissions{Read: true, Write: true, Create: true}, time.Now().Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	su, err := url.Parse(sasURL)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := url.QueryEscape(s.endpoint)
	cases := []struct {
		name   string
		env    map[string]string
		params string
	}{
		{"connection string", map[string]string{leazblob.EnvConnectionString: s.connString}, ""},
		{"shared key", map[string]string{leazblob.EnvKey: s.key}, "?storage_account=" + s.account + "&endpoint=" + endpoint},
		{"shared key, account from env", map[string]string{leazblob.EnvKey: s.key, leazblob.EnvAccount: s.account}, "?endpoint=" + endpoint},
		{"SAS token", map[string]string{leazblob.EnvSASToken: su.RawQuery}, "?endpoint=" + endpoint},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			name := newBlob()
			d, err := leaderelection.OpenDecider(t.Context(), "azblob://"+s.container+"/"+name+tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.(*leazblob.Decider).String(); got != s.objectName(name) {
				t.Errorf("String() = %q, want %q", got, s.objectName(name))
			}
			tok, err := d.WriteEntry(t.Context(), faultproxy.Record(0, "w-0", entry.LeaderToken{}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.ReadCurrent(t.Context())
			if err != nil || got.WriteID != "w-0" || got.Token.Version != tok.Version {
				t.Fatalf("read back %+v, %v", got, err)
			}
		})
	}
}
