package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/racedecider/leaderelection/entry"
)

// DefaultTimeout bounds each ReadCurrent and WriteEntry call, SDK retries
// included, unless WithTimeout says otherwise.
const DefaultTimeout = 10 * time.Second

// maxRecordSize caps how much of the object ReadCurrent reads (entry.Marshal
// makes no larger record).
const maxRecordSize = entry.MaxSize

// Decider is a leaderelection.RaceDecider that keeps the election record in
// one S3 object. It is safe for concurrent use. It does not implement
// leaderelection.ChangeNotifier: S3 cannot push changes, so candidates and
// watchers poll.
type Decider struct {
	client  *s3.Client
	bucket  string
	key     string
	name    string
	timeout time.Duration
	// where names the endpoint in refusals: a wrong endpoint is the usual
	// cause of one.
	where string
	// virtualHosted is set when the client sends requests for this bucket
	// to a custom endpoint with the bucket in the host name, which most
	// S3-compatible stores do not serve.
	virtualHosted bool
	// creds is the client's credentials provider, which classify asks
	// whether an expired session token can be replaced.
	creds aws.CredentialsProvider
}

// Option configures a Decider.
type Option func(*Decider)

// WithTimeout bounds each ReadCurrent and WriteEntry call, including the
// SDK's retries, to d (DefaultTimeout when not given). It keeps a candidate
// whose connection hangs without an error from waiting on it indefinitely
// when its context has no deadline. Zero means no bound but the context's.
func WithTimeout(d time.Duration) Option {
	return func(dc *Decider) { dc.timeout = d }
}

// NewDecider returns a Decider for the record stored at key in bucket,
// accessed through client. The bucket must exist; the object is created by
// the first election.
//
// For an S3-compatible store, point the client at it when creating it:
//
//	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
//		o.BaseEndpoint = aws.String("http://127.0.0.1:7070")
//		o.UsePathStyle = true
//	})
func NewDecider(client *s3.Client, bucket, key string, opts ...Option) (*Decider, error) {
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("client is nil"))
	}
	switch {
	case bucket == "":
		errs = append(errs, errors.New(`bucket is empty ("")`))
	case strings.ContainsAny(bucket, "/ "):
		errs = append(errs, fmt.Errorf("bucket %q is not a bucket name (it contains '/' or a space)", bucket))
	}
	switch {
	case key == "":
		errs = append(errs, errors.New(`key is empty ("")`))
	case !utf8.ValidString(key):
		// S3 documents object keys as UTF-8. gofakes3 and versitygw
		// take such a key all the same, but list every byte that is not
		// UTF-8 as U+FFFD: keys differing only in those bytes cannot be
		// told apart by anything that reads the bucket's listing.
		errs = append(errs, fmt.Errorf("key %q is not valid UTF-8", key))
	}
	d := &Decider{
		client:  client,
		bucket:  bucket,
		key:     key,
		name:    "s3://" + bucket + "/" + key,
		timeout: DefaultTimeout,
	}
	for _, o := range opts {
		o(d)
	}
	if client != nil {
		co := client.Options()
		d.creds = co.Credentials
		switch {
		case aws.ToString(co.BaseEndpoint) != "":
			d.where = "endpoint " + aws.ToString(co.BaseEndpoint)
			d.virtualHosted = !co.UsePathStyle
		case co.Region != "":
			d.where = "AWS S3 in region " + co.Region
		default:
			d.where = "AWS S3"
		}
	}
	if d.timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s is negative", d.timeout))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("s3: NewDecider(%q, %q): %w", bucket, key, errors.Join(errs...))
	}
	return d, nil
}

// String returns the object's name, s3://bucket/key.
func (d *Decider) String() string { return d.name }

