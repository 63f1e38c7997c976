package azblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// answer builds the error the SDK returns for an Azure answer with this
// status and error code, with the body Azure sends (the code is in both the
// x-ms-error-code header and the XML body).
func answer(status int, code string) error {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>some message
RequestId:4d3c5d20-b01e-0045-3f1c-000000000000
Time:2026-11-25T16:00:00.0000000Z</Message></Error>`, code)
	req, _ := http.NewRequest(http.MethodPut, "https://acct.blob.core.windows.net/c/b?sig=SECRET", nil)
	resp := &http.Response{
		StatusCode: status,
		Status:     fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header:     http.Header{"Content-Type": {"application/xml"}},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    req,
	}
	if code != "" {
		resp.Header.Set("x-ms-error-code", code)
	}
	return runtime.NewResponseError(resp)
}

// entraAnswer is the error azidentity returns when Microsoft Entra ID
// answers a token request with status.
func entraAnswer(status int) error {
	return &azidentity.AuthenticationFailedError{RawResponse: &http.Response{
		StatusCode: status,
		Status:     fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header:     http.Header{},
		Body:       io.NopCloser(strings.NewReader(`{"error":"invalid_client"}`)),
	}}
}

// marked is what azcore's errorinfo.NonRetriableError (internal to the SDK)
// puts around an error: the NonRetriable marker, over any error at all.
type marked struct{ error }

func (marked) NonRetriable()   {}
func (m marked) Unwrap() error { return m.error }

// TestClassify maps the answers Azure documents for Get Blob and Put Blob
// (https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes).
func TestClassify(t *testing.T) {
	reset := &url.Error{Op: "Put", URL: "https://acct.blob.core.windows.net/c/b?sig=SECRET",
		Err: &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}}
	cases := []struct {
		err   error
		op    op
		want  outcome
		retry bool
	}{
		{answer(412, "ConditionNotMet"), opReplace, outcomeLost, false},
		{answer(412, "ConditionNotMet"), opCreate, outcomeLost, false},
		{answer(409, "BlobAlreadyExists"), opCreate, outcomeLost, false},
		{answer(409, "BlobAlreadyExists"), opReplace, outcomeUnknown, false},
		{answer(404, "BlobNotFound"), opReplace, outcomeLost, false},
		{answer(404, "BlobNotFound"), opRead, outcomeMissing, false},
		{answer(404, "BlobNotFound"), opCreate, outcomeUnknown, false},
		{answer(404, "ContainerNotFound"), opRead, outcomeRefused, false},
		{answer(404, "ContainerNotFound"), opCreate, outcomeRefused, false},
		{answer(404, "ContainerNotFound"), opReplace, outcomeRefused, false},
		{answer(404, ""), opRead, outcomeRefused, false}, // not the service
		{answer(403, "AuthorizationFailure"), opRead, outcomeRefused, false},
		{answer(403, "AuthorizationPermissionMismatch"), opReplace, outcomeRefused, false},
		{answer(403, "AuthenticationFailed"), opCreate, outcomeRefused, false},
		{answer(403, "AccountIsDisabled"), opRead, outcomeRefused, false},
		{answer(412, "LeaseIdMissing"), opReplace, outcomeRefused, false},
		{answer(409, "LeaseAlreadyPresent"), opReplace, outcomeRefused, false},
		{answer(412, "LeaseIdMismatchWithBlobOperation"), opReplace, outcomeRefused, false},
		{answer(409, "BlobImmutableDueToPolicy"), opReplace, outcomeRefused, false},
		{answer(409, "BlobArchived"), opReplace, outcomeRefused, false},
		{answer(409, "ContainerBeingDeleted"), opCreate, outcomeRefused, false},
		{answer(400, "InvalidHeaderValue"), opCreate, outcomeRefused, false},
		{answer(400, "Md5Mismatch"), opCreate, outcomeRefused, false},
		{answer(413, "RequestBodyTooLarge"), opCreate, outcomeRefused, false},
		{answer(503, "ServerBusy"), opReplace, outcomeThrottled, true},
		{answer(503, "ServerBusy"), opRead, outcomeThrottled, true},
		{answer(500, "ServerBusy"), opReplace, outcomeThrottled, true},
		{answer(429, ""), opReplace, outcomeThrottled, false},
		{answer(500, "OperationTimedOut"), opReplace, outcomeUnknown, true},
		{answer(500, "InternalError"), opReplace, outcomeUnknown, true},
		{answer(502, ""), opCreate, outcomeUnknown, true},
		{answer(503, ""), opCreate, outcomeUnknown, true},
		{answer(504, ""), opCreate, outcomeUnknown, true},
		{answer(408, ""), opCreate, outcomeUnknown, true},
		{answer(409, "SomethingNew"), opReplace, outcomeUnknown, false},
		{answer(412, ""), opReplace, outcomeLost, false}, // a server that sends no code
		{answer(412, "SomethingNew"), opReplace, outcomeUnknown, false},
		{reset, opReplace, outcomeUnknown, true},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), opReplace, outcomeUnknown, false},
		{context.Canceled, opRead, outcomeUnknown, false},

		// Microsoft Entra ID refused the credential, or could not be asked.
		{entraAnswer(401), opRead, outcomeRefused, false},
		{entraAnswer(400), opCreate, outcomeRefused, false},
		{entraAnswer(429), opCreate, outcomeUnknown, true},
		{entraAnswer(503), opReplace, outcomeUnknown, true},
		{&azidentity.AuthenticationFailedError{}, opCreate, outcomeUnknown, true}, // no response
		{marked{entraAnswer(401)}, opRead, outcomeRefused, false},
		{marked{&azidentity.AuthenticationFailedError{}}, opReplace, outcomeUnknown, true},

		// The credential has nothing to get a token with.
		{azidentity.NewCredentialUnavailableError("DefaultAzureCredential: failed to acquire a token"), opRead, outcomeRefused, false},
		{marked{fmt.Errorf("wrapped: %w", azidentity.NewCredentialUnavailableError("AzureCLICredential: executable not found on path"))},
			opCreate, outcomeRefused, false},
		// The same marker around a transport error or a context error
		// (as azcore's bearer token policy puts it around any token
		// failure) proves nothing.
		{marked{reset}, opReplace, outcomeUnknown, true},
		{marked{context.Canceled}, opRead, outcomeUnknown, false},
		{marked{fmt.Errorf("wrapped: %w", context.DeadlineExceeded)}, opCreate, outcomeUnknown, false},
		{errors.Join(context.Canceled, azidentity.NewCredentialUnavailableError("x")), opRead, outcomeUnknown, false},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%.60s/op%d", describe(tc.err), tc.op)
		t.Run(name, func(t *testing.T) {
			if got := classify(tc.err, tc.op); got != tc.want {
				t.Errorf("classify = %d, want %d", got, tc.want)
			}
			if got := transient(tc.err); got != tc.retry {
				t.Errorf("transient = %v, want %v", got, tc.retry)
			}
			if d := describe(tc.err); strings.Contains(d, "SECRET") || strings.Contains(d, "RequestId") {
				t.Errorf("describe = %q: it repeats the query string or the message body", d)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://acct.blob.core.windows.net/c/b?sv=1&sig=SECRET": "https://acct.blob.core.windows.net/c/b?REDACTED",
		"https://acct.blob.core.windows.net/c/b":                 "https://acct.blob.core.windows.net/c/b",
		"http://u:p@127.0.0.1:1/x":                               "http://127.0.0.1:1/x",
		"%zz?sig=SECRET":                                         "%zz?REDACTED",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNotABlobStorageEndpoint points the backend at web servers that are not
// Blob Storage and answer every request with a 2xx: a proxy's or portal's
// page, or a server taking any PUT. Blob Storage (and Azurite) puts an
// x-ms-request-id on every answer; without one, reads and writes are
// refusals naming the endpoint and the blob, not unknown outcomes retried
// for ever, and Acquire ends.
func TestNotABlobStorageEndpoint(t *testing.T) {
	for _, page := range []struct {
		name, body string
		status     int
		etag       bool
	}{
		{"HTML 200", "<html><body>Sign in to continue</body></html>", 200, false},
		{"empty 201", "", 201, true},
		{"empty 200 with an ETag", "", 200, true},
	} {
		t.Run(page.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if page.etag {
					w.Header().Set("ETag", `"1"`)
				}
				w.WriteHeader(page.status)
				_, _ = io.WriteString(w, page.body)
			}))
			t.Cleanup(srv.Close)
			c, err := container.NewClientWithNoCredential(srv.URL+"/devstoreaccount1/elections", nil)
			if err != nil {
				t.Fatal(err)
			}
			d, err := NewDecider(c, "job")
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, err error) {
				t.Helper()
				racedecidertest.CheckRefusal(t, what, err, srv.URL, "azblob://elections/job", "x-ms-request-id")
			}
			_, err = d.ReadCurrent(t.Context())
			check("ReadCurrent", err)
			t.Logf("read: %v", err)
			_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"})
			check("WriteEntry (create)", err)
			_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, LeaderID: "a", WriteID: "w-1",
				Token: entry.LeaderToken{Version: `"1"`}})
			check("WriteEntry (replace)", err)
			check("Acquire", racedecidertest.AcquireEnds(t, d))
		})
	}
}

// TestReadRetryWaits: a read answered 503 ServerBusy is sent again after a
// jittered pause, as a write is, not at once: ReadCurrent's first attempt
// goes without the SDK's retries, and the SDK's own call, which follows it,
// sends its first attempt without waiting.
func TestReadRetryWaits(t *testing.T) {
	var (
		mu    sync.Mutex
		times []time.Time
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		w.Header().Set("x-ms-request-id", "r")
		w.Header().Set("x-ms-error-code", "ServerBusy")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	c, err := container.NewClientWithNoCredential(srv.URL+"/devstoreaccount1/elections",
		&container.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecider(c, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrThrottled) {
		t.Errorf("ReadCurrent answered 503 ServerBusy: %v; want entry.ErrThrottled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(times) != 2 {
		t.Fatalf("%d requests; want 2 (one without the SDK's retries, then the SDK's call, retries off)", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < initialBackoff/2 {
		t.Errorf("the read was sent again %v after a 503 ServerBusy; want at least %v", gap, initialBackoff/2)
	}
}
