// Package gcs runs leader elections on Google Cloud Storage: one object per
// election holds the record, and every write is conditioned on the object's
// generation.
//
//	client, err := storage.NewClient(ctx)
//	...
//	d, err := gcs.NewDecider(client, "my-bucket", "elections/scheduler")
//	...
//	cfg := leaderelection.Config{Decider: d, LeaderID: id, OnElected: run}
//
// # How the record is stored
//
// ReadCurrent reads the object's content and generation from a single
// download response, so the two always belong together; a missing object
// reads as entry.NoElections. The generation, as a decimal string, is the
// record's entry.LeaderToken. WriteEntry uploads the new record in one request
// (no resumable session, no 16 MiB buffer), with the precondition
// ifGenerationMatch set to the token it was given, or to 0 (the object must
// not exist) for a zero token. Cloud Storage applies a conditional upload
// atomically, so of any number of concurrent writers conditioned on the same
// generation exactly one succeeds; the others get HTTP 412, which WriteEntry
// reports as entry.ErrRaceLost. A release is an ordinary conditional write:
// the object is never deleted.
//
// # Retries and ambiguous writes
//
// Reads are retried by the storage client, writes by WriteEntry itself, on
// the errors the storage client deems transient (HTTP 408 and 5xx, and 429
// on a read, connection resets, responses cut short), both with the same
// short jittered backoff (100 ms at first, doubling) and at most maxAttempts
// (4) attempts in all, or until ctx ends. What is still failing then is
// returned, classified. A write answered 429 or 412 is never retried: a 429
// wraps entry.ErrThrottled, and the election engine waits out the object's
// write interval before it writes again.
//
// # Write rate
//
// Cloud Storage takes about one write per second to one object. The Decider
// declares it (MinWriteInterval, leaderelection.WriteSpacer), and the engine
// keeps all candidates' writes to one object at least that far apart: a
// candidate that finds the record free waits until a second after its commit
// time before it writes, and a leader's release waits for the second after
// its last extension. Candidates that find the record free within a read
// and a write of each other may still both write; the loser's write fails
// its precondition (412), without changing the object. So a term needs at
// least 4 seconds (the engine logs a warning below that); 15 s, the default,
// costs 2 writes a term.
//
// # Errors
//
// One function, classify, maps every answer: 412 is entry.ErrRaceLost; 429,
// and 503 on a read, entry.ErrThrottled; 401, 403, a missing bucket and any
// other 4xx entry.ErrRefused, naming the object, as is a 4xx but 408 and 429
// from the OAuth token endpoint (400 invalid_grant: a deleted key, a disabled
// service account), which no request to Cloud Storage follows; timeouts,
// resets and other 5xx (503 on an upload included: nothing proves it was not
// applied) an unknown outcome. The storage client reports a download's 404
// the same way whether the object or the bucket is missing, so after one
// ReadCurrent lists the bucket (one request, permission
// storage.objects.list) and reports a missing bucket as a refusal, never as
// "no election yet".
//
// Retrying a conditional write is safe: an attempt that was applied after all
// makes every later attempt fail with 412, and cannot itself be applied after
// another attempt or writer has changed the object. But such a 412 does not
// mean the race was lost: the first attempt may have won it. So WriteEntry
// reports entry.ErrRaceLost only when no earlier attempt of the same call can
// have reached the store; after an attempt whose outcome is unknown (a reset
// connection, a lost response, a 5xx), a 412 is reported as an error of
// unknown outcome, which the election engine resolves by reading the record
// back and looking for the write's WriteID.
//
// # Commit times
//
// The token returned by WriteEntry carries the object's update time as Cloud
// Storage reports it (millisecond resolution): the store's clock at the
// moment the write was committed. The token returned by ReadCurrent carries
// what the download response says: with the storage client's default XML
// reads, the HTTP Last-Modified header, which has whole-second resolution;
// with storage.WithJSONReads, nothing (a zero CommitTime); with a gRPC
// client, the exact update time. Getting an exact time on every read would
// cost a second request; write times are the ones that bound clock skew
// anyway, since a write's commit time falls between sending it and its reply.
//
// # Changes are polled
//
// Cloud Storage cannot push a change to a waiting client, so the Decider does
// not implement leaderelection.ChangeNotifier: candidates and watchers poll.
//
// # Bucket requirements
//
// Credentials need storage.objects.get and storage.objects.create on the
// object, and storage.objects.delete too: Cloud Storage requires it to
// overwrite an existing object; and storage.objects.list on the bucket, to
// tell a missing record from a missing bucket (roles/storage.objectUser has
// all four). The bucket must not have a retention policy
// or object holds that forbid overwrites. With object versioning, every write
// leaves a noncurrent version behind (the leader writes twice per term): add
// a lifecycle rule deleting noncurrent versions, or use a bucket without
// versioning. Cloud Storage accepts about one write per second to a single
// object name; the leader's two writes per term are far below that for any
// practical TermLength.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/storage"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/iterator"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/backoff"
)

