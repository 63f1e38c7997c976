package azblob

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/racedecider/leaderelection/internal/tlsfail"
)

// op is the kind of request an answer came back to.
type op int

const (
	opRead    op = iota // Get Blob
	opCreate            // Put Blob with If-None-Match: *
	opReplace           // Put Blob with If-Match: <ETag>
)

// outcome is what an answer proves about the request.
type outcome int

const (
	// outcomeUnknown: the request may or may not have been applied.
	outcomeUnknown outcome = iota
	// outcomeLost: the write's condition failed; not applied.
	outcomeLost
	// outcomeMissing: the blob does not exist (reads only).
	outcomeMissing
	// outcomeThrottled: the account is over a rate limit, or a lease that
	// ends blocks writes (see leasedForGood); not applied.
	outcomeThrottled
	// outcomeRefused: refused for good (permission, missing container,
	// an infinite lease, immutability); not applied.
	outcomeRefused
)

// classify maps every answer Blob Storage gives to a request of kind o. It is
// the one place that knows the service's status codes and error codes
// (https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes).
func classify(err error, o op) outcome {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		if entraRefused(err) {
			// Microsoft Entra ID refused the credential: no request was
			// sent to Blob Storage, and none will be until the credential
			// changes.
			return outcomeRefused
		}
		if tlsfail.Why(err) != "" {
			// No TLS connection to the endpoint can be made: no request
			// was sent, and none will be until the URL or the
			// certificate changes.
			return outcomeRefused
		}
		if noCredential(err) || tokenOverHTTP(err) {
			// The credential has nothing to get a token with, or azcore
			// will not send its token to an http endpoint: no request
			// was sent, and none will be until the client changes.
			return outcomeRefused
		}
		// A transport error (reset, timeout, cut connection), a cancelled
		// context, or Microsoft Entra ID unreachable or failing (an
		// AuthenticationFailedError without a response, or with a 5xx or
		// 429): an attempt may have reached the service.
		return outcomeUnknown
	}
	if notBlobStorage(re) {
		// A success (or redirect) that Blob Storage did not send: some
		// other server at the endpoint, which will answer the same again.
		return outcomeRefused
	}
	code := bloberror.Code(re.ErrorCode)
	switch code {
	case bloberror.ConditionNotMet:
		// 412: the If-Match or If-None-Match condition failed.
		if o != opRead {
			return outcomeLost
		}
	case bloberror.BlobAlreadyExists:
		// 409: some services answer a create on an existing blob so.
		if o == opCreate {
			return outcomeLost
		}
	case bloberror.BlobNotFound:
		switch o {
		case opRead:
			return outcomeMissing
		case opReplace:
			// The blob the write was conditioned on is gone: some other
			// writer deleted it, and our token is stale.
			return outcomeLost
		}
		return outcomeUnknown
	case bloberror.ContainerNotFound, bloberror.ContainerBeingDeleted, bloberror.ContainerDisabled:
		return outcomeRefused
	case bloberror.ServerBusy:
		// 503 (sometimes 500): over the account's or partition's request
		// or bandwidth limit; the service did not act on the request.
		return outcomeThrottled
	case bloberror.OperationTimedOut:
		// 500: the service may have done the work before timing out.
		return outcomeUnknown
	case bloberror.BlobArchived, bloberror.BlobBeingRehydrated:
		// 409: the blob was moved to the archive tier by hand or by a
		// lifecycle rule.
		return outcomeRefused
	}
	switch {
	case strings.HasPrefix(string(code), "BlobImmutable"):
		// 409 BlobImmutableDueToPolicy (and its legal-hold variant): a
		// time-based retention policy or legal hold forbids overwrites.
		return outcomeRefused
	case leased(err):
		// 412 LeaseIdMissing, 409 LeaseAlreadyPresent, ...: someone holds a
		// blob lease on the record, which this library never takes
		// (WriteEntry retries when the lease ends: see leasedForGood).
		return outcomeRefused
	}
	switch s := re.StatusCode; {
	case s == http.StatusPreconditionFailed && code == "" && o != opRead:
		// A server that sends no error code (Azure always does).
		return outcomeLost
	case s == http.StatusTooManyRequests:
		return outcomeThrottled
	case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusPreconditionFailed:
		// A conflict or precondition this table does not know: safe to
		// treat as unknown, as the engine then reads the record back.
		return outcomeUnknown
	case s >= 400 && s < 500:
		// Permission denied (403 AuthorizationFailure,
		// AuthorizationPermissionMismatch, AuthenticationFailed), a 404
		// from something that is not the service, a malformed request:
		// the service refused it and will again.
		return outcomeRefused
	}
	return outcomeUnknown
}

// requestIDHeader is on every answer Blob Storage (and Azurite) gives.
const requestIDHeader = "x-ms-request-id"

