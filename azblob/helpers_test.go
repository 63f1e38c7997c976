package azblob_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	leazblob "github.com/racedecider/leaderelection/azblob"
	"github.com/racedecider/leaderelection/internal/testenv"
)

// envConnectionString is what scripts/azurite.sh prints: a connection string
// for Azurite's well-known development account.
const envConnectionString = "LEADERELECTION_AZURITE_CONNECTION_STRING"

var (
	runID      = randomHex(4)
	blobSeq    atomic.Int64
	containerN atomic.Int64
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// store is the Azurite that scripts/azurite.sh started, with a container of
// the test's own.
type store struct {
	connString string
	endpoint   string // http://127.0.0.1:10000/devstoreaccount1
	account    string
	key        string
	container  string
}

// azurite returns the running Azurite with a new container, removed when the
// test ends, or skips the test (fails under LEADERELECTION_REQUIRE_SERVERS).
func azurite(t *testing.T) *store {
	t.Helper()
	cs := testenv.Server(t, envConnectionString, "Azurite", `eval "$(scripts/azurite.sh start)"`)
	s := &store{connString: cs, container: fmt.Sprintf("le-%s-%d", runID, containerN.Add(1))}
	for _, kv := range strings.Split(cs, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "AccountName":
			s.account = v
		case "AccountKey":
			s.key = v
		case "BlobEndpoint":
			s.endpoint = strings.TrimSuffix(v, "/")
		}
	}
	if s.account == "" || s.key == "" || s.endpoint == "" {
		t.Fatalf("%s lacks AccountName, AccountKey or BlobEndpoint", envConnectionString)
	}
	c := s.client(t, "", s.container)
	if _, err := c.Create(t.Context(), nil); err != nil {
		t.Fatalf("Azurite at %s: creating container %s: %v", s.endpoint, s.container, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.Delete(ctx, nil)
	})
	return s
}

// maybeAzurite returns azurite(t) when Azurite is running, or nil.
func maybeAzurite(t *testing.T) *store {
	if os.Getenv(envConnectionString) == "" {
		return nil
	}
	return azurite(t)
}

// noSDKRetries turns the SDK's retries off.
var noSDKRetries = policy.RetryOptions{MaxRetries: -1}

// hostPort is Azurite's address, for a fault proxy to forward to.
func (s *store) hostPort(t *testing.T) string {
	u, err := url.Parse(s.endpoint)
	if err != nil {
		t.Fatalf("endpoint %q: %v", s.endpoint, err)
	}
	return u.Host
}

// client returns a shared-key client for containerName, through proxyAddr
// ("127.0.0.1:port") when it is not empty. The SDK's read retries back off
// for at most 50 ms, so that fault tests stay quick.
func (s *store) client(t *testing.T, proxyAddr, containerName string) *container.Client {
	t.Helper()
	return s.clientWithKey(t, proxyAddr, containerName, s.key)
}

func (s *store) clientWithKey(t *testing.T, proxyAddr, containerName, key string) *container.Client {
	t.Helper()
	endpoint := s.endpoint
	if proxyAddr != "" {
		u, _ := url.Parse(s.endpoint)
		u.Host = proxyAddr
		endpoint = u.String()
	}
	cred, err := container.NewSharedKeyCredential(s.account, key)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	// Azurite closes a connection idle for 5 s. A write sent on a connection
	// the server is closing at that moment fails with a reset, an unknown
	// outcome; the conformance suite wants a definite one, so never reuse a
	// connection that old.
	tr.IdleConnTimeout = 2 * time.Second
	t.Cleanup(tr.CloseIdleConnections)
	c, err := container.NewClientWithSharedKeyCredential(endpoint+"/"+containerName, cred, &container.ClientOptions{
		ClientOptions: azcore.ClientOptions{
			Transport: &http.Client{Transport: tr},
			Retry: policy.RetryOptions{
				MaxRetries:    3,
				RetryDelay:    10 * time.Millisecond,
				MaxRetryDelay: 50 * time.Millisecond,
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newBlob returns a blob name no other test uses.
func newBlob() string {
	return fmt.Sprintf("elections/job-%s-%d", runID, blobSeq.Add(1))
}

func (s *store) objectName(blobName string) string {
	return "azblob://" + s.container + "/" + blobName
}

// decider returns a Decider on a new blob, through proxyAddr if not empty.
func (s *store) decider(t *testing.T, proxyAddr string, opts ...leazblob.Option) (*leazblob.Decider, string) {
	t.Helper()
	name := newBlob()
	d, err := leazblob.NewDecider(s.client(t, proxyAddr, s.container), name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d, name
}

// rawPut stores data in blobName without conditions, bypassing the Decider.
func (s *store) rawPut(t *testing.T, blobName string, data []byte) {
	t.Helper()
	bb := s.client(t, "", s.container).NewBlockBlobClient(blobName)
	if _, err := bb.Upload(t.Context(), streaming.NopCloser(bytes.NewReader(data)), nil); err != nil {
		t.Fatalf("raw Upload %s: %v", s.objectName(blobName), err)
	}
}

// rawDelete deletes blobName, bypassing the Decider.
func (s *store) rawDelete(t *testing.T, blobName string) {
	t.Helper()
	bb := s.client(t, "", s.container).NewBlobClient(blobName)
	if _, err := bb.Delete(t.Context(), nil); err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		t.Fatalf("raw Delete %s: %v", s.objectName(blobName), err)
	}
}

// rawBlob returns a blob client on blobName, bypassing the Decider.
func (s *store) rawBlob(t *testing.T, blobName string) *blob.Client {
	return s.client(t, "", s.container).NewBlobClient(blobName)
}