// ContentType is the Content-Type of every record object.
const ContentType = "application/octet-stream"

// maxRecordSize bounds the object ReadCurrent will read (entry.Marshal makes
// no larger record).
const maxRecordSize = entry.MaxSize

// Backoff between write attempts: the first pause is drawn from
// [initialBackoff/2, initialBackoff], and each later one from a range twice
// as large, up to maxBackoff.
const (
	initialBackoff = 100 * time.Millisecond
	maxBackoff     = 2 * time.Second
)

// maxAttempts bounds the attempts of one read or write, first one included,
// so that a store that keeps refusing (429) is reported as throttled after
// about half a second, not retried until the caller's deadline.
const maxAttempts = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Decider is a leaderelection.RaceDecider on one Cloud Storage object. It is
// safe for concurrent use. Create it with NewDecider.
type Decider struct {
	name string // gs://bucket/object
	// reader and writer are handles on the object with their own retry
	// settings, made once: ObjectHandle.Retryer changes the handle's retry
	// settings in place, so calling it per request would race.
	reader, writer *storage.ObjectHandle
	// bucket lists the bucket after a download found nothing.
	bucket *storage.BucketHandle
	object string
	opts   options
}

type options struct {
	predefinedACL string
	acl           []storage.ACLRule
	kmsKeyName    string
	writeInterval time.Duration
}

// DefaultMinWriteInterval is the least time between writes to one object
// that a Decider asks every candidate to keep (see WithMinWriteInterval):
// Cloud Storage documents about one write per second to one object, and
// answers 429 beyond it.
const DefaultMinWriteInterval = time.Second

// An Option configures a Decider.
type Option func(*options)

// WithPredefinedACL sets a predefined ACL on every record object written, such
// as "projectPrivate" or "bucketOwnerFullControl". It does not apply to
// buckets with uniform bucket-level access, which is the recommended setting;
// leave it unset there.
func WithPredefinedACL(acl string) Option {
	return func(o *options) { o.predefinedACL = acl }
}

// WithACL sets the access control list of every record object written. It
// does not apply to buckets with uniform bucket-level access. It cannot be
// combined with WithPredefinedACL.
func WithACL(rules ...storage.ACLRule) Option {
	return func(o *options) { o.acl = append([]storage.ACLRule(nil), rules...) }
}

// WithKMSKeyName encrypts every record object written with the named Cloud
// KMS key ("projects/P/locations/L/keyRings/R/cryptoKeys/K") instead of the
// bucket's default key. The credentials' service agent needs permission to use
// the key.
func WithKMSKeyName(name string) Option {
	return func(o *options) { o.kmsKeyName = name }
}

// WithMinWriteInterval sets the least time between two writes to the object
// that the election engine keeps to, over all candidates together (see
// leaderelection.WriteSpacer): DefaultMinWriteInterval unless set. Zero turns
// the spacing off, for an emulator that does not throttle (fake-gcs-server)
// with terms too short for it; against Cloud Storage, keep the default and a
// TermLength of at least 4 seconds.
func WithMinWriteInterval(d time.Duration) Option {
	return func(o *options) { o.writeInterval = d }
}

var predefinedACLs = []string{
	"authenticatedRead", "bucketOwnerFullControl", "bucketOwnerRead",
	"private", "projectPrivate", "publicRead",
}

