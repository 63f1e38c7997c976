package dynamodb_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	ledynamodb "github.com/racedecider/leaderelection/dynamodb"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/awscreds/awscredstest"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// canned is one answer of a cannedServer, shaped as DynamoDB's JSON
// protocol shapes it: an error is a status with a body naming its __type.
type canned struct {
	status int
	code   string         // error type, such as "ConditionalCheckFailedException"
	item   map[string]any // Item in the body (GetItem, or a refusal with ALL_OLD)
	hang   bool           // wait until the request's context ends, answering nothing
	msg    string         // the error's message, if not "canned CODE"
}

// cannedServer answers DynamoDB requests with canned responses, one per
// request in order (the last one repeats), to test how the backend reads
// answers DynamoDB Local never gives: throttling, IAM refusals, 5xx.
type cannedServer struct {
	url     string
	arrived chan struct{}

	mu      sync.Mutex
	answers []canned
	bodies  []map[string]any
}

func newCannedServer(t *testing.T, answers ...canned) *cannedServer {
	cs := &cannedServer{answers: answers, arrived: make(chan struct{}, 100)}
	srv := httptest.NewServer(http.HandlerFunc(cs.serve))
	t.Cleanup(srv.Close)
	cs.url = srv.URL
	return cs
}

func (cs *cannedServer) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	cs.mu.Lock()
	cs.bodies = append(cs.bodies, body)
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
	out := map[string]any{}
	if a.code != "" {
		out["__type"] = "com.amazonaws.dynamodb.v20120810#" + a.code
		out["message"] = "canned " + a.code
		if a.msg != "" {
			out["message"] = a.msg
		}
	}
	if a.item != nil {
		out["Item"] = a.item
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-RequestId", "canned")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(out)
}

func (cs *cannedServer) requests() []map[string]any {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.bodies
}

