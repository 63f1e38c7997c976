package faultproxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/internal/faultproxy"
)

// backend is an HTTP server counting the requests that reach it.
func backend(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
		_, _ = io.WriteString(w, "ok "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// post sends a POST, which net/http never retries on its own, so that every
// fault reaches the caller.
func post(c *http.Client, p *faultproxy.Proxy, path string) (string, error) {
	resp, err := c.Post("http://"+p.Addr()+path, "text/plain", strings.NewReader("body"))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func mustPost(t *testing.T, c *http.Client, p *faultproxy.Proxy, path string) {
	t.Helper()
	got, err := post(c, p, path)
	if err != nil {
		t.Fatalf("POST %s through the proxy: %v", path, err)
	}
	if want := "ok " + path; got != want {
		t.Fatalf("POST %s: body %q, want %q", path, got, want)
	}
}

func TestForwardsOverKeepAlive(t *testing.T) {
	srv, hits := backend(t)
	p := faultproxy.Start(t, srv.Listener.Addr().String())
	c := client(t)
	for _, path := range []string{"/a", "/b", "/c"} {
		mustPost(t, c, p, path)
	}
	if hits.Load() != 3 {
		t.Errorf("backend saw %d requests, want 3", hits.Load())
	}
	st := p.Stats()
	if st.Connections != 1 || st.Requests != 3 {
		t.Errorf("Stats = %+v, want 1 connection carrying 3 requests", st)
	}
}

func TestDropResponses(t *testing.T) {
	srv, hits := backend(t)
	p := faultproxy.Start(t, srv.Listener.Addr().String())
	c := client(t)
	mustPost(t, c, p, "/warm") // the next request reuses this connection
	p.DropResponses(1)
	if _, err := post(c, p, "/dropped"); err == nil {
		t.Fatal("request with a dropped response succeeded")
	}
	if hits.Load() != 2 {
		t.Errorf("backend saw %d requests, want 2: a dropped response's request must be delivered", hits.Load())
	}
	mustPost(t, c, p, "/after")
	if st := p.Stats(); st.DroppedResponses != 1 {
		t.Errorf("Stats = %+v, want 1 dropped response", st)
	}
}

func TestResetNext(t *testing.T) {
	srv, hits := backend(t)
	p := faultproxy.Start(t, srv.Listener.Addr().String())
	c := client(t)
	mustPost(t, c, p, "/warm")
	p.ResetNext(2)
	for range 2 {
		if _, err := post(c, p, "/reset"); err == nil {
			t.Fatal("request on a reset connection succeeded")
		}
	}
	if hits.Load() != 1 {
		t.Errorf("backend saw %d requests, want 1: a reset request must not be forwarded", hits.Load())
	}
	mustPost(t, c, p, "/after")
	if st := p.Stats(); st.Resets != 2 {
		t.Errorf("Stats = %+v, want 2 resets", st)
	}
	p.ResetNext(5)
	p.ResetNext(0)
	mustPost(t, c, p, "/disarmed")
}

func TestCut(t *testing.T) {
	srv, hits := backend(t)
	p := faultproxy.Start(t, srv.Listener.Addr().String())
	c := client(t)
	mustPost(t, c, p, "/warm")
	p.SetCut(true)
	for range 3 {
		if _, err := post(c, p, "/cut"); err == nil {
			t.Fatal("request through a cut proxy succeeded")
		}
	}
	if hits.Load() != 1 {
		t.Errorf("backend saw %d requests, want 1", hits.Load())
	}
	p.SetCut(false)
	mustPost(t, c, p, "/restored")
}

func TestCutClosesOpenConnections(t *testing.T) {
	block := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	p := faultproxy.Start(t, srv.Listener.Addr().String())
	c := client(t)
	errc := make(chan error, 1)
	go func() {
		_, err := post(c, p, "/hang")
		errc <- err
	}()
	// Cut once the request is in flight.
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("request never reached the backend")
	}
	p.SetCut(true)
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("request in flight across a cut succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("request in flight across a cut still hangs after 5s")
	}
}

func TestLatency(t *testing.T) {
	srv, _ := backend(t)
	p := faultproxy.Start(t, srv.Listener.Addr().String())
	c := client(t)
	p.SetLatency(50 * time.Millisecond)
	start := time.Now()
	mustPost(t, c, p, "/slow")
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("request took %v with 50ms latency", d)
	}
	p.SetLatency(0)
}

func TestCloseEndsConnections(t *testing.T) {
	srv, _ := backend(t)
	p := faultproxy.Start(t, srv.Listener.Addr().String())
	c := client(t)
	mustPost(t, c, p, "/a")
	p.Close()
	p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.Addr()+"/b", strings.NewReader("x"))
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request through a closed proxy succeeded")
	}
}