// NewDecider returns a Decider keeping the election record in the object
// named object in bucket, through client (made by storage.NewClient or
// storage.NewGRPCClient). The object need not exist: the first write creates
// it. It reports an error naming any value that Cloud Storage would reject.
func NewDecider(client *storage.Client, bucket, object string, opts ...Option) (*Decider, error) {
	o := options{writeInterval: DefaultMinWriteInterval}
	for _, opt := range opts {
		opt(&o)
	}
	var errs []error
	if o.writeInterval < 0 {
		errs = append(errs, fmt.Errorf("minimum write interval %v is negative", o.writeInterval))
	}
	if client == nil {
		errs = append(errs, errors.New("storage client is nil"))
	}
	if err := validBucket(bucket); err != nil {
		errs = append(errs, err)
	}
	if err := validObject(object); err != nil {
		errs = append(errs, err)
	}
	if o.predefinedACL != "" && !slices.Contains(predefinedACLs, o.predefinedACL) {
		errs = append(errs, fmt.Errorf("predefined ACL %q is not one of %s", o.predefinedACL, strings.Join(predefinedACLs, ", ")))
	}
	if o.predefinedACL != "" && len(o.acl) > 0 {
		errs = append(errs, fmt.Errorf("WithACL and WithPredefinedACL(%q) cannot be combined", o.predefinedACL))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("gcs: NewDecider: %w", errors.Join(errs...))
	}
	// Each Object call clones the client's retry settings, so the two
	// handles below change only their own.
	retry := []storage.RetryOption{
		storage.WithBackoff(gax.Backoff{Initial: initialBackoff, Max: maxBackoff, Multiplier: 2}),
		storage.WithMaxAttempts(maxAttempts),
	}
	return &Decider{
		name:   "gs://" + bucket + "/" + object,
		reader: client.Bucket(bucket).Object(object).Retryer(retry...),
		writer: client.Bucket(bucket).Object(object).Retryer(storage.WithPolicy(storage.RetryNever)),
		bucket: client.Bucket(bucket).Retryer(retry...),
		object: object,
		opts:   o,
	}, nil
}

// validBucket checks the naming rules Cloud Storage documents for buckets.
func validBucket(b string) error {
	if b == "" {
		return errors.New("bucket name is empty")
	}
	bad := func(why string) error { return fmt.Errorf("bucket name %q %s", b, why) }
	if len(b) < 3 || len(b) > 222 {
		return bad("must be 3 to 222 characters long")
	}
	for _, part := range strings.Split(b, ".") {
		if len(part) > 63 {
			return bad("has a dot-separated part longer than 63 characters")
		}
	}
	if !strings.Contains(b, ".") && len(b) > 63 {
		return bad("must be at most 63 characters long unless it contains dots")
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return bad("may hold only lowercase letters, digits, '-', '_' and '.'")
		}
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(b[0]) || !alnum(b[len(b)-1]) {
		return bad("must start and end with a letter or digit")
	}
	return nil
}

// validObject checks the naming rules Cloud Storage documents for objects.
func validObject(o string) error {
	switch {
	case o == "":
		return errors.New("object name is empty")
	case len(o) > 1024:
		return fmt.Errorf("object name %.40q... is %d bytes long, more than 1024", o, len(o))
	case !utf8.ValidString(o):
		return fmt.Errorf("object name %q is not valid UTF-8", o)
	case strings.ContainsAny(o, "\r\n"):
		return fmt.Errorf("object name %q contains a carriage return or line feed", o)
	case o == "." || o == "..":
		return fmt.Errorf("object name %q is not allowed", o)
	case strings.HasPrefix(o, ".well-known/acme-challenge/"):
		return fmt.Errorf("object name %q starts with .well-known/acme-challenge/, which is reserved", o)
	}
	return nil
}

// String returns the object's URL, gs://bucket/object.
func (d *Decider) String() string { return d.name }

