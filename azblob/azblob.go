package azblob

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/backoff"
	"github.com/racedecider/leaderelection/internal/tlsfail"
)

// DefaultTimeout bounds each ReadCurrent and WriteEntry call, retries
// included, unless WithTimeout says otherwise.
const DefaultTimeout = 10 * time.Second

// ContentType is the Content-Type of every record blob.
const ContentType = "application/octet-stream"

// maxRecordSize bounds the blob ReadCurrent will read (entry.Marshal makes no
// larger record).
const maxRecordSize = entry.MaxSize

// Write attempts: at most writeAttempts per WriteEntry call, the first pause
// drawn from [initialBackoff/2, initialBackoff] and each later one from a
// range twice as large, up to maxBackoff.
const (
	writeAttempts  = 4
	initialBackoff = 100 * time.Millisecond
	maxBackoff     = 2 * time.Second
)

// noRetries turns the SDK's own retries off for one call: WriteEntry retries
// writes itself, because only it can tell which attempt's answer to believe.
// It does not reach the credential: azcore hides it from the token requests
// made for the call (shared.ContextWithDeniedValues), which keep azidentity's
// retries (a managed identity's, say).
var noRetries = policy.RetryOptions{MaxRetries: -1}

// Decider is a leaderelection.RaceDecider that keeps the election record in
// one block blob. It is safe for concurrent use. It does not implement
// leaderelection.ChangeNotifier: Blob Storage cannot push a change to a
// waiting client, so candidates and watchers poll.
type Decider struct {
	blob      *blockblob.Client
	container string
	blobName  string
	name      string // azblob://container/blob
	timeout   time.Duration
}

// Option configures a Decider.
type Option func(*Decider)

// WithTimeout bounds each ReadCurrent and WriteEntry call, retries included,
// to d (DefaultTimeout when not given). It keeps a candidate whose connection
// hangs without an error from waiting on it indefinitely when its context has
// no deadline. Zero means no bound but the context's.
func WithTimeout(d time.Duration) Option {
	return func(dc *Decider) { dc.timeout = d }
}

// NewDecider returns a Decider for the record stored in the block blob named
// blobName in the container client addresses. The container must exist; the
// blob is created by the first election. blobName must be UTF-8, 1 to 1024
// characters (code points, not bytes), hold no backslash (Azure stores one
// as '/', so that the record would share a name spelt with slashes) and not
// end in '/' or '.' (which Azure drops). The container, the last element
// of the client's URL path, must be named as Azure requires (3 to 63
// lowercase letters, digits and hyphens, starting and ending with a letter
// or digit, no two hyphens in a row), or be a system container ($root,
// $web, ...).
//
// Make the client with any of the SDK's constructors: container.NewClient
// with an azidentity credential, container.NewClientFromConnectionString,
// container.NewClientWithSharedKeyCredential, or
// container.NewClientWithNoCredential with a SAS URL. The client's retry
// options apply to reads; writes are retried by WriteEntry itself.
func NewDecider(client *container.Client, blobName string, opts ...Option) (*Decider, error) {
	var errs []error
	var containerName string
	if client == nil {
		errs = append(errs, errors.New("container client is nil"))
	} else {
		// A container client's URL ends with the container's name, after
		// the account's where the host does not name it (Azurite,
		// http://localhost:10000/ACCOUNT/CONTAINER). blob.ParseURL takes
		// the account for the container there unless the host is an IP
		// address.
		u, err := url.Parse(client.URL())
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("container URL %q: %w", redactURL(client.URL()), err))
		case strings.Trim(u.Path, "/") == "":
			errs = append(errs, fmt.Errorf("container URL %q names no container", redactURL(client.URL())))
		default:
			containerName = path.Base(u.Path)
			if err := validContainerName(containerName); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := validBlobName(blobName); err != nil {
		errs = append(errs, err)
	}
	d := &Decider{
		container: containerName,
		blobName:  blobName,
		name:      "azblob://" + containerName + "/" + blobName,
		timeout:   DefaultTimeout,
	}
	for _, o := range opts {
		o(d)
	}
	if d.timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %s is negative", d.timeout))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("azblob: NewDecider(%q): %w", blobName, errors.Join(errs...))
	}
	d.blob = client.NewBlockBlobClient(blobName)
	return d, nil
}

