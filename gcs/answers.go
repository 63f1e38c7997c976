package gcs

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/storage"
	"golang.org/x/oauth2"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/racedecider/leaderelection/internal/tlsfail"
)

// class is what one Cloud Storage answer means for the election: the four
// classes of the RaceDecider contract, plus a 404 on a read.
type class int

const (
	// unknown: the request may or may not have been applied (timeout,
	// reset, 5xx, or anything not recognised).
	unknown class = iota
	// notFound: a read found no object. The storage client gives the same
	// error whether the object or the whole bucket is missing (an XML
	// download's 404 has its body thrown away), so ReadCurrent asks again
	// about the bucket before calling it a missing record.
	notFound
	// raceLost: the write's precondition did not hold; not applied.
	raceLost
	// throttled: the store asked to slow down; not applied.
	throttled
	// refused: the store refused for good; not applied.
	refused
)

// request is the kind of request an answer was given to.
type request int

const (
	download request = iota
	upload
	listBucket // the bucket check after a download's 404
)

// classify maps one answer of Cloud Storage (an HTTP status or a gRPC code)
// to a request to its class, with a short reason for the error message. It
// is the only place that interprets Cloud Storage's errors.
//
// 429 (the rate limit, about one write per second per object) is throttled.
// A 503 is throttled on a read, but an unknown outcome on an upload: Cloud
// Storage lists it with the transient errors to retry, and nothing says an
// upload answered 503 was not applied, which ErrThrottled must prove.
func classify(err error, req request) (class, string) {
	if req == download && errors.Is(err, storage.ErrObjectNotExist) {
		return notFound, ""
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		return refused, "the bucket does not exist, or the endpoint is not Cloud Storage"
	}
	if why := tlsfail.Why(err); why != "" {
		return refused, why
	}
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		return classifyHTTP(gerr.Code, req)
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return classifyGRPC(st.Code(), req)
	}
	if code := tokenEndpointStatus(err); code >= 400 && code < 500 &&
		code != http.StatusRequestTimeout && code != http.StatusTooManyRequests {
		// No request reached Cloud Storage: Google's token endpoint
		// refused the credentials (400 invalid_grant: a deleted key, a
		// disabled account), and will until they change.
		return refused, fmt.Sprintf("no usable Google credentials: the token endpoint answered %d %s", code, http.StatusText(code))
	}
	return unknown, ""
}

// tokenEndpointStatus is the HTTP status with which an OAuth token endpoint
// answered, if err is the failure to get a token; 0 if not.
func tokenEndpointStatus(err error) int {
	var aerr *auth.Error
	var oerr *oauth2.RetrieveError
	switch {
	case errors.As(err, &aerr) && aerr.Response != nil:
		return aerr.Response.StatusCode
	case errors.As(err, &oerr) && oerr.Response != nil:
		return oerr.Response.StatusCode
	}
	return 0
}

func classifyHTTP(code int, req request) (class, string) {
	what := fmt.Sprintf("%d %s", code, http.StatusText(code))
	switch {
	case code == http.StatusPreconditionFailed && req == upload:
		return raceLost, "the record changed (" + what + ")"
	case code == http.StatusConflict && req == upload:
		// "failed to commit the change due to a conflicting concurrent
		// change to the same resource"
		return raceLost, "a concurrent change to the record (" + what + ")"
	case code == http.StatusTooManyRequests:
		return throttled, what
	case code == http.StatusServiceUnavailable && req != upload:
		return throttled, what
	case code == http.StatusNotFound:
		// An upload's or a listing's 404 is about the bucket: there is no
		// object to miss yet.
		return refused, "the bucket does not exist, or the endpoint is not Cloud Storage (" + what + ")"
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return refused, what + ": the credentials may not " + map[request]string{
			download: "read the object (storage.objects.get)",
			upload:   "write the object (storage.objects.create, and storage.objects.delete to replace it)",
			listBucket: "list the bucket (storage.objects.list), which tells a missing object from a " +
				"missing bucket; grant it, or the election cannot start",
		}[req]
	case code == http.StatusRequestTimeout:
		return unknown, ""
	case code == http.StatusNotImplemented:
		return refused, what
	case code >= 300 && code < 500:
		return refused, what
	}
	return unknown, ""
}

func classifyGRPC(c codes.Code, req request) (class, string) {
	what := "gRPC " + c.String()
	switch c {
	case codes.FailedPrecondition:
		if req == upload {
			return raceLost, "the record changed (" + what + ")"
		}
	case codes.Aborted:
		if req == upload {
			return raceLost, "a concurrent change to the record (" + what + ")"
		}
	case codes.ResourceExhausted:
		return throttled, what
	case codes.Unavailable:
		if req != upload {
			return throttled, what
		}
	case codes.NotFound:
		return refused, "the bucket does not exist (" + what + ")"
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument,
		codes.OutOfRange, codes.Unimplemented:
		return refused, what
	}
	return unknown, ""
}

// certainlyNotApplied reports whether a failed upload attempt certainly did
// not change the object: the store gave a definite answer, or the
// connection was never made. Anything else (a reset or closed connection, a
// timeout, a 5xx) may have been applied.
func certainlyNotApplied(err error) bool {
	if c, _ := classify(err, upload); c != unknown {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