func (cs *cannedServer) decider(t *testing.T, opts ...ledynamodb.Option) *ledynamodb.Decider {
	d, err := ledynamodb.NewDecider(newClient(t, cs.url), "elections", "key", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// itemJSON is an item in DynamoDB's JSON, holding rec.
func itemJSON(t *testing.T, rec *entry.RaceEntry, version int) map[string]any {
	t.Helper()
	data, err := entry.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"pk":       map[string]any{"S": "key"},
		"record":   map[string]any{"B": base64.StdEncoding.EncodeToString(data)},
		"version":  map[string]any{"N": fmt.Sprint(version)},
		"write_id": map[string]any{"S": rec.WriteID},
	}
}

// TestWriteAnswers checks the class WriteEntry gives each answer, and that
// an answer proves a write unapplied only when no earlier attempt may have
// been applied.
func TestWriteAnswers(t *testing.T) {
	mine := &entry.RaceEntry{ElectionNumber: 5, Term: 5, LeaderID: "a", WriteID: "w-mine"}
	other := &entry.RaceEntry{ElectionNumber: 5, Term: 5, LeaderID: "b", WriteID: "w-other"}
	ok := canned{status: 200}
	ccf := func(item map[string]any) canned {
		return canned{status: 400, code: "ConditionalCheckFailedException", item: item}
	}
	c := func(status int, code string) canned { return canned{status: status, code: code} }
	const (
		success  = "success"
		lost     = "lost"
		throttle = "throttled"
		refused  = "refused"
		unknown  = "unknown"
	)
	cases := []struct {
		name    string
		answers []canned
		want    string
	}{
		{"applied", []canned{ok}, success},
		{"condition failed", []canned{ccf(itemJSON(t, other, 5))}, lost},
		{"condition failed on our own record, first attempt", []canned{ccf(itemJSON(t, mine, 5))}, lost},
		{"ProvisionedThroughputExceeded on every attempt", []canned{c(400, "ProvisionedThroughputExceededException")}, throttle},
		{"ThrottlingException on every attempt", []canned{c(400, "ThrottlingException")}, throttle},
		{"RequestLimitExceeded on every attempt", []canned{c(400, "RequestLimitExceeded")}, throttle},
		{"throttled, then condition failed", []canned{c(400, "ThrottlingException"), ccf(itemJSON(t, other, 5))}, lost},
		{"throttled, then applied", []canned{c(400, "ThrottlingException"), ok}, success},
		{"ResourceNotFound", []canned{c(400, "ResourceNotFoundException")}, refused},
		{"AccessDenied", []canned{c(400, "AccessDeniedException")}, refused},
		{"UnrecognizedClient", []canned{c(400, "UnrecognizedClientException")}, refused},
		{"InvalidSignature", []canned{c(400, "InvalidSignatureException")}, refused},
		{"ValidationException", []canned{c(400, "ValidationException")}, refused},
		{"IncompleteSignature (no code listed)", []canned{c(400, "IncompleteSignatureException")}, refused},
		{"TransactionConflict", []canned{c(400, "TransactionConflictException")}, unknown},
		{"ReplicatedWriteConflict", []canned{c(400, "ReplicatedWriteConflictException")}, unknown},
		// With static credentials (newClient's); see TestExpiredToken.
		{"ExpiredToken", []canned{c(400, "ExpiredTokenException")}, refused},
		{"429 without a code listed", []canned{c(429, "Unlisted")}, unknown},
		{"InternalServerError on every attempt", []canned{c(500, "InternalServerError")}, unknown},
		{"503 on every attempt", []canned{c(503, "ServiceUnavailable")}, unknown},
		// The SDK's retry of an applied write is refused because of it.
		{"500, then condition failed on our own record", []canned{c(500, "InternalServerError"), ccf(itemJSON(t, mine, 5))}, success},
		{"500, then condition failed on another record", []canned{c(500, "InternalServerError"), ccf(itemJSON(t, other, 5))}, unknown},
		{"500, then condition failed on our write id at another version", []canned{c(500, "InternalServerError"), ccf(itemJSON(t, mine, 6))}, unknown},
		{"500, then condition failed with no item", []canned{c(500, "InternalServerError"), ccf(nil)}, unknown},
		{"500, then throttled", []canned{c(500, "InternalServerError"), c(400, "ThrottlingException")}, unknown},
		{"500, then refused", []canned{c(500, "InternalServerError"), c(400, "AccessDeniedException")}, unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := newCannedServer(t, tc.answers...)
			d := cs.decider(t)
			e := mine.Clone()
			e.Token = entry.LeaderToken{Version: "4:w-prev"}
			tok, err := d.WriteEntry(t.Context(), e)
			got := unknown
			switch {
			case err == nil:
				got = success
				// A retry resolved as our own write too: its
				// refusal's Date (Go's server sends one).
				if tok.Version != "5:w-mine" || tok.CommitTime.IsZero() {
					t.Errorf("token %+v, want 5:w-mine with a commit time", tok)
				}
			case errors.Is(err, entry.ErrRaceLost):
				got = lost
			case errors.Is(err, entry.ErrThrottled):
				got = throttle
			case errors.Is(err, entry.ErrRefused):
				got = refused
			}
			if got != tc.want {
				t.Errorf("WriteEntry: %v; class %s, want %s", err, got, tc.want)
			} else if err != nil {
				t.Logf("%s: %v", got, err)
			}
			if err != nil && !strings.Contains(err.Error(), "dynamodb://elections/key") {
				t.Errorf("error %q does not name the item", err)
			}
			for _, b := range cs.requests() {
				if b["ConditionExpression"] != "#v = :v AND #w = :w" || b["ReturnValuesOnConditionCheckFailure"] != "ALL_OLD" {
					t.Errorf("request %v: want a condition on version and write id, and ALL_OLD", b)
				}
			}
		})
	}
}

