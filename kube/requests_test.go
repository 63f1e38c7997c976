package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// Kinds of request that requests counts.
const (
	kindList  = "list"  // LIST of Leases
	kindWatch = "watch" // opening a WATCH
	kindGet   = "get"   // GET of one Lease
	kindWrite = "write" // create, update (dry runs too)
	kindGone  = "gone"  // a watch the server ended with 410 Gone, at once or in its stream
)

// requests counts what a client sends to the API server, by kind, every
// attempt included (client-go retries reads and watch openings itself), the
// protocols of the answers, and the watches that the server ended with 410
// Gone.
type requests struct {
	mu     sync.Mutex
	counts map[string]int
	order  []string // kinds, in the order sent
	protos map[string]int
	news   chan struct{} // closed and replaced at each request
}

// counting returns a copy of cfg whose requests r counts.
func (r *requests) counting(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			kind := requestKind(req)
			r.add(kind)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				return resp, err
			}
			r.mu.Lock()
			if r.protos == nil {
				r.protos = map[string]int{}
			}
			r.protos[resp.Proto]++
			r.mu.Unlock()
			if kind == kindWatch {
				if resp.StatusCode == http.StatusGone {
					r.add(kindGone)
				} else {
					resp.Body = &goneSniffer{ReadCloser: resp.Body, r: r}
				}
			}
			return resp, nil
		})
	})
	return c
}

func (r *requests) add(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	r.counts[kind]++
	r.order = append(r.order, kind)
	if r.news != nil {
		close(r.news)
		r.news = nil
	}
}

// await waits until cond, called with no lock held after each request, holds;
// it reports false if ctx ends first.
func (r *requests) await(ctx context.Context, cond func() bool) bool {
	for {
		r.mu.Lock()
		if r.news == nil {
			r.news = make(chan struct{})
		}
		news := r.news
		r.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-news:
		}
	}
}

// count returns how many requests of kind were sent.
func (r *requests) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[kind]
}

// sentAfter reports whether a request of kind was sent after the last one
// of kind after.
func (r *requests) sentAfter(kind, after string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.order) - 1; i >= 0; i-- {
		switch r.order[i] {
		case after:
			return false
		case kind:
			for _, k := range r.order[:i] {
				if k == after {
					return true
				}
			}
			return false
		}
	}
	return false
}

// onlyProto reports whether every answer came over proto ("HTTP/1.1").
func (r *requests) onlyProto(proto string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.protos) == 1 && r.protos[proto] > 0
}

// protoList lists the protocols the answers came over.
func (r *requests) protoList() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.protos)
}

func (r *requests) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d lists, %d watches, %d gets, %d writes; %d watches ended with 410 Gone",
		r.counts[kindList], r.counts[kindWatch], r.counts[kindGet], r.counts[kindWrite], r.counts[kindGone])
}

func requestKind(req *http.Request) string {
	if req.Method != http.MethodGet {
		return kindWrite
	}
	if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
		return kindWatch
	}
	if strings.HasSuffix(req.URL.Path, "/leases") {
		return kindList
	}
	return kindGet
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// goneSniffer counts a watch stream whose server ends it with a 410 Gone
// event. It looks for the Status reason "Expired", which JSON and protobuf
// both carry as plain text, and which no Lease the tests write contains.
type goneSniffer struct {
	io.ReadCloser
	r    *requests
	tail []byte
	seen bool
}

var expired = []byte(`Expired`)

func (s *goneSniffer) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if n > 0 && !s.seen {
		window := append(s.tail, p[:n]...)
		if bytes.Contains(window, expired) {
			s.seen = true
			s.r.add(kindGone)
		}
		s.tail = append([]byte(nil), window[max(0, len(window)-len(expired)+1):]...)
	}
	return n, err
}
