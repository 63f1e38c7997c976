package sim

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	s3sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/option"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/gcs"
	les3 "github.com/racedecider/leaderelection/s3"
)

// This file runs candidates through the real gcs and s3 Deciders: their
// HTTP client's RoundTripper serves the sim's store (through the
// candidate's access, faults included) with each cloud's own answers, in
// process (synctest cannot see real network I/O). The sim's faults become
// those answers: a request not sent is a refused connection, a lost
// response a reset connection or a 5xx, throttling GCS's 429 (503 on a
// read) or S3's 503 SlowDown, a refusal 403 or a missing bucket, a
// stale condition 412 (or S3's 409 ConditionalRequestConflict, or 404
// NoSuchKey on an If-Match write of a deleted record), and a write applied
// but reported lost a 5xx after it was applied, so that the backend's own
// retry meets its own write (412). What the backend makes of them is what
// is checked (see cloudDecider).

// The backends a slot's candidates may use.
const (
	backendSim     = ""         // the sim's access itself
	backendGCSXML  = "gcs"      // gcs, the storage client's default XML reads
	backendGCSJSON = "gcs-json" // gcs, with storage.WithJSONReads
	backendS3      = "s3"
)

const (
	simBucket = "sim-bucket"
	simObject = "election"
)

// errAppliedLost is what the access answers a cloud backend's write that
// it applied but reports as failed (see access.WriteEntry): the transport
// answers it with a 5xx.
var errAppliedLost = errors.New("sim: applied, answered with a server error")

// callState follows one call of the engine to a cloud backend through its
// attempts (HTTP requests).
type callState struct {
	mu         sync.Mutex
	write      bool
	uploads    int       // upload attempts so far (GCS retries writes itself)
	lastAnswer time.Time // when the last attempt was answered
	// What the attempts met: a store that applied one; the definite
	// answers given (a lost race, throttling, a refusal).
	applied                      bool
	raceLost, throttled, refused bool
	result                       error // the backend's answer to the call
	done                         bool
	what                         string
}

type callKey struct{}

func callOf(ctx context.Context) *callState {
	c, _ := ctx.Value(callKey{}).(*callState)
	return c
}

// cloudDecider is a candidate's Decider on a cloud backend: the real gcs or
// s3 Decider, whose calls it follows to check how the backend classified
// the answers it got.
type cloudDecider struct {
	inner leaderelection.RaceDecider
	p     *proc
	kind  string
}

func (d *cloudDecider) String() string { return "sim store via " + d.kind }

func (d *cloudDecider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	c := &callState{what: "read"}
	rec, err := d.inner.ReadCurrent(context.WithValue(ctx, callKey{}, c))
	return rec, d.finish(ctx, c, err)
}

func (d *cloudDecider) WriteEntry(ctx context.Context, e *entry.RaceEntry) (entry.LeaderToken, error) {
	c := &callState{what: fmt.Sprintf("write (election %d)", e.ElectionNumber), write: true}
	tok, err := d.inner.WriteEntry(context.WithValue(ctx, callKey{}, c), e)
	err = d.finish(ctx, c, err)
	if err != nil {
		tok = entry.LeaderToken{}
	}
	return tok, err
}

// finish records the backend's answer to a call (checked at the end of
// the run, once every write still in flight has landed), and returns it.
// An answer to a call whose context ended says so in the same words
// whatever the backend's retries were doing then (their timing is the
// backend's own jitter: see cloudTransport.hold).
func (d *cloudDecider) finish(ctx context.Context, c *callState, err error) error {
	s := d.p.s
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%s: %s: %w", d.kind, c.what, ctxEnded{c.what, ctx.Err()})
	}
	if s.opt.BackendRaceLost && err != nil && ctx.Err() == nil && classOf(err) == "unknown outcome" {
		// The broken backend of a negative control: it takes an
		// answer it cannot read for a lost race.
		err = fmt.Errorf("%s: %s: %w: %w", d.kind, c.what, entry.ErrRaceLost, err)
	}
	if errors.Is(err, entry.ErrRefused) {
		d.p.markRefused()
	}
	c.mu.Lock()
	c.result, c.done = err, true
	c.mu.Unlock()
	s.mu.Lock()
	s.cloudCalls = append(s.cloudCalls, cloudCall{p: d.p, c: c})
	s.mu.Unlock()
	if err != nil {
		s.event(d.p.id, "%s answers its %s: %s", d.kind, c.what, classOf(err))
	}
	return err
}