// notBlobStorage reports whether re is a 2xx or 3xx answer without an
// x-ms-request-id: not Blob Storage's, but another web server's at the
// endpoint (a proxy's or a portal's page, a server taking any PUT). Error
// answers without one are judged by their status as they are.
func notBlobStorage(re *azcore.ResponseError) bool {
	return re.RawResponse != nil && re.StatusCode < 400 && re.RawResponse.Header.Get(requestIDHeader) == ""
}

// entraRefused reports whether err is Microsoft Entra ID refusing the
// credential with a 4xx other than 429. Without a response (Entra ID
// unreachable), or with a 429 or 5xx, the failure may pass.
func entraRefused(err error) bool {
	var authErr *azidentity.AuthenticationFailedError
	return errors.As(err, &authErr) && authErr.RawResponse != nil &&
		authErr.RawResponse.StatusCode >= 400 && authErr.RawResponse.StatusCode < 500 &&
		authErr.RawResponse.StatusCode != http.StatusTooManyRequests
}

// nonRetriable is the marker azcore and azidentity put on errors that
// retrying cannot cure (the SDK's internal errorinfo.NonRetriable).
type nonRetriable interface {
	error
	NonRetriable()
}

// noCredential reports whether err says that the client's azidentity
// credential cannot get a token at all: it has no usable source
// (DefaultAzureCredential with no environment credentials, no managed
// identity, no az login; any credential reporting itself unavailable). Such
// an error comes from azidentity, not from Blob Storage, which the request
// never reached.
//
// azidentity's "credential unavailable" error type is unexported; it carries
// the NonRetriable marker and wraps nothing. The same marker is also put
// around other errors by azcore (errorinfo.NonRetriableError around any token
// failure, a body download error), and those may wrap a transport error or a
// cancelled context: so only a marked error that wraps nothing counts, and
// never one with an AuthenticationFailedError (classify judges that by its
// status), a service answer or a context error anywhere in the chain.
func noCredential(err error) bool {
	var re *azcore.ResponseError
	var authErr *azidentity.AuthenticationFailedError
	if err == nil || errors.As(err, &re) || errors.As(err, &authErr) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return markedLeaf(err)
}

// tokenOverHTTP reports whether err is azcore refusing to send a token
// credential's token to an endpoint that is not https (a client made with
// container.NewClient for Azurite's http:// address, say): it fails every
// request before sending it, and so for good. azcore's error is a plain one
// marked non-retriable, told only by its text ("authorized requests are not
// permitted for non-TLS protected (https) endpoints"; "authenticated ...
// non TLS ..." in older versions).
func tokenOverHTTP(err error) bool {
	var nr nonRetriable
	return errors.As(err, &nr) && strings.Contains(nr.Error(), "TLS protected (https) endpoints")
}

// markedLeaf reports whether err's chain holds a nonRetriable error that
// wraps no other error.
func markedLeaf(err error) bool {
	if _, ok := err.(nonRetriable); ok && errors.Unwrap(err) == nil {
		if _, multi := err.(interface{ Unwrap() []error }); !multi {
			return true
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			return markedLeaf(next)
		}
	case interface{ Unwrap() []error }:
		for _, next := range u.Unwrap() {
			if next != nil && markedLeaf(next) {
				return true
			}
		}
	}
	return false
}

// transient reports whether a failed write attempt is worth retrying at once:
// a transport error, or a status the service sends for passing trouble.
func transient(err error) bool {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
			!entraRefused(err) && !noCredential(err) && !tokenOverHTTP(err) && tlsfail.Why(err) == ""
	}
	switch re.StatusCode {
	case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// neverSent reports whether a failed attempt certainly never reached the
// service: the connection was not even made.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// describe says what err is in one line, without URLs' query strings (a SAS
// token is a credential) and without the service's message body (which may
// quote a request's signature).
func describe(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		s := "HTTP " + strconv.Itoa(re.StatusCode)
		if re.ErrorCode != "" {
			s += " " + re.ErrorCode
		}
		return s
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		msg := ue.Op + " " + redactURL(ue.URL) + ": "
		var op *net.OpError
		if errors.As(ue.Err, &op) {
			return msg + op.Error()
		}
		return msg + ue.Err.Error()
	}
	return err.Error()
}

// redactError shows describe's text but unwraps to the SDK's error, so that
// callers can still inspect it with errors.As.
type redactError struct{ err error }

func (e redactError) Error() string { return describe(e.err) }
func (e redactError) Unwrap() error { return e.err }

// leased reports whether err is the service refusing a request because
// someone holds a lease on the blob.
func leased(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && strings.HasPrefix(re.ErrorCode, "Lease")
}

func redacted(err error) error { return redactError{err} }

// redactURL drops u's query string, which may hold a SAS token.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		if i := strings.IndexByte(u, '?'); i >= 0 {
			return u[:i] + "?REDACTED"
		}
		return u
	}
	p.User = nil
	if p.RawQuery != "" {
		p.RawQuery = "REDACTED"
	}
	return p.String()
}
