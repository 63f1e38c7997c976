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
	opts := fakeOptions()
	opts.NoListener = true
	srv, err := fakestorage.NewServerWithOptions(opts)
	if err != nil {
		t.Fatalf("starting fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: testBucket})
	in := &injector{next: srv.HTTPHandler()}
	hs := httptest.NewServer(in)
	t.Cleanup(hs.Close)
	return &emulator{srv: srv, addr: hs.Listener.Addr().String(), inject: in}
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
	d, err := gcs.NewDecider(c, testBucket, object, opts...)
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

// fault is an HTTP error the injector answers an upload with.
type fault struct {
	status int
	// apply runs the upload against the emulator first, so that the write
	// is applied although the client is told it failed.
	apply bool
}

// injector passes requests to the emulator, answering the next uploads with
// the queued faults instead.
type injector struct {
	next    http.Handler
	mu      sync.Mutex
	faults  []fault
	uploads int
}

func (in *injector) queue(fs ...fault) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.faults = append(in.faults, fs...)
}

func (in *injector) clear() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.faults = nil
}

func (in *injector) uploadCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.uploads
}

func (in *injector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/upload/") {
		in.next.ServeHTTP(w, r)
		return
	}
	in.mu.Lock()
	in.uploads++
	var f *fault
	if len(in.faults) > 0 {
		f = &in.faults[0]
		in.faults = in.faults[1:]
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
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.status)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":"injected by the test"}}`, f.status)
}
