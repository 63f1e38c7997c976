package s3_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/awscreds/awscredstest"
	"github.com/racedecider/leaderelection/racedecidertest"
	les3 "github.com/racedecider/leaderelection/s3"
)

// canned is one answer of a cannedServer.
type canned struct {
	status int
	code   string // S3 error code: the body is S3's XML error document for it
	etag   string
	body   []byte // the body when code is "" (none: an empty body)
	ctype  string // Content-Type of body
	hang   bool   // wait until the request's context ends, answering nothing
}

// s3Errors holds, for each S3 error code the tests send, the message AWS
// documents for it (Amazon S3 API Reference, "Error responses", list of
// error codes) and the extra element S3 adds to the error document.
var s3Errors = map[string]struct{ message, extra string }{
	"NoSuchKey":                  {"The specified key does not exist.", "<Key>key</Key>"},
	"NoSuchBucket":               {"The specified bucket does not exist", "<BucketName>bucket</BucketName>"},
	"AccessDenied":               {"Access Denied", ""},
	"InvalidAccessKeyId":         {"The AWS access key ID you provided does not exist in our records.", "<AWSAccessKeyId>a</AWSAccessKeyId>"},
	"PreconditionFailed":         {"At least one of the pre-conditions you specified did not hold", "<Condition>If-Match</Condition>"},
	"ConditionalRequestConflict": {"A conflicting operation occurred. If using PutObject you can retry the request.", ""},
	"OperationAborted":           {"A conflicting conditional operation is currently in progress against this resource. Try again.", ""},
	"SlowDown":                   {"Please reduce your request rate.", ""},
	"InternalError":              {"We encountered an internal error. Please try again.", ""},
	"ServiceUnavailable":         {"Reduce your request rate.", ""},
	"NotImplemented":             {"A header you provided implies functionality that is not implemented.", "<Header>If-None-Match</Header>"},
	"MethodNotAllowed":           {"The specified method is not allowed against this resource.", "<Method>PUT</Method><ResourceType>OBJECT</ResourceType>"},
	"InvalidArgument":            {"Invalid Argument", ""},
	"RequestTimeout":             {"Your socket connection to the server was not read from or written to within the timeout period.", ""},
	"PermanentRedirect":          {"The bucket you are attempting to access must be addressed using the specified endpoint. Please send all future requests to this endpoint.", "<Bucket>bucket</Bucket><Endpoint>bucket.s3.eu-west-1.amazonaws.com</Endpoint>"},
	"TooManyRequests":            {"Please reduce your request rate.", ""},
	"ExpiredToken":               {"The provided token has expired.", ""},
}