// validContainerName checks the naming rules Azure documents for
// containers: 3 to 63 lowercase letters, digits and hyphens, starting and
// ending with a letter or digit, no two hyphens in a row. Blob Storage and
// Azurite answer a request naming any other container with 400
// (InvalidResourceName, OutOfRangeInput), a refusal that would end Acquire
// with a less helpful error; this one names the container and the rule. The
// system containers ($root, $web, $logs) start with '$' and are left to the
// service, as Azurite leaves them.
func validContainerName(c string) error {
	if strings.HasPrefix(c, "$") {
		return nil
	}
	bad := func(why string) error {
		return fmt.Errorf("container name %q is not one Azure takes: %s (3 to 63 lowercase letters, digits and hyphens, starting and ending with a letter or digit, no two hyphens in a row)", c, why)
	}
	for _, r := range c {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			if r >= 'A' && r <= 'Z' {
				return bad("it holds an uppercase letter")
			}
			return bad(fmt.Sprintf("it holds %q", r))
		}
	}
	switch {
	case len(c) < 3 || len(c) > 63:
		return bad(fmt.Sprintf("its length is %d", len(c)))
	case c[0] == '-' || c[len(c)-1] == '-':
		return bad("it starts or ends with a hyphen")
	case strings.Contains(c, "--"):
		return bad("it holds two hyphens in a row")
	}
	return nil
}