// ReadCurrent implements leaderelection.RaceDecider: it reads the object
// with GetObject. The token's Version is the object's ETag exactly as the
// server sends it (quotes included) and its CommitTime the object's
// Last-Modified time (whole seconds). A missing
// object (404 NoSuchKey) reads as entry.NoElections. A missing bucket (404
// NoSuchBucket), a 404 without an S3 error code (a wrong endpoint) and 403
// are errors wrapping entry.ErrRefused, 503 SlowDown and 429 errors wrapping
// entry.ErrThrottled.
func (d *Decider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3: read %s: %w", d.name, err)
	}
	opCtx, cancel := d.opContext(ctx)
	defer cancel()
	out, err := d.client.GetObject(opCtx, &s3.GetObjectInput{
		Bucket: aws.String(d.bucket),
		Key:    aws.String(d.key),
	})
	if err != nil {
		c, why := classify(err, getObject, d.creds)
		if c == missing && ctx.Err() == nil {
			return &entry.RaceEntry{ElectionNumber: entry.NoElections}, nil
		}
		return nil, d.fail(ctx, opCtx, "read "+d.name, err, c, why)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, maxRecordSize+1))
	if err != nil {
		return nil, d.fail(ctx, opCtx, "read body of "+d.name, err, unknown, "")
	}
	etag := aws.ToString(out.ETag)
	if len(data) > maxRecordSize {
		return nil, fmt.Errorf("s3: record %s (ETag %s): %w: larger than %d bytes",
			d.name, etag, entry.ErrCorruptRecord, maxRecordSize)
	}
	e, err := entry.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("s3: record %s (ETag %s): %w", d.name, etag, err)
	}
	if etag == "" {
		return nil, fmt.Errorf("s3: read %s: the server sent no ETag; it cannot hold an election record", d.name)
	}
	e.Token = entry.LeaderToken{Version: etag, CommitTime: aws.ToTime(out.LastModified)}
	return e, nil
}

// WriteEntry implements leaderelection.RaceDecider with a conditional
// PutObject: If-None-Match: * when rentry.Token is zero, otherwise If-Match
// with the token's ETag. It returns the new object's ETag as the token, with
// the response's Date as CommitTime.
//
// A refused condition (412 Precondition Failed, 409
// ConditionalRequestConflict, or 404 NoSuchKey on an If-Match write: the
// object conditioned on is gone) gives an error wrapping entry.ErrRaceLost;
// 503 SlowDown and 429 wrap entry.ErrThrottled; 403, 404 NoSuchBucket, any
// other 404 (on a PUT, a 404 without NoSuchKey means a wrong endpoint or
// bucket, never a lost race) and other 4xx wrap entry.ErrRefused. Each of
// these holds only when no earlier attempt of the SDK's may have been
// applied: when it had to retry after a connection reset, timeout or 5xx,
// the retry may have been refused because of that very write, so the error
// is then a plain one, and the engine reads the record back and recognises
// its write id.
//
// The ETag of a plain PutObject is the MD5 of the body, so two identical
// bodies get the same ETag and a writer holding the first one's ETag could
// overwrite the second. The engine puts a random write id in every record,
// which makes every body unique; WriteEntry refuses a record with an empty
// WriteID for this reason.
func (d *Decider) WriteEntry(ctx context.Context, rentry *entry.RaceEntry) (entry.LeaderToken, error) {
	if err := ctx.Err(); err != nil {
		return entry.LeaderToken{}, fmt.Errorf("s3: write %s: %w", d.name, err)
	}
	if rentry.WriteID == "" {
		return entry.LeaderToken{}, fmt.Errorf("s3: write %s: %w: the record has no WriteID; S3 versions are content hashes, so every write needs a unique one", d.name, entry.ErrRefused)
	}
	body, err := entry.Marshal(rentry)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("s3: write %s: %w", d.name, err)
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(d.bucket),
		Key:           aws.String(d.key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/octet-stream"),
	}
	cond := "If-None-Match: *"
	ifMatch := !rentry.Token.IsZero()
	if ifMatch {
		in.IfMatch = aws.String(rentry.Token.Version)
		cond = "If-Match: " + rentry.Token.Version
	} else {
		in.IfNoneMatch = aws.String("*")
	}
	opCtx, cancel := d.opContext(ctx)
	defer cancel()
	req := putIfNoneMatch
	if ifMatch {
		req = putIfMatch
	}
	at := attempts{creds: d.creds}
	out, err := d.client.PutObject(opCtx, in, s3.WithAPIOptions(at.track(req)))
	if err != nil {
		c, why := classify(err, req, d.creds)
		if n := at.n.Load(); n > 1 && c != unknown && at.unsure.Load() {
			return entry.LeaderToken{}, fmt.Errorf("s3: write %s (%s): outcome unknown: the SDK retried after an attempt that may have been applied, and the last attempt was refused (%s), possibly because of that write (%d attempts): %w",
				d.name, cond, why, n, err)
		}
		return entry.LeaderToken{}, d.fail(ctx, opCtx, "write "+d.name+" ("+cond+")", err, c, why)
	}
	etag := aws.ToString(out.ETag)
	if etag == "" {
		// The write was applied but we cannot condition on it: report an
		// unknown outcome so that the engine reads the record back.
		return entry.LeaderToken{}, fmt.Errorf("s3: write %s (%s): the server accepted the write but sent no ETag", d.name, cond)
	}
	commit, _ := awsmiddleware.GetServerTime(out.ResultMetadata)
	return entry.LeaderToken{Version: etag, CommitTime: commit}, nil
}