// cloudCall is one call to a cloud backend, checked at the end of the run.
type cloudCall struct {
	p *proc
	c *callState
}

// classOf names the class of a RaceDecider error.
func classOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, entry.ErrRaceLost):
		return "lost race"
	case errors.Is(err, entry.ErrThrottled):
		return "throttled"
	case errors.Is(err, entry.ErrRefused):
		return "refused"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "its context ended"
	}
	return "unknown outcome"
}

// checkCloudCalls checks every call made to a cloud backend against what
// its attempts met: a definite answer (a lost race, throttling, a
// refusal) only for a call none of whose attempts was applied, and only
// if some attempt was given that answer; success only for a write that
// was applied.
func (s *sim) checkCloudCalls() {
	s.mu.Lock()
	calls := append([]cloudCall(nil), s.cloudCalls...)
	s.mu.Unlock()
	for _, cc := range calls {
		c := cc.c
		c.mu.Lock()
		class := classOf(c.result)
		var msg string
		switch {
		case class == "ok" && c.write && !c.applied:
			msg = "succeeded, but the store applied none of its attempts"
		case (class == "lost race" || class == "throttled" || class == "refused") && c.applied:
			msg = fmt.Sprintf("is reported as %q (%v), but the store applied one of its attempts", class, c.result)
		case class == "lost race" && !c.raceLost, class == "throttled" && !c.throttled, class == "refused" && !c.refused:
			msg = fmt.Sprintf("is reported as %q (%v), an answer none of its attempts got", class, c.result)
		}
		c.mu.Unlock()
		s.mu.Lock()
		s.stats.CloudCalls++
		s.mu.Unlock()
		if msg != "" {
			s.violate("backend-misclassified", "%s's %s %s", cc.p, c.what, msg)
		}
	}
}

// newCloudDecider returns p's Decider on a cloud backend.
func (s *sim) newCloudDecider(p *proc, kind string) (leaderelection.RaceDecider, error) {
	acc := &access{st: s.st, p: p, cloud: true}
	hc := &http.Client{Transport: &cloudTransport{acc: acc, kind: kind}}
	var inner leaderelection.RaceDecider
	switch kind {
	case backendGCSXML, backendGCSJSON:
		opts := []option.ClientOption{option.WithHTTPClient(hc), option.WithEndpoint("http://gcs.sim/storage/v1/")}
		if kind == backendGCSJSON {
			opts = append(opts, storage.WithJSONReads())
		}
		client, err := storage.NewClient(context.Background(), opts...)
		if err != nil {
			return nil, err
		}
		// The sim's Cloud Storage takes any write rate, and its terms
		// (down to 500 ms) are shorter than the real one's allows.
		d, err := gcs.NewDecider(client, simBucket, simObject, gcs.WithMinWriteInterval(0))
		if err != nil {
			return nil, err
		}
		inner = d
	case backendS3:
		client := s3sdk.New(s3sdk.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String("http://s3.sim"),
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider("sim", "sim", ""),
			HTTPClient:   hc,
			// The SDK's retries, with a backoff the seed fixes (its own
			// is jittered) and no client-side retry quota.
			Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
				o.RateLimiter = ratelimit.None
				o.Backoff = retry.BackoffDelayerFunc(func(attempt int, _ error) (time.Duration, error) {
					return time.Duration(attempt) * 20 * time.Millisecond, nil
				})
			}),
			RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
			ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		})
		d, err := les3.NewDecider(client, simBucket, simObject)
		if err != nil {
			return nil, err
		}
		inner = d
	default:
		return nil, fmt.Errorf("unknown backend %q", kind)
	}
	return &cloudDecider{inner: inner, p: p, kind: kind}, nil
}