// A signature error quotes the canonical request AWS expected, headers and
// all, the session token among them: the error leaves the quote out.
func TestSignatureErrorKeepsTheTokenOut(t *testing.T) {
	const secret = "SESSION-TOKEN-SECRET"
	cs := newCannedServer(t, canned{status: 400, code: "InvalidSignatureException",
		msg: "The request signature we calculated does not match the signature you provided.\n\nThe Canonical String for this request should have been\n'POST\n/\n\nhost:dynamodb.us-east-1.amazonaws.com\nx-amz-security-token:" + secret + "\n'"})
	d := cs.decider(t)
	_, err := d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 0, LeaderID: "a", WriteID: "w"})
	var ae smithy.APIError
	if !errors.Is(err, entry.ErrRefused) || !errors.As(err, &ae) || strings.Contains(err.Error(), secret) ||
		!strings.Contains(err.Error(), "signature we calculated does not match") {
		t.Fatalf("WriteEntry = %v; want a refusal wrapping the SDK's error, saying the signature did not match, without the session token", err)
	}
	_, err = d.ReadCurrent(t.Context())
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("ReadCurrent = %v; want an error without the session token", err)
	}
}

func TestReadAnswers(t *testing.T) {
	rec := &entry.RaceEntry{ElectionNumber: 4, Term: 2, LeaderID: "a", WriteID: "w-4"}
	cases := []struct {
		name      string
		answer    canned
		wantErr   error // nil for success
		wantEmpty bool
	}{
		{"record", canned{status: 200, item: itemJSON(t, rec, 7)}, nil, false},
		{"no item", canned{status: 200}, nil, true},
		{"ResourceNotFound", canned{status: 400, code: "ResourceNotFoundException"}, entry.ErrRefused, false},
		{"AccessDenied", canned{status: 400, code: "AccessDeniedException"}, entry.ErrRefused, false},
		{"ProvisionedThroughputExceeded", canned{status: 400, code: "ProvisionedThroughputExceededException"}, entry.ErrThrottled, false},
		{"InternalServerError", canned{status: 500, code: "InternalServerError"}, errors.New("unknown"), false},
		{"IncompleteSignature (no code listed)", canned{status: 400, code: "IncompleteSignatureException"}, entry.ErrRefused, false},
		{"TransactionConflict", canned{status: 400, code: "TransactionConflictException"}, errors.New("unknown"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := newCannedServer(t, tc.answer)
			got, err := cs.decider(t).ReadCurrent(t.Context())
			if tc.wantErr != nil {
				if err == nil || !strings.Contains(err.Error(), "dynamodb://elections/key") {
					t.Fatalf("ReadCurrent = %+v, %v; want an error naming dynamodb://elections/key", got, err)
				}
				for _, class := range []error{entry.ErrRefused, entry.ErrThrottled, entry.ErrRaceLost} {
					if errors.Is(err, class) != (class == tc.wantErr) {
						t.Errorf("ReadCurrent: %v; wraps %v: %v", err, class, !errors.Is(tc.wantErr, class))
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadCurrent: %v", err)
			}
			if b := cs.requests()[0]; b["ConsistentRead"] != true {
				t.Errorf("GetItem request %v is not a strongly consistent read", b)
			}
			if tc.wantEmpty {
				if got.ElectionNumber != entry.NoElections || !got.Token.IsZero() {
					t.Errorf("ReadCurrent = %+v, want no elections and a zero token", got)
				}
				return
			}
			if got.WriteID != rec.WriteID || got.Token.Version != "7:w-4" {
				t.Errorf("ReadCurrent = %+v, want write id %s and token 7:w-4", got, rec.WriteID)
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
		d := newCannedServer(t, canned{hang: true}).decider(t, ledynamodb.WithTimeout(200*time.Millisecond))
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
		d := cs.decider(t, ledynamodb.WithTimeout(0))
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
// (or 404) inside the DynamoDB operation. No request reaches DynamoDB, and
// the error is a refusal saying there are no credentials, for reads and
// writes alike.
func TestNoCredentials(t *testing.T) {
	type metadataCase struct{ name, endpoint, want string }
	var cases []metadataCase
	for _, status := range []int{403, 404} {
		metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
		t.Cleanup(metadata.Close)
		cases = append(cases, metadataCase{fmt.Sprintf("answering %d", status), metadata.URL,
			fmt.Sprintf("no AWS credentials: ec2imds answered %d", status)})
	}
	// Off EC2 there is no metadata service to answer: the connection is
	// refused (here, a port nothing listens on).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, metadataCase{"refusing the connection", "http://" + ln.Addr().String(), "no AWS credentials: ec2imds cannot be reached"})
	ln.Close()
	for _, mc := range cases {
		store := newCannedServer(t, canned{status: 200})
		c := ddb.New(ddb.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(store.url),
			Credentials: aws.NewCredentialsCache(ec2rolecreds.New(func(o *ec2rolecreds.Options) {
				o.Client = imds.New(imds.Options{Endpoint: mc.endpoint, Retryer: aws.NopRetryer{}})
			})),
		})
		d, err := ledynamodb.NewDecider(c, "elections", "key")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), mc.want) {
			t.Errorf("ReadCurrent, metadata service %s: %v; want a refusal saying %q", mc.name, err, mc.want)
		}
		_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, Term: 1, LeaderID: "a", WriteID: "w"})
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), mc.want) {
			t.Errorf("WriteEntry, metadata service %s: %v; want a refusal saying %q", mc.name, err, mc.want)
		}
		if n := len(store.requests()); n != 0 {
			t.Errorf("DynamoDB was asked %d times", n)
		}
	}
}

