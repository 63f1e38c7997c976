package s3_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/racedecider/leaderelection/entry"
	les3 "github.com/racedecider/leaderelection/s3"
)

// canned is one answer of a cannedServer.
type canned struct {
	status int
	code   string // S3 error code for the XML body; "" sends an empty body
	etag   string
	body   []byte
	hang   bool // wait until the request's context ends, answering nothing
}

// cannedServer answers S3 requests with canned responses, one per request in
// order (the last one repeats), to test how the backend reads answers that
// gofakes3 and versitygw do not give: AWS's, and odd servers'.
type cannedServer struct {
	t       *testing.T
	url     string
	arrived chan struct{} // receives once per request, if anyone listens

	mu      sync.Mutex
	answers []canned
	seen    []http.Header
}

func newCannedServer(t *testing.T, answers ...canned) *cannedServer {
	cs := &cannedServer{t: t, answers: answers, arrived: make(chan struct{}, 100)}
	srv := httptest.NewServer(http.HandlerFunc(cs.serve))
	t.Cleanup(srv.Close)
	cs.url = srv.URL
	return cs
}

func (cs *cannedServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	cs.mu.Lock()
	cs.seen = append(cs.seen, r.Header.Clone())
	a := cs.answers[0]
	if len(cs.answers) > 1 {
		cs.answers = cs.answers[1:]
	}
	cs.mu.Unlock()
	cs.arrived <- struct{}{}
	if a.hang {
		<-r.Context().Done()
		return
	}
	if a.etag != "" {
		w.Header().Set("ETag", a.etag)
	}
	w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
	if a.status >= 300 && a.code != "" {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(a.status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>canned</Message><RequestId>r1</RequestId></Error>`, a.code)
		return
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

func (cs *cannedServer) requests() []http.Header {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.seen
}

func (cs *cannedServer) decider(t *testing.T, opts ...les3.Option) *les3.Decider {
	s := &store{endpoint: cs.url, access: "a", secret: "s"}
	d, err := les3.NewDecider(s.client(t, ""), "bucket", "key", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestWriteAnswers(t *testing.T) {
	const oldETag = `"0123456789abcdef0123456789abcdef"`
	ok := canned{status: 200, etag: `"fedcba9876543210fedcba9876543210"`}
	cases := []struct {
		name         string
		ifMatch      bool
		answers      []canned
		wantErr      bool
		wantLost     bool
		wantAttempts int
	}{
		{"created", false, []canned{ok}, false, false, 1},
		{"replaced", true, []canned{ok}, false, false, 1},
		{"412 PreconditionFailed on create", false, []canned{{status: 412, code: "PreconditionFailed"}}, true, true, 1},
		{"412 PreconditionFailed on replace", true, []canned{{status: 412, code: "PreconditionFailed"}}, true, true, 1},
		{"412 with an empty body", true, []canned{{status: 412}}, true, true, 1},
		{"409 ConditionalRequestConflict", true, []canned{{status: 409, code: "ConditionalRequestConflict"}}, true, true, 1},
		{"404 NoSuchKey on replace (AWS: the record is gone)", true, []canned{{status: 404, code: "NoSuchKey"}}, true, true, 1},
		{"404 with an empty body on replace", true, []canned{{status: 404}}, true, true, 1},
		{"404 NoSuchBucket on replace", true, []canned{{status: 404, code: "NoSuchBucket"}}, true, false, 1},
		{"404 NoSuchBucket on create", false, []canned{{status: 404, code: "NoSuchBucket"}}, true, false, 1},
		{"403 AccessDenied", true, []canned{{status: 403, code: "AccessDenied"}}, true, false, 1},
		{"409 of another kind", true, []canned{{status: 409, code: "OperationAborted"}}, true, false, 1},
		{"503 then success", true, []canned{{status: 503, code: "SlowDown"}, ok}, false, false, 2},
		{"500 then 412: the retry may have been refused because of our own write", true,
			[]canned{{status: 500, code: "InternalError"}, {status: 412, code: "PreconditionFailed"}}, true, false, 2},
		{"500 then 404 NoSuchKey", true,
			[]canned{{status: 500, code: "InternalError"}, {status: 404, code: "NoSuchKey"}}, true, false, 2},
		{"500 on every attempt", true, []canned{{status: 500, code: "InternalError"}}, true, false, 3},
		{"success without an ETag", true, []canned{{status: 200}}, true, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := newCannedServer(t, tc.answers...)
			d := cs.decider(t)
			e := &entry.RaceEntry{ElectionNumber: 1, Term: 1, LeaderID: "a", WriteID: "w-1"}
			if tc.ifMatch {
				e.Token = entry.LeaderToken{Version: oldETag}
			}
			tok, err := d.WriteEntry(t.Context(), e)
			switch {
			case !tc.wantErr && err != nil:
				t.Fatalf("WriteEntry: %v, want success", err)
			case !tc.wantErr && tok.Version != ok.etag:
				t.Errorf("token %q, want the ETag %s", tok.Version, ok.etag)
			case tc.wantErr && err == nil:
				t.Fatalf("WriteEntry succeeded with token %+v, want an error", tok)
			case errors.Is(err, entry.ErrRaceLost) != tc.wantLost:
				t.Errorf("WriteEntry: %v; wraps entry.ErrRaceLost: %v, want %v", err, !tc.wantLost, tc.wantLost)
			}
			if err != nil {
				t.Logf("error: %v", err)
			}
			reqs := cs.requests()
			if len(reqs) != tc.wantAttempts {
				t.Errorf("%d requests, want %d", len(reqs), tc.wantAttempts)
			}
			for _, h := range reqs {
				im, inm := h.Get("If-Match"), h.Get("If-None-Match")
				if tc.ifMatch && (im != oldETag || inm != "") {
					t.Errorf("replace sent If-Match %q, If-None-Match %q; want %s and none", im, inm, oldETag)
				}
				if !tc.ifMatch && (im != "" || inm != "*") {
					t.Errorf("create sent If-Match %q, If-None-Match %q; want none and *", im, inm)
				}
			}
		})
	}
}

func TestReadAnswers(t *testing.T) {
	rec := &entry.RaceEntry{ElectionNumber: 4, Term: 2, LeaderID: "a", WriteID: "w-4"}
	body, err := entry.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	const etag = `"fedcba9876543210fedcba9876543210"`
	cases := []struct {
		name      string
		answer    canned
		wantErr   string // "" for success
		wantEmpty bool
	}{
		{"record", canned{status: 200, etag: etag, body: body}, "", false},
		{"404 NoSuchKey", canned{status: 404, code: "NoSuchKey"}, "", true},
		{"404 with an empty body", canned{status: 404}, "", true},
		{"404 NoSuchBucket", canned{status: 404, code: "NoSuchBucket"}, "NoSuchBucket", false},
		{"403 AccessDenied (missing object without s3:ListBucket)", canned{status: 403, code: "AccessDenied"}, "AccessDenied", false},
		{"record without an ETag", canned{status: 200, body: body}, "no ETag", false},
		{"oversized object", canned{status: 200, etag: etag, body: make([]byte, 2<<20)}, "larger than", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newCannedServer(t, tc.answer).decider(t)
			got, err := d.ReadCurrent(t.Context())
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ReadCurrent = %+v, nil; want an error", got)
				}
				if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "s3://bucket/key") {
					t.Errorf("error %q does not say %q and name s3://bucket/key", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadCurrent: %v", err)
			}
			if tc.wantEmpty {
				if got.ElectionNumber != entry.NoElections || !got.Token.IsZero() {
					t.Errorf("ReadCurrent = %+v, want no elections and a zero token", got)
				}
				return
			}
			if got.WriteID != rec.WriteID || got.Token.Version != etag || got.Token.CommitTime.IsZero() {
				t.Errorf("ReadCurrent = %+v, want write id %s, token %s with a commit time", got, rec.WriteID, etag)
			}
		})
	}
}

// TestHangingServer: a server that accepts the request and never answers
// gives an error within WithTimeout, and a context cancelled while a request
// is in flight gives an error wrapping context.Canceled.
func TestHangingServer(t *testing.T) {
	e := &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"}
	t.Run("timeout", func(t *testing.T) {
		d := newCannedServer(t, canned{hang: true}).decider(t, les3.WithTimeout(200*time.Millisecond))
		_, err := d.ReadCurrent(t.Context())
		if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") {
			t.Errorf("ReadCurrent from a hanging server: err = %v, want a timeout", err)
		}
		_, err = d.WriteEntry(t.Context(), e)
		if err == nil || errors.Is(err, entry.ErrRaceLost) || !strings.Contains(err.Error(), "no answer within 200ms") {
			t.Errorf("WriteEntry to a hanging server: err = %v, want a timeout (not a lost race)", err)
		}
	})
	t.Run("cancelled in flight", func(t *testing.T) {
		cs := newCannedServer(t, canned{hang: true})
		d := cs.decider(t, les3.WithTimeout(0))
		for name, call := range map[string]func(context.Context) error{
			"ReadCurrent": func(ctx context.Context) error { _, err := d.ReadCurrent(ctx); return err },
			"WriteEntry":  func(ctx context.Context) error { _, err := d.WriteEntry(ctx, e); return err },
		} {
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				<-cs.arrived
				cancel()
			}()
			if err := call(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, entry.ErrRaceLost) {
				t.Errorf("%s cancelled in flight: err = %v, want one wrapping context.Canceled", name, err)
			}
			cancel()
		}
	})
}