// errorDocument returns S3's XML error document for code.
func errorDocument(t *testing.T, code string) []byte {
	e, ok := s3Errors[code]
	if !ok {
		t.Errorf("no documented message for S3 error code %s", code)
	}
	return fmt.Appendf(nil, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message>%s<RequestId>4442587FB7D0A2F9</RequestId>`+
		`<HostId>Uuag1LuByRx9e6j5Onimru9pO4ZVKnJ2Qz7/C1NPcfTWAtRPfTaOFg==</HostId></Error>`, code, e.message, e.extra)
}

// notFoundPages are the answers of servers that are not S3 to any request:
// Go's http.NotFound, a web server's HTML page, and a bare 404.
var notFoundPages = []struct {
	name, ctype, body string
}{
	{"text/plain", "text/plain; charset=utf-8", "404 page not found\n"},
	{"HTML", "text/html", "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"},
	{"empty", "", ""},
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
	host    []string
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
	cs.host = append(cs.host, r.Host)
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
	if a.code != "" {
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("x-amz-request-id", "4442587FB7D0A2F9")
		w.WriteHeader(a.status)
		_, _ = w.Write(errorDocument(cs.t, a.code))
		return
	}
	if a.ctype != "" {
		w.Header().Set("Content-Type", a.ctype)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

func (cs *cannedServer) requests() []http.Header {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.seen
}

func (cs *cannedServer) hosts() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.host
}

func (cs *cannedServer) decider(t *testing.T, opts ...les3.Option) *les3.Decider {
	s := &store{endpoint: cs.url, access: "a", secret: "s"}
	d, err := les3.NewDecider(s.client(t, ""), "bucket", "key", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

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

// TestWriteAnswers maps every answer S3 gives a conditional PutObject to its
// class, with the status codes and XML error documents S3 sends.
func TestWriteAnswers(t *testing.T) {
	const oldETag = `"0123456789abcdef0123456789abcdef"`
	ok := canned{status: 200, etag: `"fedcba9876543210fedcba9876543210"`}
	e := func(status int, code string) canned { return canned{status: status, code: code} }
	cases := []struct {
		name         string
		ifMatch      bool
		answers      []canned
		want         error // nil: success
		wantAttempts int
	}{
		{"created", false, []canned{ok}, nil, 1},
		{"replaced", true, []canned{ok}, nil, 1},
		{"412 PreconditionFailed on create", false, []canned{e(412, "PreconditionFailed")}, entry.ErrRaceLost, 1},
		{"412 PreconditionFailed on replace", true, []canned{e(412, "PreconditionFailed")}, entry.ErrRaceLost, 1},
		{"412 with an empty body", true, []canned{{status: 412}}, entry.ErrRaceLost, 1},
		{"409 ConditionalRequestConflict", true, []canned{e(409, "ConditionalRequestConflict")}, entry.ErrRaceLost, 1},
		{"404 NoSuchKey on replace (AWS: the record is gone)", true, []canned{e(404, "NoSuchKey")}, entry.ErrRaceLost, 1},
		{"404 NoSuchKey on create", false, []canned{e(404, "NoSuchKey")}, entry.ErrRefused, 1},
		{"404 with an empty body on replace", true, []canned{{status: 404}}, entry.ErrRefused, 1},
		{"404 with an empty body on create", false, []canned{{status: 404}}, entry.ErrRefused, 1},
		{"404 NoSuchBucket on replace", true, []canned{e(404, "NoSuchBucket")}, entry.ErrRefused, 1},
		{"404 NoSuchBucket on create", false, []canned{e(404, "NoSuchBucket")}, entry.ErrRefused, 1},
		{"403 AccessDenied", true, []canned{e(403, "AccessDenied")}, entry.ErrRefused, 1},
		{"403 InvalidAccessKeyId", false, []canned{e(403, "InvalidAccessKeyId")}, entry.ErrRefused, 1},
		{"400 InvalidArgument", true, []canned{e(400, "InvalidArgument")}, entry.ErrRefused, 1},
		{"405 MethodNotAllowed", true, []canned{e(405, "MethodNotAllowed")}, entry.ErrRefused, 1},
		{"501 NotImplemented (no conditional writes)", false, []canned{e(501, "NotImplemented")}, entry.ErrRefused, 1},
		{"301 PermanentRedirect (another region)", false, []canned{e(301, "PermanentRedirect")}, entry.ErrRefused, 1},
		{"409 OperationAborted", true, []canned{e(409, "OperationAborted")}, entry.ErrThrottled, 1},
		{"503 SlowDown then success", true, []canned{e(503, "SlowDown"), ok}, nil, 2},
		{"503 SlowDown on every attempt", true, []canned{e(503, "SlowDown")}, entry.ErrThrottled, 3},
		// The SDK retries a 429 as throttling too; the engine backs off
		// after the last attempt.
		{"429", false, []canned{e(429, "TooManyRequests")}, entry.ErrThrottled, 3},
		{"429 then success", false, []canned{e(429, "TooManyRequests"), ok}, nil, 2},
		{"503 SlowDown then 412: not applied, lost", true,
			[]canned{e(503, "SlowDown"), e(412, "PreconditionFailed")}, entry.ErrRaceLost, 2},
		{"500 then 412: the retry may have been refused because of our own write", true,
			[]canned{e(500, "InternalError"), e(412, "PreconditionFailed")}, errUnknown, 2},
		{"500 then 404 NoSuchKey", true, []canned{e(500, "InternalError"), e(404, "NoSuchKey")}, errUnknown, 2},
		{"500 then 503 SlowDown: the first may have been applied", true,
			[]canned{e(500, "InternalError"), e(503, "SlowDown")}, errUnknown, 3},
		{"500 then 403", true, []canned{e(500, "InternalError"), e(403, "AccessDenied")}, errUnknown, 2},
		{"500 on every attempt", true, []canned{e(500, "InternalError")}, errUnknown, 3},
		{"503 ServiceUnavailable on every attempt", true, []canned{e(503, "ServiceUnavailable")}, errUnknown, 3},
		{"400 RequestTimeout (body not received in time)", true, []canned{e(400, "RequestTimeout")}, errUnknown, 3},
		// The decider's static credentials are never renewed: the token
		// stays expired (see TestExpiredToken for credentials that are).
		{"400 ExpiredToken, static credentials", true, []canned{e(400, "ExpiredToken")}, entry.ErrRefused, 1},
		{"success without an ETag", true, []canned{{status: 200}}, errUnknown, 1},
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
			case tc.want == nil && err != nil:
				t.Fatalf("WriteEntry: %v, want success", err)
			case tc.want == nil && tok.Version != ok.etag:
				t.Errorf("token %q, want the ETag %s", tok.Version, ok.etag)
			case tc.want != nil && err == nil:
				t.Fatalf("WriteEntry succeeded with token %+v, want an error", tok)
			case tc.want != nil && classOf(err) != tc.want:
				t.Errorf("WriteEntry: %v\nis of class %q, want %q", err, classOf(err), tc.want)
			}
			if err != nil {
				t.Logf("error: %v", err)
				if !strings.Contains(err.Error(), "s3://bucket/key") {
					t.Errorf("error %q does not name s3://bucket/key", err)
				}
				if classOf(err) == entry.ErrRefused && !strings.Contains(err.Error(), cs.url) {
					t.Errorf("refusal %q does not name the endpoint %s", err, cs.url)
				}
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

// TestReadAnswers maps every answer S3 gives a GetObject to its class.
func TestReadAnswers(t *testing.T) {
	rec := &entry.RaceEntry{ElectionNumber: 4, Term: 2, LeaderID: "a", WriteID: "w-4"}
	body, err := entry.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	const etag = `"fedcba9876543210fedcba9876543210"`
	e := func(status int, code string) canned { return canned{status: status, code: code} }
	cases := []struct {
		name      string
		answer    canned
		want      error  // nil: success
		wantText  string // in the error
		wantEmpty bool
	}{
		{"record", canned{status: 200, etag: etag, body: body}, nil, "", false},
		{"404 NoSuchKey", e(404, "NoSuchKey"), nil, "", true},
		{"404 with an empty body", canned{status: 404}, entry.ErrRefused, "404 without an S3 error code", false},
		{"404 NoSuchBucket", e(404, "NoSuchBucket"), entry.ErrRefused, "NoSuchBucket", false},
		{"403 AccessDenied (missing object without s3:ListBucket)", e(403, "AccessDenied"), entry.ErrRefused, "s3:ListBucket", false},
		{"503 SlowDown", e(503, "SlowDown"), entry.ErrThrottled, "SlowDown", false},
		{"429", e(429, "TooManyRequests"), entry.ErrThrottled, "429", false},
		{"500 InternalError", e(500, "InternalError"), errUnknown, "InternalError", false},
		{"record without an ETag", canned{status: 200, body: body}, errUnknown, "no ETag", false},
		{"oversized object", canned{status: 200, etag: etag, body: make([]byte, 2<<20)}, entry.ErrCorruptRecord, "larger than", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newCannedServer(t, tc.answer).decider(t)
			got, err := d.ReadCurrent(t.Context())
			if tc.want != nil {
				if err == nil {
					t.Fatalf("ReadCurrent = %+v, nil; want an error", got)
				}
				t.Logf("error: %v", err)
				if tc.want == entry.ErrCorruptRecord {
					if !errors.Is(err, tc.want) {
						t.Errorf("ReadCurrent: %v; want an error wrapping %v", err, tc.want)
					}
				} else if classOf(err) != tc.want {
					t.Errorf("ReadCurrent: %v\nis of class %q, want %q", err, classOf(err), tc.want)
				}
				if !strings.Contains(err.Error(), tc.wantText) || !strings.Contains(err.Error(), "s3://bucket/key") {
					t.Errorf("error %q does not say %q and name s3://bucket/key", err, tc.wantText)
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

// TestNotAnS3Endpoint points the backend at servers that answer every
// request with 404, as a web server or a wrong port does. Neither a read nor
// a write may take that for a missing record or a lost race: both are
// refusals, after one request each, naming the endpoint and the object.
// (Taking the read's 404 for "no election yet" and the write's for an
// unknown outcome once made every candidate loop at hundreds of requests a
// second.)
func TestNotAnS3Endpoint(t *testing.T) {
	for _, page := range notFoundPages {
		t.Run(page.name, func(t *testing.T) {
			cs := newCannedServer(t, canned{status: 404, ctype: page.ctype, body: []byte(page.body)})
			d := cs.decider(t)
			start := time.Now()
			_, rerr := d.ReadCurrent(t.Context())
			_, cerr := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"})
			_, werr := d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, LeaderID: "a", WriteID: "w-1",
				Token: entry.LeaderToken{Version: `"0123456789abcdef0123456789abcdef"`}})
			elapsed := time.Since(start)
			for what, err := range map[string]error{"ReadCurrent": rerr, "WriteEntry (create)": cerr, "WriteEntry (replace)": werr} {
				if !errors.Is(err, entry.ErrRefused) {
					t.Errorf("%s: %v; want an error wrapping entry.ErrRefused", what, err)
					continue
				}
				for _, w := range []string{cs.url, "s3://bucket/key", "404"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q does not say %q", what, err, w)
					}
				}
			}
			t.Logf("read: %v", rerr)
			if n := len(cs.requests()); n != 3 {
				t.Errorf("%d requests for three calls, want 3 (no retries of a refusal)", n)
			}
			if elapsed > 5*time.Second {
				t.Errorf("three refused calls took %v", elapsed)
			}
		})
	}
}

// TestPathStyleHint: a client that puts the bucket in the host name of a
// custom endpoint, reaching (as through wildcard DNS) a server that serves
// buckets by path only. The server reads the key as a bucket name and
// answers NoSuchBucket, or 404 without a code; the error suggests
// path_style=true. A client that already uses path-style gets no such hint.
func TestPathStyleHint(t *testing.T) {
	for _, answer := range []canned{{status: 404, code: "NoSuchBucket"}, {status: 404}} {
		cs := newCannedServer(t, answer)
		addr := strings.TrimPrefix(cs.url, "http://")
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		t.Cleanup(tr.CloseIdleConnections)
		endpoint := "http://s3.example.test:" + addr[strings.LastIndex(addr, ":")+1:]
		for _, pathStyle := range []bool{false, true} {
			c := s3.New(s3.Options{
				Region:       "us-east-1",
				BaseEndpoint: aws.String(endpoint),
				UsePathStyle: pathStyle,
				Credentials:  credentials.NewStaticCredentialsProvider("a", "s", ""),
				HTTPClient:   &http.Client{Transport: tr},
			})
			d, err := les3.NewDecider(c, "bucket", "key")
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.ReadCurrent(t.Context())
			if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), endpoint) {
				t.Fatalf("read: %v; want a refusal naming %s", err, endpoint)
			}
			if got := strings.Contains(err.Error(), "path_style=true"); got != !pathStyle {
				t.Errorf("UsePathStyle %v, answer %d %s: %q suggests path_style=true: %v, want %v",
					pathStyle, answer.status, answer.code, err, got, !pathStyle)
			}
		}
		if host := cs.hosts(); len(host) == 0 || !strings.HasPrefix(host[0], "bucket.s3.example.test") {
			t.Errorf("virtual-hosted request went to host %q, want bucket.s3.example.test:...", host)
		}
	}
}

// TestPathStyleHintNoSuchHost: without wildcard DNS, a virtual-hosted
// request to a custom endpoint fails to resolve the bucket's host name. That
// is no answer from the store (an unknown outcome), but the error names the
// endpoint and suggests path_style=true.
func TestPathStyleHintNoSuchHost(t *testing.T) {
	c := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://s3.example.invalid:7070"),
		Credentials:  credentials.NewStaticCredentialsProvider("a", "s", ""),
		Retryer:      aws.NopRetryer{},
	})
	d, err := les3.NewDecider(c, "bucket", "key")
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.ReadCurrent(t.Context())
	if classOf(err) != errUnknown || !strings.Contains(err.Error(), "s3.example.invalid") || !strings.Contains(err.Error(), "path_style=true") {
		t.Fatalf("read: %v; want an unknown outcome naming the endpoint and suggesting path_style=true", err)
	}
	t.Log(err)
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

// TestNoCredentials: on a host without an instance role, the SDK's default
// credentials come from the EC2 instance metadata service, which answers 403
// (or 404) inside the S3 operation. That is not the store's answer: the
// error says there are no credentials, as a refusal, and the store is never
// asked.
func TestNoCredentials(t *testing.T) {
	store := newCannedServer(t, canned{status: 200})
	for _, status := range []int{403, 404} {
		metadata := newCannedServer(t, canned{status: status})
		c := s3.New(s3.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(store.url),
			UsePathStyle: true,
			Credentials: aws.NewCredentialsCache(ec2rolecreds.New(func(o *ec2rolecreds.Options) {
				o.Client = imds.New(imds.Options{Endpoint: metadata.url, Retryer: aws.NopRetryer{}})
			})),
			Retryer: aws.NopRetryer{},
		})
		d, err := les3.NewDecider(c, "bucket", "key")
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.ReadCurrent(t.Context())
		if want := fmt.Sprintf("no AWS credentials: ec2imds answered %d", status); !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("metadata service answering %d: %v; want a refusal saying %q", status, err, want)
		}
	}
	// Off EC2 there is no metadata service to answer: the connection is
	// refused (here, a port nothing listens on).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	c := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(store.url),
		UsePathStyle: true,
		Credentials: aws.NewCredentialsCache(ec2rolecreds.New(func(o *ec2rolecreds.Options) {
			o.Client = imds.New(imds.Options{Endpoint: closed, Retryer: aws.NopRetryer{}})
		})),
		Retryer: aws.NopRetryer{},
	})
	d, err := les3.NewDecider(c, "bucket", "key")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "no AWS credentials: ec2imds cannot be reached") {
		t.Errorf("metadata service refusing the connection: %v; want a refusal saying it cannot be reached", err)
	}
	if n := len(store.hosts()); n != 0 {
		t.Errorf("the store was asked %d times", n)
	}
}

// TestContainerCredentialEndpointDown: in ECS or with EKS Pod Identity the
// credentials come from an agent on the host, which the environment names;
// while it restarts it refuses connections. That is not a host without
// credentials: the error is an unknown outcome, retried, not a refusal that
// would end the election.
func TestContainerCredentialEndpointDown(t *testing.T) {
	store := newCannedServer(t, canned{status: 200})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/v1/credentials"
	ln.Close()
	c := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(store.url),
		UsePathStyle: true,
		Credentials: aws.NewCredentialsCache(endpointcreds.New(closed, func(o *endpointcreds.Options) {
			o.Retryer = aws.NopRetryer{}
		})),
		Retryer: aws.NopRetryer{},
	})
	d, err := les3.NewDecider(c, "bucket", "key")
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.ReadCurrent(t.Context())
	if err == nil || errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("credential agent refusing the connection: %v; want an unknown outcome, not a refusal", err)
	}
	if n := len(store.hosts()); n != 0 {
		t.Errorf("the store was asked %d times", n)
	}
}

// TestTLSFailureIsRefused: an https endpoint whose TLS cannot succeed, as a
// store's plain-HTTP port reached with https:// or a server whose
// certificate this host does not trust, never gets a request: not an
// unknown outcome retried for ever but a refusal naming the endpoint, and
// Acquire ends.
func TestTLSFailureIsRefused(t *testing.T) {
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a request got through a TLS handshake that should fail")
	}))
	t.Cleanup(untrusted.Close)
	run := func(t *testing.T, s *store, endpoint string) {
		d, err := les3.NewDecider(s.client(t, endpoint), s.bucket, "key")
		if err != nil {
			t.Fatal(err)
		}
		racedecidertest.CheckRefuses(t, d, endpoint, "s3://"+s.bucket+"/key")
	}
	t.Run("an untrusted certificate", func(t *testing.T) {
		run(t, &store{access: "test", secret: "test", bucket: "elections"}, untrusted.URL)
	})
	forEachStore(t, func(t *testing.T, s *store) {
		run(t, s, strings.Replace(s.endpoint, "http://", "https://", 1))
	})
}

// TestExpiredToken: S3's ExpiredToken is retried when the client's
// credentials may be renewed (the SDK renews them only once they have expired
// on this host's clock, so a request signed as they run out gets it, and the
// next passes), and a refusal naming the object when they never are: their
// token stays expired, and was retried for ever.
func TestExpiredToken(t *testing.T) {
	// Which credentials are never renewed is awscreds.NeverRenewed's
	// (tested there): one of each kind here.
	for _, tc := range awscredstest.Kinds() {
		t.Run(tc.Name, func(t *testing.T) {
			cs := newCannedServer(t, canned{status: 400, code: "ExpiredToken"})
			d, err := les3.NewDecider(s3.New(s3.Options{
				Region:       "us-east-1",
				BaseEndpoint: aws.String(cs.url),
				UsePathStyle: true,
				Credentials:  tc.Creds,
				Retryer:      aws.NopRetryer{},
			}), "bucket", "key")
			if err != nil {
				t.Fatal(err)
			}
			if tc.Refused != "" {
				racedecidertest.CheckRefuses(t, d, "s3://bucket/key", "session token has expired", tc.Refused)
				return
			}
			_, rerr := d.ReadCurrent(t.Context())
			_, werr := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"})
			for what, err := range map[string]error{"ReadCurrent": rerr, "WriteEntry": werr} {
				if classOf(err) != errUnknown {
					t.Errorf("%s: %v; want an unknown outcome", what, err)
				}
			}
		})
	}
}