// notDynamoDBPages are the answers of servers that are not DynamoDB to every
// request: a proxy's HTML page, S3 (or MinIO) refusing a request it cannot
// read, a bare status, and Go's http.NotFound.
var notDynamoDBPages = []struct {
	name, ctype, body string
	status            int
}{
	{"HTML 403", "text/html", "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body><h1>403 Forbidden</h1></body>\r\n</html>\r\n", 403},
	{"S3 XML 403", "application/xml", `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>0123</RequestId></Error>`, 403},
	{"empty 403", "", "", 403},
	{"text 404", "text/plain; charset=utf-8", "404 page not found\n", 404},
	// A 200 with no DynamoDB request id: any web server that takes a
	// POST. An empty body or "{}" decodes as a GetItem finding no item
	// and a PutItem that succeeded, so that every candidate won.
	{"empty 200", "", "", 200},
	{"JSON {} 200", "application/json", "{}", 200},
	{"HTML 200", "text/html", "<html><body>Welcome</body></html>", 200},
}

// TestDynamoDBCompatibleAnswer: a 2xx answer in DynamoDB's protocol (its
// content type) without DynamoDB's request id, as a DynamoDB-compatible
// store may give, is believed.
func TestDynamoDBCompatibleAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	d, err := ledynamodb.NewDecider(newClient(t, srv.URL), "elections", "key")
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := d.ReadCurrent(t.Context()); err != nil || rec.ElectionNumber != entry.NoElections {
		t.Errorf("ReadCurrent = %+v, %v; want no record", rec, err)
	}
}

// TestNotDynamoDBAfterAnAttemptThatMayHaveApplied: an answer that is not
// DynamoDB's, to the SDK's retry of a write whose first attempt was cut off
// after it was sent, says nothing of that first attempt: the outcome is
// unknown (the engine reads back), not refused.
func TestNotDynamoDBAfterAnAttemptThatMayHaveApplied(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if requests.Add(1) == 1 {
			// The request arrived whole: it may have been applied.
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		w.WriteHeader(http.StatusOK) // no request id, no content type
	}))
	t.Cleanup(srv.Close)
	d, err := ledynamodb.NewDecider(newClient(t, srv.URL), "elections", "key")
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"})
	if n := requests.Load(); n != 2 {
		t.Fatalf("%d requests; want the cut-off attempt and the SDK's retry", n)
	}
	if err == nil || errors.Is(err, entry.ErrRefused) || errors.Is(err, entry.ErrRaceLost) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Errorf("WriteEntry = %v; want an unknown outcome, neither refused nor lost", err)
	}
}

