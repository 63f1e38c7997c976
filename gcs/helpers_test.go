package gcs_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"

	"github.com/racedecider/leaderelection/gcs"
)

const testBucket = "leader-election-test"

// emulator is an in-process fake-gcs-server on a real 127.0.0.1 listener.
type emulator struct {
	srv  *fakestorage.Server
	addr string // host:port clients (or proxies) connect to
	// inject, when the emulator was started by newFaultyEmulator, injects
	// HTTP errors into uploads.
	inject *injector
}

// fakeOptions configures the emulator so that the storage client's default
// XML reads work: XML downloads are routed by Host header, and a PublicHost
// without a port matches "127.0.0.1:<any port>", so the same emulator serves
// clients connecting directly and through any fault proxy.
func fakeOptions() fakestorage.Options {
	return fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1"}
}

func newEmulator(t *testing.T) *emulator {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakeOptions())
	if err != nil {
		t.Fatalf("starting fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: testBucket})
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	return &emulator{srv: srv, addr: u.Host}
}

// newFaultyEmulator serves the emulator's handler behind an injector that can
// answer uploads with HTTP errors.
func newFaultyEmulator(t *testing.T) *emulator {
	t.Helper()
	var in *injector
	e := newEmulatorBehind(t, func(next http.Handler) http.Handler {
		in = &injector{next: next}
		return in
	})
	e.inject = in
	return e
}

// newEmulatorBehind serves the emulator's handler through the handler wrap
// makes of it.
func newEmulatorBehind(t *testing.T, wrap func(next http.Handler) http.Handler) *emulator {
	t.Helper()
	opts := fakeOptions()
	opts.NoListener = true
	srv, err := fakestorage.NewServerWithOptions(opts)
	if err != nil {
		t.Fatalf("starting fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: testBucket})
	hs := httptest.NewServer(wrap(srv.HTTPHandler()))
	t.Cleanup(hs.Close)
	return &emulator{srv: srv, addr: hs.Listener.Addr().String()}
}

// client returns a storage client for the emulator reached at addr (the
// emulator's own address or a proxy's).
func newClient(t *testing.T, addr string, opts ...option.ClientOption) *storage.Client {
	t.Helper()
	opts = append([]option.ClientOption{
		option.WithEndpoint("http://" + addr + "/storage/v1/"),
		option.WithoutAuthentication(),
	}, opts...)
	c, err := storage.NewClient(t.Context(), opts...)
	if err != nil {
		t.Fatalf("storage.NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var objectSeq atomic.Int64

// freshObject returns an object name no other test uses.
func freshObject(t *testing.T) string {
	return fmt.Sprintf("elections/%s/%d", t.Name(), objectSeq.Add(1))
}

func newDecider(t *testing.T, c *storage.Client, object string, opts ...gcs.Option) *gcs.Decider {
	t.Helper()
	// fake-gcs-server does not throttle, and the tests' terms are shorter
	// than Cloud Storage's write rate allows (see TestWriteInterval).
	d, err := gcs.NewDecider(c, testBucket, object, append([]gcs.Option{gcs.WithMinWriteInterval(0)}, opts...)...)
	if err != nil {
		t.Fatalf("NewDecider: %v", err)
	}
	return d
}

// setRaw stores data as the object's content directly in the emulator,
// bypassing the backend.
func (e *emulator) setRaw(object string, data []byte) {
	e.srv.CreateObject(fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{BucketName: testBucket, Name: object, ContentType: gcs.ContentType},
		Content:     data,
	})
}

// fault is an HTTP error the injector answers a request with.
type fault struct {
	status int
	// apply runs the upload against the emulator first, so that the write
	// is applied although the client is told it failed.
	apply bool
}

// kind is the kind of request a fault is injected into.
type kind int

const (
	uploads   kind = iota // JSON API uploads: /upload/storage/v1/...
	downloads             // XML API downloads (the client's default): GET /BUCKET/OBJECT
	listings              // JSON API object listings: GET /storage/v1/b/BUCKET/o
)

func kindOf(r *http.Request) kind {
	switch {
	case strings.HasPrefix(r.URL.Path, "/upload/"):
		return uploads
	case strings.HasPrefix(r.URL.Path, "/storage/v1/b/") && strings.HasSuffix(r.URL.Path, "/o"):
		return listings
	}
	return downloads
}

// injector passes requests to the emulator, answering the next requests of
// each kind with the faults queued for it instead.
type injector struct {
	next   http.Handler
	mu     sync.Mutex
	faults map[kind][]fault
	counts map[kind]int
}

// queue queues faults for the next uploads.
func (in *injector) queue(fs ...fault) { in.queueFor(uploads, fs...) }

func (in *injector) queueFor(k kind, fs ...fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.faults == nil {
		in.faults = map[kind][]fault{}
	}
	in.faults[k] = append(in.faults[k], fs...)
}

func (in *injector) clear() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.faults = nil
}

func (in *injector) uploadCount() int { return in.count(uploads) }

func (in *injector) count(k kind) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.counts[k]
}

func (in *injector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k := kindOf(r)
	in.mu.Lock()
	if in.counts == nil {
		in.counts = map[kind]int{}
	}
	in.counts[k]++
	var f *fault
	if q := in.faults[k]; len(q) > 0 {
		f = &q[0]
		in.faults[k] = q[1:]
	}
	in.mu.Unlock()
	if f == nil {
		in.next.ServeHTTP(w, r)
		return
	}
	if f.apply {
		in.next.ServeHTTP(httptest.NewRecorder(), r)
	} else {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	writeGCSError(w, f.status, k != downloads)
}

// gcsErrors holds, for each status the tests inject, the error Cloud
// Storage documents for it ("HTTP status and error codes for JSON" and
// "... for XML"): the JSON API's reason and message, and the XML API's code.
var gcsErrors = map[int]struct{ reason, message, xmlCode string }{
	400: {"invalid", "Invalid argument.", "InvalidArgument"},
	401: {"required", "Login Required", "AuthenticationRequired"},
	403: {"forbidden", "caller does not have storage.objects.create access to the Google Cloud Storage object.", "AccessDenied"},
	404: {"notFound", "The specified bucket does not exist.", "NoSuchBucket"},
	408: {"uploadBrokenConnection", "Request timeout.", "RequestTimeout"},
	429: {"rateLimitExceeded", "The object exceeded the rate limit for object mutation operations (create, update, and delete). Please reduce your request rate.", "SlowDown"},
	500: {"backendError", "Backend Error", "InternalError"},
	503: {"backendError", "Backend Error", "ServiceUnavailable"},
}

// writeGCSError answers with Cloud Storage's error document for status: the
// JSON API's, or the XML API's for XML downloads.
func writeGCSError(w http.ResponseWriter, status int, json bool) {
	e, ok := gcsErrors[status]
	if !ok {
		e.reason, e.message, e.xmlCode = "unknown", http.StatusText(status), "Unknown"
	}
	if json {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"domain":"global","reason":%q}]}}`,
			status, e.message, e.message, e.reason)
		return
	}
	w.Header().Set("Content-Type", "application/xml; charset=UTF-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version='1.0' encoding='UTF-8'?><Error><Code>%s</Code><Message>%s</Message></Error>`, e.xmlCode, e.message)
}