// ReadCurrent implements leaderelection.RaceDecider. It makes one download
// request (a Class B operation), retried by the storage client on transient
// errors; when the object is not found, one listing of the bucket too (a
// Class A operation), to tell a missing record from a missing bucket.
func (d *Decider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gcs: read %s: %w", d.name, err)
	}
	r, err := d.reader.NewReader(ctx)
	if err != nil {
		c, why := classify(err, download)
		if c != notFound {
			return nil, d.fail(ctx, "read", err, c, why)
		}
		if err := d.checkBucket(ctx); err != nil {
			return nil, err
		}
		return &entry.RaceEntry{ElectionNumber: entry.NoElections}, nil
	}
	defer r.Close()
	gen := r.Attrs.Generation
	if gen <= 0 {
		return nil, fmt.Errorf("gcs: read %s: the response did not report the object's generation", d.name)
	}
	at := fmt.Sprintf("%s#%d", d.name, gen)
	if r.Attrs.Size > maxRecordSize {
		return nil, fmt.Errorf("gcs: %s: %w: the object is %d bytes, larger than any record (%d)",
			at, entry.ErrCorruptRecord, r.Attrs.Size, maxRecordSize)
	}
	data, err := io.ReadAll(io.LimitReader(r, maxRecordSize+1))
	if err != nil {
		return nil, d.fail(ctx, "read "+at, err, unknown, "")
	}
	if len(data) > maxRecordSize {
		return nil, fmt.Errorf("gcs: %s: %w: the object is larger than any record (%d bytes)",
			at, entry.ErrCorruptRecord, maxRecordSize)
	}
	e, err := entry.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("gcs: %s: %w", at, err)
	}
	e.Token = entry.LeaderToken{
		Version:    strconv.FormatInt(gen, 10),
		CommitTime: r.Attrs.LastModified,
	}
	return e, nil
}

// checkBucket runs after a download found no object, and returns an error
// unless the bucket exists. It lists at most one name, the object's.
//
// The download's 404 was true when it was answered; if the record has been
// created since, reporting it missing is just a read that is slightly out of
// date, which any read may be: a write conditioned on its absence then loses
// the race. So the listing is asked only about the bucket, never whether the
// object exists now.
func (d *Decider) checkBucket(ctx context.Context) error {
	it := d.bucket.Objects(ctx, &storage.Query{Prefix: d.object})
	it.PageInfo().MaxSize = 1
	_, err := it.Next()
	if err == nil || errors.Is(err, iterator.Done) {
		return nil
	}
	c, why := classify(err, listBucket)
	return d.fail(ctx, "read (the object was not found; listing its bucket)", err, c, why)
}

// WriteEntry implements leaderelection.RaceDecider. Each attempt is one upload
// request (a Class A operation). See the package documentation for how it
// retries and when it reports entry.ErrRaceLost.
func (d *Decider) WriteEntry(ctx context.Context, rentry *entry.RaceEntry) (entry.LeaderToken, error) {
	if err := ctx.Err(); err != nil {
		return entry.LeaderToken{}, fmt.Errorf("gcs: write %s: %w", d.name, err)
	}
	cond, on, err := conditions(rentry.Token)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("gcs: write %s: %w", d.name, err)
	}
	body, err := entry.Marshal(rentry)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("gcs: write %s: %w", d.name, err)
	}
	what := fmt.Sprintf("write %s (%s)", d.name, on)
	obj := d.writer.If(cond)

	var unsure error // the first failed attempt that may have been applied
	b := backoff.Backoff{Min: initialBackoff, Max: maxBackoff}
	for attempt := 1; ; attempt++ {
		attrs, err := d.upload(ctx, obj, body)
		if err == nil && (attrs == nil || attrs.Generation <= 0) {
			// Applied, but with no generation to condition the next
			// write on: a token "0" would make every later write fail.
			// Not a refusal, which says the write was not applied, and
			// not retried, which would lose to this very write: the
			// outcome is left unknown, and the engine reads the record
			// back, its generation with it, and finds its write id.
			return entry.LeaderToken{}, fmt.Errorf("gcs: %s: attempt %d: outcome unknown: "+
				"the upload succeeded but the response did not report the object's generation", what, attempt)
		}
		if err == nil {
			return entry.LeaderToken{Version: strconv.FormatInt(attrs.Generation, 10), CommitTime: commitTime(attrs)}, nil
		}
		c, why := classify(err, upload)
		// Throttling is not retried here: another attempt within the
		// second would only be throttled again, and the engine waits out
		// MinWriteInterval before its next.
		if c == raceLost || c == throttled || ctx.Err() != nil || !storage.ShouldRetry(err) || attempt == maxAttempts {
			if c != unknown && unsure != nil && ctx.Err() == nil {
				// This attempt was refused, perhaps because an earlier one
				// was applied.
				return entry.LeaderToken{}, fmt.Errorf("gcs: %s: outcome unknown: attempt %d was refused (%s), "+
					"but an earlier attempt, which failed with %q, may have been applied: %w", what, attempt, why, unsure, err)
			}
			return entry.LeaderToken{}, d.fail(ctx, what+": attempt "+strconv.Itoa(attempt), err, c, why)
		}
		if unsure == nil && !certainlyNotApplied(err) {
			unsure = err
		}
		// Jitter keeps a crowd of retrying candidates from arriving
		// together.
		t := time.NewTimer(b.Next())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return entry.LeaderToken{}, d.fail(ctx, what+": after "+strconv.Itoa(attempt)+" attempts", err, unknown, "")
		}
	}
}

