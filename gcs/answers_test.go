package gcs_test

import (
	"cmp"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/gcs"
	"github.com/racedecider/leaderelection/internal/faultproxy"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// errUnknown stands, in the tables below, for an error of unknown outcome:
// one that wraps none of entry.ErrRaceLost, ErrThrottled and ErrRefused.
var errUnknown = errors.New("unknown outcome")

// classOf returns which of the four classes err is in.
func classOf(err error) error {
	for _, c := range []error{entry.ErrRaceLost, entry.ErrThrottled, entry.ErrRefused} {
		if errors.Is(err, c) {
			return c
		}
	}
	return errUnknown
}

// TestMissingBucket: fake-gcs-server answers a download from a missing
// bucket with 404, as Cloud Storage does, and the storage client reports
// that exactly as a missing object. ReadCurrent must not take it for "no
// election yet"; a write must not take it for a lost race. Both are
// refusals naming the object, with XML and JSON reads alike.
func TestMissingBucket(t *testing.T) {
	em := newEmulator(t)
	for name, c := range map[string]*storage.Client{
		"XML reads":  newClient(t, em.addr),
		"JSON reads": newClient(t, em.addr, storage.WithJSONReads()),
	} {
		t.Run(name, func(t *testing.T) {
			d, err := gcs.NewDecider(c, "no-such-bucket", "o")
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.ReadCurrent(t.Context())
			if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "gs://no-such-bucket/o") {
				t.Fatalf("read from a missing bucket: %+v, %v; want a refusal naming the object", got, err)
			}
			t.Logf("read: %v", err)
			_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w"})
			if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "gs://no-such-bucket/o") {
				t.Fatalf("write to a missing bucket: %v; want a refusal naming the object", err)
			}
			t.Logf("write: %v", err)
		})
	}
}

// TestMissingObjectInExistingBucket: the bucket check after a 404 does not
// turn a missing record into an error, and costs one listing.
func TestMissingObjectInExistingBucket(t *testing.T) {
	em := newFaultyEmulator(t)
	d := newDecider(t, newClient(t, em.addr), freshObject(t))
	got := faultproxy.MustRead(t, d)
	if got.ElectionNumber != entry.NoElections || !got.Token.IsZero() {
		t.Fatalf("read of a missing record = %+v, want no elections", got)
	}
	if n := em.inject.count(listings); n != 1 {
		t.Errorf("%d listings for one read of a missing record, want 1", n)
	}
	faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))
	faultproxy.MustRead(t, d)
	if n := em.inject.count(listings); n != 1 {
		t.Errorf("%d listings after reading an existing record, want still 1", n)
	}
}

// TestNotGCSEndpoint points the client at a server that answers every
// request with 404, as a web server or a wrong port does. Reads and writes
// are refusals, after few requests, naming the object.
func TestNotGCSEndpoint(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	d := newDecider(t, newClient(t, strings.TrimPrefix(srv.URL, "http://")), "o")
	start := time.Now()
	_, rerr := d.ReadCurrent(t.Context())
	_, werr := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w"})
	for what, err := range map[string]error{"read": rerr, "write": werr} {
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), d.String()) {
			t.Errorf("%s: %v; want a refusal naming %s", what, err, d)
		}
		t.Logf("%s: %v", what, err)
	}
	// A download, a listing, an upload.
	if n := requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
}

// TestAnswers injects Cloud Storage's error answers in front of the
// emulator, each on every attempt, and checks the class of the error and
// the number of attempts: the retries of the storage client (reads) and of
// WriteEntry (writes) agree, at most 4 attempts, and only transient errors
// are retried, except a write's 429: another attempt within the object's
// write interval would only be throttled again.
func TestAnswers(t *testing.T) {
	em := newFaultyEmulator(t)
	c := newClient(t, em.addr)
	all := func(status int) []fault {
		return []fault{{status: status}, {status: status}, {status: status}, {status: status}, {status: status}}
	}
	cases := []struct {
		status       int
		read, write  error
		wantAttempts int
		// writeAttempts, if set, is the writes' number, else wantAttempts.
		writeAttempts int
	}{
		{http.StatusTooManyRequests, entry.ErrThrottled, entry.ErrThrottled, 4, 1},
		{http.StatusServiceUnavailable, entry.ErrThrottled, errUnknown, 4, 0},
		{http.StatusInternalServerError, errUnknown, errUnknown, 4, 0},
		{http.StatusRequestTimeout, errUnknown, errUnknown, 4, 0},
		{http.StatusForbidden, entry.ErrRefused, entry.ErrRefused, 1, 0},
		{http.StatusUnauthorized, entry.ErrRefused, entry.ErrRefused, 1, 0},
		{http.StatusBadRequest, entry.ErrRefused, entry.ErrRefused, 1, 0},
		{http.StatusNotFound, nil, entry.ErrRefused, 1, 0}, // a download's 404 is checked against the bucket
	}
	for _, tc := range cases {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			d := newDecider(t, c, freshObject(t))
			tok := faultproxy.MustWrite(t, d, faultproxy.Record(0, "w0", entry.LeaderToken{}))

			em.inject.clear()
			before := em.inject.count(uploads)
			em.inject.queue(all(tc.status)...)
			_, err := d.WriteEntry(t.Context(), faultproxy.Record(1, "w1", tok))
			if classOf(err) != tc.write {
				t.Errorf("write answered %d: %v\nis of class %q, want %q", tc.status, err, classOf(err), tc.write)
			}
			t.Logf("write: %v", err)
			if n, want := em.inject.count(uploads)-before, cmp.Or(tc.writeAttempts, tc.wantAttempts); n != want {
				t.Errorf("%d upload attempts, want %d", n, want)
			}

			em.inject.clear()
			before = em.inject.count(downloads)
			em.inject.queueFor(downloads, all(tc.status)...)
			got, err := d.ReadCurrent(t.Context())
			if tc.read == nil {
				// The bucket exists, so the object is taken as missing.
				if err != nil || got.ElectionNumber != entry.NoElections {
					t.Errorf("read answered %d: %+v, %v; want no elections", tc.status, got, err)
				}
			} else if classOf(err) != tc.read {
				t.Errorf("read answered %d: %v\nis of class %q, want %q", tc.status, err, classOf(err), tc.read)
			}
			t.Logf("read: %v", err)
			if n := em.inject.count(downloads) - before; n != tc.wantAttempts {
				t.Errorf("%d download attempts, want %d", n, tc.wantAttempts)
			}
			em.inject.clear()
		})
	}
}

