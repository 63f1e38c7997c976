package azblob_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	leazblob "github.com/racedecider/leaderelection/azblob"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// tokenDecider returns a Decider on blob "job" of container "elections" at a
// TLS server that fails the test on any request (a request must never be
// sent without a token), with cred as the client's credential.
func tokenDecider(t *testing.T, cred azcore.TokenCredential) *leazblob.Decider {
	t.Helper()
	var requests atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(func() {
		srv.Close()
		if n := requests.Load(); n != 0 {
			t.Errorf("the server got %d requests; none should be sent without a token", n)
		}
	})
	c, err := container.NewClient(srv.URL+"/devstoreaccount1/elections", cred,
		&container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: srv.Client()}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := leazblob.NewDecider(c, "job", leazblob.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestNoCredentialIsRefused: a token credential with nothing to get a token
// with (the Azure CLI credential with no az on PATH: azidentity's own
// "credential unavailable" error, as DefaultAzureCredential gives on a host
// with no credentials at all) is a refusal that names the blob and says no
// credentials are available, not an unknown outcome retried for ever; and
// Acquire ends with it.
func TestNoCredentialIsRefused(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // az is not found
	cred, err := azidentity.NewAzureCLICredential(nil)
	if err != nil {
		t.Fatal(err)
	}
	d := tokenDecider(t, cred)
	check := func(what string, err error) {
		t.Helper()
		racedecidertest.CheckRefusal(t, what, err, "azblob://elections/job", "no Azure credentials are available", "AzureCLICredential")
	}
	_, err = d.ReadCurrent(t.Context())
	check("ReadCurrent", err)
	t.Logf("read: %v", err)
	_, err = d.WriteEntry(t.Context(), faultproxy.Record(0, "w-0", entry.LeaderToken{}))
	check("WriteEntry (create)", err)
	_, err = d.WriteEntry(t.Context(), faultproxy.Record(1, "w-1", entry.LeaderToken{Version: `"0x8DD00000000000"`}))
	check("WriteEntry (replace)", err)

	err = racedecidertest.AcquireEnds(t, d)
	check("Acquire", err)
	t.Logf("Acquire: %v", err)
}

// TestUnreachableEntraIDIsNotRefused: a credential that cannot reach
// Microsoft Entra ID (a transport error, which the SDK marks non-retriable
// like any token failure) may succeed later: an unknown outcome, not a
// refusal.
func TestUnreachableEntraIDIsNotRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	cred, err := azidentity.NewClientSecretCredential("00000000-0000-0000-0000-000000000000",
		"00000000-0000-0000-0000-000000000001", "secret", &azidentity.ClientSecretCredentialOptions{
			ClientOptions: azcore.ClientOptions{
				Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: "https://" + dead + "/"},
				Retry: noSDKRetries,
			},
			DisableInstanceDiscovery: true,
		})
	if err != nil {
		t.Fatal(err)
	}
	d := tokenDecider(t, cred)
	_, rerr := d.ReadCurrent(t.Context())
	_, werr := d.WriteEntry(t.Context(), faultproxy.Record(0, "w-0", entry.LeaderToken{}))
	for what, err := range map[string]error{"read": rerr, "write": werr} {
		if err == nil || errors.Is(err, entry.ErrRefused) || errors.Is(err, entry.ErrRaceLost) ||
			strings.Contains(err.Error(), "no Azure credentials") {
			t.Errorf("%s with Entra ID unreachable: err = %v, want an unknown outcome", what, err)
		}
		t.Logf("%s: %v", what, err)
	}
}

// TestTokenOverHTTPIsRefused: a client with a token credential on an http
// endpoint (Azurite, or an https endpoint mistyped) never sends a request:
// azcore refuses to send a token without TLS. That is a refusal naming the
// blob, not an unknown outcome retried for ever; and Acquire ends with it.
func TestTokenOverHTTPIsRefused(t *testing.T) {
	s := azurite(t)
	cred, err := azidentity.NewClientSecretCredential("00000000-0000-0000-0000-000000000000",
		"00000000-0000-0000-0000-000000000001", "secret", &azidentity.ClientSecretCredentialOptions{
			ClientOptions:            azcore.ClientOptions{Retry: noSDKRetries},
			DisableInstanceDiscovery: true,
		})
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClient(s.endpoint+"/"+s.container, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := leazblob.NewDecider(c, "job", leazblob.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	racedecidertest.CheckRefuses(t, d, s.objectName("job"), "https")
}

// TestTLSFailureIsRefused: an https endpoint whose TLS cannot succeed, as
// Azurite's plain-HTTP port reached with https:// or a server whose
// certificate this host does not trust, never gets a request: not an
// unknown outcome retried for ever but a refusal naming the endpoint, and
// Acquire ends.
func TestTLSFailureIsRefused(t *testing.T) {
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a request got through a TLS handshake that should fail")
	}))
	t.Cleanup(untrusted.Close)
	for name, endpointOf := range map[string]func(t *testing.T) string{
		"an untrusted certificate": func(*testing.T) string { return untrusted.URL + "/devstoreaccount1" },
		"Azurite's http port as https": func(t *testing.T) string {
			return strings.Replace(azurite(t).endpoint, "http://", "https://", 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			endpoint := endpointOf(t)
			c, err := container.NewClientWithNoCredential(endpoint+"/elections", nil)
			if err != nil {
				t.Fatal(err)
			}
			d, err := leazblob.NewDecider(c, "job")
			if err != nil {
				t.Fatal(err)
			}
			racedecidertest.CheckRefuses(t, d, endpoint[:strings.LastIndex(endpoint, "/")], "azblob://elections/job")
		})
	}
}