// TestNotADynamoDBEndpoint points the backend at servers that answer every
// request with a page that is not DynamoDB's JSON. Reads and writes are
// refusals, after one request each, naming the endpoint and the item, and
// Acquire ends with one instead of retrying for ever (the SDK reports no
// DynamoDB error code for such an answer, which once read as an unknown
// outcome).
func TestNotADynamoDBEndpoint(t *testing.T) {
	for _, page := range notDynamoDBPages {
		t.Run(page.name, func(t *testing.T) {
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				requests.Add(1)
				if page.ctype != "" {
					w.Header().Set("Content-Type", page.ctype)
				}
				w.WriteHeader(page.status)
				_, _ = io.WriteString(w, page.body)
			}))
			t.Cleanup(srv.Close)
			d, err := ledynamodb.NewDecider(newClient(t, srv.URL), "elections", "key")
			if err != nil {
				t.Fatal(err)
			}
			wants := []string{srv.URL, "dynamodb://elections/key", fmt.Sprint(page.status)}
			check := func(what string, err error) {
				t.Helper()
				racedecidertest.CheckRefusal(t, what, err, wants...)
			}
			_, err = d.ReadCurrent(t.Context())
			check("ReadCurrent", err)
			t.Logf("read: %v", err)
			_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"})
			check("WriteEntry (create)", err)
			_, err = d.WriteEntry(t.Context(), &entry.RaceEntry{ElectionNumber: 1, LeaderID: "a", WriteID: "w-1",
				Token: entry.LeaderToken{Version: "1:w-0"}})
			check("WriteEntry (replace)", err)
			if n := requests.Load(); n != 3 {
				t.Errorf("%d requests for three calls, want 3 (no retries of a refusal)", n)
			}

			check("Acquire", racedecidertest.AcquireEnds(t, d))
		})
	}
}

// TestTLSFailureIsRefused: an https endpoint whose TLS cannot succeed, as
// DynamoDB Local's plain-HTTP port reached with https:// or a server whose
// certificate this host does not trust, never gets a request: not an
// unknown outcome retried for ever but a refusal naming the endpoint, and
// Acquire ends.
func TestTLSFailureIsRefused(t *testing.T) {
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a request got through a TLS handshake that should fail")
	}))
	t.Cleanup(untrusted.Close)
	for name, endpointOf := range map[string]func(t *testing.T) string{
		"an untrusted certificate": func(*testing.T) string { return untrusted.URL },
		"DynamoDB Local's http port as https": func(t *testing.T) string {
			return strings.Replace(newStore(t).endpoint, "http://", "https://", 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			endpoint := endpointOf(t)
			d, err := ledynamodb.NewDecider(newClient(t, endpoint), "elections", "key")
			if err != nil {
				t.Fatal(err)
			}
			racedecidertest.CheckRefuses(t, d, endpoint, "dynamodb://elections/key")
		})
	}
}

// TestExpiredToken: ExpiredTokenException is a refusal, ending Acquire with
// an error naming the table, when the client's credentials are never
// replaced (static ones, or cached ones that cannot expire): the token stays
// expired. With credentials that are refreshed it stays an unknown outcome
// that the engine retries, as the next request may carry a new token.
func TestExpiredToken(t *testing.T) {
	// Which credentials are never renewed is awscreds.NeverRenewed's
	// (tested there): one of each kind here.
	for _, tc := range awscredstest.Kinds() {
		t.Run(tc.Name, func(t *testing.T) {
			cs := newCannedServer(t, canned{status: 400, code: "ExpiredTokenException"})
			d, err := ledynamodb.NewDecider(newClientWith(t, cs.url, tc.Creds), "elections", "key")
			if err != nil {
				t.Fatal(err)
			}
			if tc.Refused != "" {
				racedecidertest.CheckRefuses(t, d, "dynamodb://elections/key", "session token has expired", tc.Refused)
				return
			}
			_, rerr := d.ReadCurrent(t.Context())
			_, werr := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"})
			for what, err := range map[string]error{"ReadCurrent": rerr, "WriteEntry": werr} {
				if err == nil || errors.Is(err, entry.ErrRefused) || errors.Is(err, entry.ErrThrottled) || errors.Is(err, entry.ErrRaceLost) {
					t.Errorf("%s: %v; want an unknown outcome", what, err)
				}
			}
		})
	}
}