// validBlobName checks the naming rules Azure documents for blobs.
func validBlobName(b string) error {
	switch {
	case b == "":
		return errors.New(`blob name is empty ("")`)
	case !utf8.ValidString(b):
		// The request URL would carry the bytes percent-encoded, which
		// names no blob: Azurite answers 500, an unknown outcome that
		// would be retried for ever.
		return fmt.Errorf("blob name %q is not valid UTF-8", b)
	case utf8.RuneCountInString(b) > 1024:
		// Azure documents the limit in characters, not bytes: a name of
		// 600 "é" (1200 bytes) is a valid one. Counting code points
		// refuses no name Azure takes, whether it counts code points or
		// UTF-16 units (where a rune outside the BMP is two).
		return fmt.Errorf("blob name %.40q... is %d characters long, more than 1024", b, utf8.RuneCountInString(b))
	case strings.Contains(b, `\`):
		// Blob Storage stores a backslash as a forward slash: the record
		// would live under another name, one that a name spelt with
		// slashes (another election) shares.
		return fmt.Errorf("blob name %q holds a backslash, which Azure stores as '/': write it with '/'", b)
	case strings.HasSuffix(b, "/") || strings.HasSuffix(b, "."):
		// Azure drops trailing dots and slashes from names, so the record
		// would live under another name than the one given.
		return fmt.Errorf("blob name %q ends with '/' or '.'", b)
	}
	return nil
}

// String returns the blob's name, azblob://container/blob.
func (d *Decider) String() string { return d.name }

// ReadCurrent implements leaderelection.RaceDecider: it downloads the blob
// with one Get Blob request; one that fails in a way that may pass (a
// transport error, a 5xx, throttling) is sent again after a jittered pause
// under the client's retry options, and so retried by the SDK. The token's
// Version is the blob's ETag and its CommitTime the blob's Last-Modified
// time (whole seconds). A missing blob (404 BlobNotFound) reads as
// entry.NoElections; a missing container is a refusal.
func (d *Decider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("azblob: read %s: %w", d.name, err)
	}
	opCtx, cancel := d.opContext(ctx)
	defer cancel()
	// A first attempt without the SDK's retries, so that an answer that
	// will not change (a refusal, a missing blob) comes back at once: the
	// SDK would retry a failed TLS handshake, say, until the caller's
	// deadline hid it. A failure that may pass is then retried by the SDK
	// under the client's retry options, after a jittered pause as between
	// write attempts: the SDK sends its first attempt at once.
	resp, err := d.blob.DownloadStream(policy.WithRetryOptions(opCtx, noRetries), nil)
	if err != nil && opCtx.Err() == nil {
		if o := classify(err, opRead); o == outcomeUnknown || o == outcomeThrottled {
			if sleep(opCtx, backoff.Spread(initialBackoff)) {
				resp, err = d.blob.DownloadStream(opCtx, nil)
			}
		}
	}
	if err != nil {
		o := classify(err, opRead)
		if o == outcomeMissing {
			return &entry.RaceEntry{ElectionNumber: entry.NoElections}, nil
		}
		return nil, d.fail(ctx, opCtx, "read "+d.name, o, err)
	}
	defer resp.Body.Close()
	if resp.RequestID == nil || *resp.RequestID == "" {
		return nil, fmt.Errorf("azblob: read %s: %w: %s", d.name, entry.ErrRefused, d.notBlobStorage())
	}
	if resp.ETag == nil || *resp.ETag == "" {
		return nil, fmt.Errorf("azblob: read %s: the server sent no ETag; it cannot hold an election record", d.name)
	}
	etag := string(*resp.ETag)
	at := d.name + " (ETag " + etag + ")"
	if resp.ContentLength != nil && *resp.ContentLength > maxRecordSize {
		return nil, fmt.Errorf("azblob: record %s: %w: the blob is %d bytes, larger than any record (%d)",
			at, entry.ErrCorruptRecord, *resp.ContentLength, maxRecordSize)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxRecordSize+1))
	if err != nil {
		return nil, d.fail(ctx, opCtx, "read body of "+at, outcomeUnknown, err)
	}
	if len(data) > maxRecordSize {
		return nil, fmt.Errorf("azblob: record %s: %w: larger than %d bytes", at, entry.ErrCorruptRecord, maxRecordSize)
	}
	e, err := entry.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("azblob: record %s: %w", at, err)
	}
	var commit time.Time
	if resp.LastModified != nil {
		commit = *resp.LastModified
	}
	e.Token = entry.LeaderToken{Version: etag, CommitTime: commit}
	return e, nil
}

// WriteEntry implements leaderelection.RaceDecider with a conditional Put
// Blob: the whole record in one request, never staged blocks, with
// If-None-Match: * when rentry.Token is zero and If-Match: <ETag> otherwise.
// It returns the new blob's ETag as the token, with its Last-Modified time as
// CommitTime.
//
// A refused condition (412 ConditionNotMet, 409 BlobAlreadyExists on a
// create, 404 BlobNotFound on an If-Match write: the blob conditioned on is
// gone) gives an error wrapping entry.ErrRaceLost, but only when no earlier
// attempt of the same call may have been applied. See the package
// documentation for how WriteEntry retries.
func (d *Decider) WriteEntry(ctx context.Context, rentry *entry.RaceEntry) (entry.LeaderToken, error) {
	if err := ctx.Err(); err != nil {
		return entry.LeaderToken{}, fmt.Errorf("azblob: write %s: %w", d.name, err)
	}
	body, err := entry.Marshal(rentry)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("azblob: write %s: %w", d.name, err)
	}
	sum := md5.Sum(body)
	cond := &blob.ModifiedAccessConditions{}
	op, what := opCreate, "write "+d.name+" (If-None-Match: *)"
	if !rentry.Token.IsZero() {
		etag := azcore.ETag(rentry.Token.Version)
		cond.IfMatch = &etag
		op, what = opReplace, "write "+d.name+" (If-Match: "+rentry.Token.Version+")"
	} else {
		star := azcore.ETagAny
		cond.IfNoneMatch = &star
	}
	opts := &blockblob.UploadOptions{
		HTTPHeaders: &blob.HTTPHeaders{
			BlobContentType: ptr(ContentType),
			// A record must never be served from a cache.
			BlobCacheControl: ptr("no-store"),
		},
		// Azure checks the body against its MD5, so a record damaged in
		// transit is refused rather than stored.
		TransactionalValidation: blob.TransferValidationTypeMD5(sum[:]),
		AccessConditions:        &blob.AccessConditions{ModifiedAccessConditions: cond},
	}

	opCtx, cancel := d.opContext(ctx)
	defer cancel()
	callCtx := policy.WithRetryOptions(opCtx, noRetries)
	var unsure error // the first failed attempt that may have been applied
	b := backoff.Backoff{Min: initialBackoff, Max: maxBackoff}
	for attempt := 1; ; attempt++ {
		resp, err := d.blob.Upload(callCtx, streaming.NopCloser(bytes.NewReader(body)), opts)
		if err == nil && (resp.RequestID == nil || *resp.RequestID == "") {
			if unsure != nil {
				return entry.LeaderToken{}, fmt.Errorf("azblob: %s: outcome unknown: attempt %d was answered by a server that is not Blob Storage (%s), "+
					"but an earlier attempt, which failed with %s, may have been applied", what, attempt, d.notBlobStorage(), describe(unsure))
			}
			return entry.LeaderToken{}, fmt.Errorf("azblob: %s: %w: %s", what, entry.ErrRefused, d.notBlobStorage())
		}
		if err == nil {
			if resp.ETag == nil || *resp.ETag == "" {
				// Applied, but we cannot condition on it: report an
				// unknown outcome so that the engine reads the record back.
				return entry.LeaderToken{}, fmt.Errorf("azblob: %s: the server accepted the write but sent no ETag", what)
			}
			var commit time.Time
			if resp.LastModified != nil {
				commit = *resp.LastModified
			}
			return entry.LeaderToken{Version: string(*resp.ETag), CommitTime: commit}, nil
		}
		o := classify(err, op)
		if o == outcomeRefused && leased(err) && !d.leasedForGood(opCtx) {
			// Not applied, and the lease will end (a fixed duration,
			// within a minute unless its holder renews it; a break), or
			// has: retried with backoff like throttling, where one
			// held for good stays refused.
			o = outcomeThrottled
			what += ": someone else holds a lease on the blob that ends (of fixed duration, or broken), which blocks writes until then"
		}
		if o != outcomeUnknown && unsure != nil {
			return entry.LeaderToken{}, fmt.Errorf("azblob: %s: outcome unknown: attempt %d was refused (%s), "+
				"but an earlier attempt, which failed with %s, may have been applied and caused that: %w",
				what, attempt, describe(err), describe(unsure), redacted(err))
		}
		if o != outcomeUnknown || !transient(err) || ctx.Err() != nil || opCtx.Err() != nil || attempt == writeAttempts {
			if unsure != nil && o == outcomeUnknown {
				what += ", attempt " + strconv.Itoa(attempt)
			}
			return entry.LeaderToken{}, d.fail(ctx, opCtx, what, o, err)
		}
		if unsure == nil && !neverSent(err) {
			unsure = err
		}
		if !sleep(opCtx, b.Next()) {
			return entry.LeaderToken{}, d.fail(ctx, opCtx, what+", after "+strconv.Itoa(attempt)+" attempts", outcomeUnknown, err)
		}
	}
}

// sleep waits d, and reports whether it did so before ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func ptr[T any](v T) *T { return &v }

// notBlobStorage says that the endpoint answered without the request id Blob
// Storage puts on every answer.
func (d *Decider) notBlobStorage() string {
	return endpointOf(d.blob.URL()) + " answered without an " + requestIDHeader + ", which Blob Storage and Azurite send with every answer: is it a Blob Storage endpoint?"
}

// endpointOf is "the endpoint SCHEME://HOST" of the URL u, or "the
// endpoint".
func endpointOf(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return "the endpoint " + p.Scheme + "://" + p.Host
	}
	return "the endpoint"
}

// leasedForGood reports whether the blob is under an infinite lease that is
// not being broken, as one more request shows: nothing ends it but its
// holder. Any other answer (a lease of fixed duration, a break, no lease any
// more, a failed request) is a lease that ends, or may have.
func (d *Decider) leasedForGood(ctx context.Context) bool {
	resp, err := d.blob.GetProperties(policy.WithRetryOptions(ctx, noRetries), nil)
	return err == nil && resp.LeaseState != nil && *resp.LeaseState == lease.StateTypeLeased &&
		resp.LeaseDuration != nil && *resp.LeaseDuration == lease.DurationTypeInfinite
}

// opContext bounds one call by d.timeout.
func (d *Decider) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d.timeout)
}

// fail wraps err from a call described by what, with the sentinel its outcome
// proves, making sure the result wraps the caller's ctx.Err() when the
// caller's context ended, and says so when the call's own timeout ran out.
func (d *Decider) fail(ctx, opCtx context.Context, what string, o outcome, err error) error {
	switch {
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return fmt.Errorf("azblob: %s: %w: %w", what, ctx.Err(), redacted(err))
	case ctx.Err() == nil && opCtx.Err() != nil:
		return fmt.Errorf("azblob: %s: no answer within %s (see WithTimeout): %w", what, d.timeout, redacted(err))
	}
	switch o {
	case outcomeLost:
		return fmt.Errorf("azblob: %s: %w: %w", what, entry.ErrRaceLost, redacted(err))
	case outcomeThrottled:
		return fmt.Errorf("azblob: %s: %w: %w", what, entry.ErrThrottled, redacted(err))
	case outcomeRefused:
		if noCredential(err) {
			// The SDK's text lists each credential tried and why it
			// could not be used.
			return fmt.Errorf("azblob: %s: %w: no Azure credentials are available: %w", what, entry.ErrRefused, redacted(err))
		}
		if why := tlsfail.Why(err); why != "" {
			return fmt.Errorf("azblob: %s: %w: %s: %w", what, entry.ErrRefused, why, redacted(err))
		}
		if tokenOverHTTP(err) {
			return fmt.Errorf("azblob: %s: %w: the client has a token credential and an http:// URL, and tokens are sent only to https:// endpoints "+
				"(for Azurite, use a shared key or a connection string): %w", what, entry.ErrRefused, redacted(err))
		}
		var re *azcore.ResponseError
		if errors.As(err, &re) && notBlobStorage(re) {
			return fmt.Errorf("azblob: %s: %w: %s (HTTP %d): %w", what, entry.ErrRefused, d.notBlobStorage(), re.StatusCode, redacted(err))
		}
		return fmt.Errorf("azblob: %s: %w: %w", what, entry.ErrRefused, redacted(err))
	}
	return fmt.Errorf("azblob: %s: %w", what, redacted(err))
}