// MinWriteInterval implements leaderelection.WriteSpacer: the engine sends no
// write sooner than this after the last, so that the object's write rate is
// kept (see WithMinWriteInterval).
func (d *Decider) MinWriteInterval() time.Duration { return d.opts.writeInterval }

// upload makes one upload attempt.
func (d *Decider) upload(ctx context.Context, obj *storage.ObjectHandle, body []byte) (*storage.ObjectAttrs, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // aborts the upload if Write failed
	w := obj.NewWriter(ctx)
	w.ChunkSize = 0 // one request, no buffer; WriteEntry retries
	w.ContentType = ContentType
	// A record must never be served from a cache, even for a publicly
	// readable object.
	w.CacheControl = "no-store"
	w.CRC32C = crc32.Checksum(body, castagnoli)
	w.SendCRC32C = true
	w.PredefinedACL = d.opts.predefinedACL
	w.ACL = d.opts.acl
	w.KMSKeyName = d.opts.kmsKeyName
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return w.Attrs(), nil
}

// conditions turns a token into the upload's precondition, and describes it.
func conditions(tok entry.LeaderToken) (storage.Conditions, string, error) {
	if tok.IsZero() {
		return storage.Conditions{DoesNotExist: true}, "if it does not exist", nil
	}
	gen, err := strconv.ParseInt(tok.Version, 10, 64)
	if err != nil || gen <= 0 {
		return storage.Conditions{}, "", fmt.Errorf("%w: token version %q is not a Cloud Storage generation", entry.ErrRefused, tok.Version)
	}
	return storage.Conditions{GenerationMatch: gen}, "if at generation " + tok.Version, nil
}

func commitTime(a *storage.ObjectAttrs) time.Time {
	if !a.Updated.IsZero() {
		return a.Updated
	}
	return a.Created
}

// fail wraps err for op, whose answer classify put in class c for reason
// why. The result wraps ctx.Err() when ctx has ended, whatever the storage
// client's error says: the outcome is then unknown.
func (d *Decider) fail(ctx context.Context, op string, err error, c class, why string) error {
	if !strings.Contains(op, d.name) {
		op += " " + d.name
	}
	if cerr := ctx.Err(); cerr != nil {
		if !errors.Is(err, cerr) {
			return fmt.Errorf("gcs: %s: %w (%w)", op, cerr, err)
		}
		return fmt.Errorf("gcs: %s: %w", op, err)
	}
	switch c {
	case raceLost:
		return fmt.Errorf("gcs: %s: %w: %s: %w", op, entry.ErrRaceLost, why, err)
	case throttled:
		return fmt.Errorf("gcs: %s: %w: %s: %w", op, entry.ErrThrottled, why, err)
	case refused:
		return fmt.Errorf("gcs: %s: %w: %s: %w", op, entry.ErrRefused, why, err)
	}
	return fmt.Errorf("gcs: %s: %w", op, err)
}