// TestBucketCheckAnswers: the listing after a download's 404 can itself
// fail. A denied listing (no storage.objects.list) is a refusal that says
// which permission is missing; a throttled one is throttled.
func TestBucketCheckAnswers(t *testing.T) {
	em := newFaultyEmulator(t)
	c := newClient(t, em.addr)
	for status, want := range map[int]error{
		http.StatusForbidden:           entry.ErrRefused,
		http.StatusNotFound:            entry.ErrRefused,
		http.StatusTooManyRequests:     entry.ErrThrottled,
		http.StatusInternalServerError: errUnknown,
	} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			d := newDecider(t, c, freshObject(t))
			em.inject.queueFor(listings, fault{status: status}, fault{status: status}, fault{status: status}, fault{status: status})
			defer em.inject.clear()
			_, err := d.ReadCurrent(t.Context())
			if classOf(err) != want {
				t.Errorf("listing answered %d: %v\nis of class %q, want %q", status, err, classOf(err), want)
			}
			if status == http.StatusForbidden && !strings.Contains(err.Error(), "storage.objects.list") {
				t.Errorf("denied listing: %v; want it to name storage.objects.list", err)
			}
			t.Logf("%v", err)
		})
	}
}

// TestTokenEndpointAnswers: the client gets its token from an OAuth token
// endpoint before any request to Cloud Storage. A 4xx there (400
// invalid_grant: a deleted key, a disabled account) is a refusal naming the
// credentials, not an unknown outcome retried for ever; a 5xx or a 429 may
// pass, and is an unknown outcome.
func TestTokenEndpointAnswers(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	var storeRequests atomic.Int64
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		storeRequests.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer store.Close()
	for _, tc := range []struct {
		status int
		want   error
	}{
		{http.StatusBadRequest, entry.ErrRefused},
		{http.StatusUnauthorized, entry.ErrRefused},
		{http.StatusTooManyRequests, errUnknown},
		{http.StatusServiceUnavailable, errUnknown},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				w.Write([]byte(`{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`))
			}))
			defer tokens.Close()
			sa, err := json.Marshal(map[string]string{
				"type": "service_account", "project_id": "p", "private_key_id": "k1",
				"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
				"client_email": "sa@p.iam.gserviceaccount.com", "client_id": "1",
				"token_uri": tokens.URL + "/token",
			})
			if err != nil {
				t.Fatal(err)
			}
			c, err := storage.NewClient(t.Context(), option.WithAuthCredentialsJSON(option.ServiceAccount, sa),
				option.WithEndpoint(store.URL+"/storage/v1/"), option.WithScopes(storage.ScopeFullControl))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetRetry(storage.WithPolicy(storage.RetryNever))
			d, err := gcs.NewDecider(c, "bucket", "object")
			if err != nil {
				t.Fatal(err)
			}
			_, rerr := d.ReadCurrent(t.Context())
			_, werr := d.WriteEntry(t.Context(), faultproxy.Record(0, "w-0", entry.LeaderToken{}))
			for what, err := range map[string]error{"read": rerr, "write": werr} {
				if got := classOf(err); got != tc.want {
					t.Errorf("%s with the token endpoint answering %d: %v; want %v", what, tc.status, err, tc.want)
				} else if tc.want == entry.ErrRefused && !strings.Contains(err.Error(), "no usable Google credentials") {
					t.Errorf("%s: %q does not say the credentials are the trouble", what, err)
				}
			}
			if n := storeRequests.Load(); n != 0 {
				t.Errorf("Cloud Storage got %d requests; none can be sent without a token", n)
			}
		})
	}
}

// TestTLSFailureIsRefused: an https endpoint whose TLS cannot succeed, as an
// emulator's plain-HTTP port reached with https:// or a server whose
// certificate this host does not trust, never gets a request: not an
// unknown outcome retried for ever but a refusal naming the object, and
// Acquire ends.
func TestTLSFailureIsRefused(t *testing.T) {
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a request got through a TLS handshake that should fail")
	}))
	t.Cleanup(untrusted.Close)
	for name, addrOf := range map[string]func(t *testing.T) string{
		"an untrusted certificate":             func(*testing.T) string { return untrusted.Listener.Addr().String() },
		"fake-gcs-server's http port as https": func(t *testing.T) string { return newEmulator(t).addr },
	} {
		t.Run(name, func(t *testing.T) {
			c, err := storage.NewClient(t.Context(), option.WithEndpoint("https://"+addrOf(t)+"/storage/v1/"), option.WithoutAuthentication())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			racedecidertest.CheckRefuses(t, newDecider(t, c, "job"), "gs://"+testBucket+"/job")
		})
	}
}