// cloudTransport serves one candidate's backend client from the sim's
// store, answering as the cloud does.
type cloudTransport struct {
	acc  *access
	kind string
}

// GCS retries with a jitter drawn from the process-wide random source
// (the storage client's reads, and the gcs Decider's writes): an attempt
// after the first is held until the longest its backoff could have waited
// since the previous answer (100 ms, doubling, at most 2 s), so that the
// store sees it at an instant the seed fixes. The S3 client's retries
// back off by a fixed schedule (see newCloudDecider).
func (t *cloudTransport) hold(req *http.Request, c *callState, retry int) bool {
	if retry < 1 || c == nil || t.kind == backendS3 {
		return true
	}
	c.mu.Lock()
	last := c.lastAnswer
	c.mu.Unlock()
	wait := min(100*time.Millisecond<<(retry-1), 2*time.Second)
	return sleepCtx(req.Context(), time.Until(last.Add(wait)))
}

func (t *cloudTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	c := callOf(req.Context())
	retry := 0
	if m := strings.Index(req.Header.Get("X-Goog-Api-Client"), "gccl-attempt-count/"); m >= 0 {
		n, _ := strconv.Atoi(strings.Fields(req.Header.Get("X-Goog-Api-Client")[m+len("gccl-attempt-count/"):])[0])
		retry = n - 1
	}
	upload := strings.HasPrefix(req.URL.Path, "/upload/")
	if upload && c != nil {
		c.mu.Lock()
		retry = c.uploads
		c.uploads++
		c.mu.Unlock()
	}
	if !t.hold(req, c, retry) {
		return nil, req.Context().Err()
	}
	resp, err := t.serve(req, c, body, upload)
	if c != nil {
		c.mu.Lock()
		c.lastAnswer = time.Now()
		c.mu.Unlock()
	}
	return resp, err
}

func (t *cloudTransport) serve(req *http.Request, c *callState, body []byte, upload bool) (*http.Response, error) {
	ctx := req.Context()
	switch {
	case t.kind == backendS3 && req.Method == http.MethodGet:
		rec, err := t.acc.ReadCurrent(ctx)
		return t.readAnswer(req, c, rec, err, false)
	case t.kind == backendS3 && req.Method == http.MethodPut:
		tok := entry.LeaderToken{}
		ifMatch := req.Header.Get("If-Match")
		if ifMatch != "" {
			tok.Version = strings.Trim(ifMatch, `"`)
		}
		return t.writeAnswer(req, c, body, tok, ifMatch != "")
	case upload:
		media, err := uploadMedia(req, body)
		if err != nil {
			return t.answer(req, http.StatusBadRequest, "invalid", err.Error(), nil, nil)
		}
		tok := entry.LeaderToken{}
		if g := req.URL.Query().Get("ifGenerationMatch"); g != "" && g != "0" {
			tok.Version = g
		}
		return t.writeAnswer(req, c, media, tok, tok.Version != "")
	case req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/storage/v1/b/") && strings.HasSuffix(req.URL.Path, "/o"):
		// The bucket check after a download found nothing.
		if err := t.acc.refused(ctx, "list"); err != nil {
			return t.failAnswer(req, c, err, false)
		}
		sleepCtx(ctx, 2*t.acc.leg())
		return t.answer(req, http.StatusOK, "", `{"kind":"storage#objects"}`, nil, nil)
	case req.Method == http.MethodGet:
		rec, err := t.acc.ReadCurrent(ctx)
		return t.readAnswer(req, c, rec, err, req.URL.Query().Get("alt") == "media")
	}
	return t.answer(req, http.StatusNotImplemented, "notImplemented", "the sim serves no "+req.Method+" "+req.URL.Path, nil, nil)
}

// uploadMedia returns the record in a GCS multipart upload.
func uploadMedia(req *http.Request, body []byte) ([]byte, error) {
	_, params, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	if _, err := mr.NextPart(); err != nil { // the metadata
		return nil, err
	}
	part, err := mr.NextPart()
	if err != nil {
		return nil, err
	}
	return io.ReadAll(part)
}

