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
	// outcomeThrottled: the account is over a rate limit; not applied.
	outcomeThrottled
	// outcomeRefused: refused for good (permission, missing container,
	// lease, immutability); not applied.
	outcomeRefused
)

// classify maps every answer Blob Storage gives to a request of kind o. It is
// the one place that knows the service's status codes and error codes
// (https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes).
func classify(err error, o op) outcome {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		// Microsoft Entra ID refused the credential: no request was sent
		// to Blob Storage, and none will be until the credential changes.
		var authErr *azidentity.AuthenticationFailedError
		if errors.As(err, &authErr) && authErr.RawResponse != nil &&
			authErr.RawResponse.StatusCode >= 400 && authErr.RawResponse.StatusCode < 500 &&
			authErr.RawResponse.StatusCode != http.StatusTooManyRequests {
			return outcomeRefused
		}
		// A transport error (reset, timeout, cut connection) or a
		// cancelled context: an attempt may have reached the service.
		return outcomeUnknown
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
	case strings.HasPrefix(string(code), "Lease"):
		// 412 LeaseIdMissing, 409 LeaseAlreadyPresent, ...: someone holds a
		// blob lease on the record, which this library never takes.
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

// transient reports whether a failed write attempt is worth retrying at once:
// a transport error, or a status the service sends for passing trouble.
func transient(err error) bool {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
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