// opContext bounds one call by d.timeout.
func (d *Decider) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d.timeout)
}

// fail wraps err from an S3 call described by what, whose answer classify
// put in class c for reason why. The result wraps the caller's ctx.Err()
// when the caller's context ended, and says so when the call's own timeout
// ran out: either is an unknown outcome, whatever the answer was.
func (d *Decider) fail(ctx, opCtx context.Context, what string, err error, c class, why string) error {
	switch {
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return fmt.Errorf("s3: %s: %w: %w", what, ctx.Err(), err)
	case ctx.Err() != nil:
		return fmt.Errorf("s3: %s: %w", what, err)
	case opCtx.Err() != nil:
		return fmt.Errorf("s3: %s: no answer within %s (see WithTimeout): %w", what, d.timeout, err)
	}
	switch c {
	case raceLost:
		return fmt.Errorf("s3: %s: %w: %s: %w", what, entry.ErrRaceLost, why, err)
	case throttled:
		return fmt.Errorf("s3: %s: %w: %s: %w", what, entry.ErrThrottled, why, err)
	case refused:
		return fmt.Errorf("s3: %s at %s: %w: %s%s: %w", what, d.where, entry.ErrRefused, why, d.hint(err), err)
	}
	if isDNSError(err) {
		return fmt.Errorf("s3: %s at %s%s: %w", what, d.where, d.hint(err), err)
	}
	return fmt.Errorf("s3: %s: %w", what, err)
}

// hint suggests path-style addressing when a request that put the bucket in
// the host name of a custom endpoint found no bucket or no such host.
func (d *Decider) hint(err error) string {
	if !d.virtualHosted {
		return ""
	}
	var re *smithyhttp.ResponseError
	if !isDNSError(err) && !(errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound) {
		return ""
	}
	return " (the client puts the bucket in the endpoint's host name, as AWS does; most S3-compatible stores need path-style addressing: add path_style=true to the s3:// URL, or set UsePathStyle on the client)"
}

// attempts records, for one operation, how many attempts the SDK made and
// whether any of them may have been applied.
type attempts struct {
	creds  aws.CredentialsProvider // the client's, for classify
	n      atomic.Int32
	unsure atomic.Bool
}

// track adds a middleware that sits after the SDK's retry middleware, so it
// runs once per attempt and sees each attempt's answer.
func (a *attempts) track(req request) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("leaderelectionTrackAttempts",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				a.n.Add(1)
				out, md, err := next.HandleFinalize(ctx, in)
				if err != nil {
					if c, _ := classify(err, req, a.creds); c == unknown {
						a.unsure.Store(true)
					}
				}
				return out, md, err
			}), middleware.After)
	}
}