func (t *cloudTransport) readAnswer(req *http.Request, c *callState, rec *entry.RaceEntry, err error, jsonRead bool) (*http.Response, error) {
	if err != nil {
		return t.failAnswer(req, c, err, false)
	}
	if rec.ElectionNumber == entry.NoElections {
		if t.kind == backendS3 {
			return t.answer(req, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.", nil, nil)
		}
		return t.answer(req, http.StatusNotFound, "notFound", "No such object: "+simBucket+"/"+simObject, nil, nil)
	}
	data, merr := entry.Marshal(rec)
	if merr != nil {
		return nil, merr
	}
	h := http.Header{}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	commit := rec.Token.CommitTime
	if t.kind == backendS3 {
		h.Set("ETag", `"`+rec.Token.Version+`"`)
		h.Set("Accept-Ranges", "bytes")
		if !commit.IsZero() {
			h.Set("Last-Modified", commit.UTC().Format(http.TimeFormat))
		}
	} else {
		h.Set("X-Goog-Generation", rec.Token.Version)
		h.Set("X-Goog-Metageneration", "1")
		h.Set("X-Goog-Stored-Content-Length", strconv.Itoa(len(data)))
		h.Set("X-Goog-Stored-Content-Encoding", "identity")
		var crc [4]byte
		binary.BigEndian.PutUint32(crc[:], crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
		h.Set("X-Goog-Hash", "crc32c="+base64.StdEncoding.EncodeToString(crc[:]))
		if !commit.IsZero() && !jsonRead {
			h.Set("Last-Modified", commit.UTC().Format(http.TimeFormat))
		}
	}
	return t.raw(req, http.StatusOK, h, data), nil
}

func (t *cloudTransport) writeAnswer(req *http.Request, c *callState, body []byte, tok entry.LeaderToken, ifMatch bool) (*http.Response, error) {
	e, err := entry.Unmarshal(body)
	if err != nil {
		return t.answer(req, http.StatusBadRequest, "InvalidArgument", "not a record: "+err.Error(), nil, nil)
	}
	e.Token = tok
	ntok, err := t.acc.WriteEntry(req.Context(), e)
	if err != nil {
		if errors.Is(err, entry.ErrRaceLost) && ifMatch && t.kind == backendS3 && t.acc.st.current().ElectionNumber == entry.NoElections {
			// AWS answers If-Match on a key that is gone with 404.
			if c != nil {
				c.mu.Lock()
				c.raceLost = true
				c.mu.Unlock()
			}
			return t.answer(req, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.", nil, nil)
		}
		return t.failAnswer(req, c, err, true)
	}
	commit := ntok.CommitTime
	if t.kind == backendS3 {
		h := http.Header{}
		h.Set("ETag", `"`+ntok.Version+`"`)
		if !commit.IsZero() {
			h.Set("Date", commit.UTC().Format(http.TimeFormat))
		}
		return t.raw(req, http.StatusOK, h, nil), nil
	}
	updated := ""
	if !commit.IsZero() {
		updated = fmt.Sprintf(`,"updated":%q,"timeCreated":%q`, commit.Truncate(time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			commit.Truncate(time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	js := fmt.Sprintf(`{"kind":"storage#object","id":"%s/%s/%s","name":%q,"bucket":%q,"generation":%q,"metageneration":"1","contentType":"application/octet-stream","size":"%d","storageClass":"STANDARD"%s}`,
		simBucket, simObject, ntok.Version, simObject, simBucket, ntok.Version, len(body), updated)
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=UTF-8")
	return t.raw(req, http.StatusOK, h, []byte(js)), nil
}

// failAnswer turns the access's failure into the cloud's answer, and
// records what the call's attempt met.
func (t *cloudTransport) failAnswer(req *http.Request, c *callState, err error, write bool) (*http.Response, error) {
	s3 := t.kind == backendS3
	mark := func(f func()) {
		if c != nil {
			c.mu.Lock()
			f()
			c.mu.Unlock()
		}
	}
	var ce ctxEnded
	switch {
	case errors.As(err, &ce), req.Context().Err() != nil:
		return nil, req.Context().Err()
	case errors.Is(err, errInjected), errors.Is(err, errPartitioned), errors.Is(err, errDead):
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	case errors.Is(err, entry.ErrRefused):
		mark(func() { c.refused = true })
		if t.acc.p.inc%2 == 0 {
			if s3 {
				return t.answer(req, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist", nil, nil)
			}
			return t.answer(req, http.StatusNotFound, "notFound", "The specified bucket does not exist.", nil, nil)
		}
		if s3 {
			return t.answer(req, http.StatusForbidden, "AccessDenied", "Access Denied", nil, nil)
		}
		return t.answer(req, http.StatusForbidden, "forbidden", "sim@sim does not have storage.objects.create access to the Google Cloud Storage object.", nil, nil)
	case errors.Is(err, entry.ErrThrottled):
		mark(func() { c.throttled = true })
		switch {
		case s3:
			return t.answer(req, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.", nil, nil)
		case !write && t.acc.p.inc%2 == 1:
			return t.answer(req, http.StatusServiceUnavailable, "backendError", "Backend Error", nil, nil)
		}
		return t.answer(req, http.StatusTooManyRequests, "rateLimitExceeded", "The object exceeded the rate limit for object mutation operations (create, update, and delete). Please reduce your request rate.", nil, nil)
	case errors.Is(err, entry.ErrRaceLost):
		mark(func() { c.raceLost = true })
		if s3 && t.acc.stream().float() < 0.25 {
			return t.answer(req, http.StatusConflict, "ConditionalRequestConflict", "A conflicting operation occurred. If using PutObject you can retry the request.", nil, nil)
		}
		if s3 {
			return t.answer(req, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", nil, nil)
		}
		return t.answer(req, http.StatusPreconditionFailed, "conditionNotMet", "At least one of the pre-conditions you specified did not hold.", nil, nil)
	case errors.Is(err, errAppliedLost), write && errors.Is(err, errLostResponse) && t.acc.stream().float() < 0.5:
		if s3 {
			return t.answer(req, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.", nil, nil)
		}
		return t.answer(req, http.StatusServiceUnavailable, "backendError", "Backend Error", nil, nil)
	}
	// A lost response: the connection is reset.
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
}

// answer is an error answer in the cloud's format: S3's XML error
// document, GCS's JSON error (or XML, for an XML download).
func (t *cloudTransport) answer(req *http.Request, status int, code, msg string, _ http.Header, _ []byte) (*http.Response, error) {
	h := http.Header{}
	var body string
	switch {
	case t.kind == backendS3:
		h.Set("Content-Type", "application/xml")
		h.Set("X-Amz-Request-Id", "4442587FB7D0A2F9")
		body = fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<Error><Code>%s</Code><Message>%s</Message><RequestId>4442587FB7D0A2F9</RequestId><HostId>c2ltCg==</HostId></Error>`, code, msg)
	case req.Method == http.MethodGet && !strings.HasPrefix(req.URL.Path, "/storage/") && !strings.HasPrefix(req.URL.Path, "/download/"):
		xmlCode := map[string]string{"notFound": "NoSuchKey", "forbidden": "AccessDenied", "rateLimitExceeded": "SlowDown", "backendError": "ServiceUnavailable"}[code]
		if status == http.StatusNotFound && strings.Contains(msg, "bucket") {
			xmlCode = "NoSuchBucket"
		}
		h.Set("Content-Type", "application/xml; charset=UTF-8")
		body = fmt.Sprintf(`<?xml version='1.0' encoding='UTF-8'?><Error><Code>%s</Code><Message>%s</Message></Error>`, xmlCode, msg)
	default:
		h.Set("Content-Type", "application/json; charset=UTF-8")
		body = fmt.Sprintf(`{"error":{"code":%d,"message":%q,"errors":[{"message":%q,"domain":"global","reason":%q}]}}`, status, msg, msg, code)
	}
	return t.raw(req, status, h, []byte(body)), nil
}

func (t *cloudTransport) raw(req *http.Request, status int, h http.Header, body []byte) *http.Response {
	if h.Get("Content-Length") == "" {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
