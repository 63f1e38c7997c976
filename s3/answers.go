package s3

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/racedecider/leaderelection/internal/awscreds"
	"github.com/racedecider/leaderelection/internal/tlsfail"
)

// class is what one S3 answer means for the election: the four classes of
// the RaceDecider contract, plus a missing object for reads.
type class int

const (
	// unknown: the request may or may not have been applied (timeout,
	// reset, 5xx other than 501, or anything not recognised).
	unknown class = iota
	// missing: a read found no object at the key, in a bucket that exists.
	missing
	// raceLost: the write's condition did not hold; not applied.
	raceLost
	// throttled: the store asked to slow down; not applied.
	throttled
	// refused: the store refused for good; not applied.
	refused
)

// request is the kind of S3 request an answer was given to.
type request int

const (
	getObject request = iota
	putIfNoneMatch
	putIfMatch
)

// classify maps one S3 answer to a request to its class, with a short reason
// for the error message. It is the only place that interprets S3's status
// codes and error codes.
//
// A GetObject 404 is a missing object only with the error code NoSuchKey,
// which S3 and every S3-compatible store put in the body of a GET's error.
// A 404 without it is not S3 speaking about this bucket: a wrong endpoint,
// a proxy, or a virtual-hosted request (bucket in the host name) that
// reached a server that does not do virtual hosting. Reading that as "no
// election yet" would make every candidate write, and every write fail, in a
// loop; it is a refusal instead. ReadCurrent uses GET rather than HEAD for
// this reason too: a HEAD answer has no body, so a missing key and a missing
// bucket would both be a bare 404.
//
// creds is the client's credentials provider: it decides whether an
// ExpiredToken can pass (see awscreds.NeverRenewed).
func classify(err error, req request, creds aws.CredentialsProvider) (class, string) {
	if refusal, fromProvider := awscreds.Answer(err, "S3"); fromProvider {
		// Not the store's answer, but the credential provider's.
		if refusal != "" {
			return refused, refusal
		}
		return unknown, ""
	}
	if why := tlsfail.Why(err); why != "" {
		return refused, why
	}
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() == 0 {
		return unknown, "" // no answer: timeout, reset, refused connection, ...
	}
	status := re.HTTPStatusCode()
	code, msg := "", ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code, msg = ae.ErrorCode(), ae.ErrorMessage()
	}
	// Without an S3 error document (an empty body, HTML, text), the SDK
	// makes the code and message up from the status text ("NotFound", "Not
	// Found"), or has no API error at all.
	text := http.StatusText(status)
	noBody := code == "" || code == strings.ReplaceAll(text, " ", "") && msg == text

	switch {
	case code == "ExpiredToken" || code == "TokenRefreshRequired":
		// The credentials timed out. The SDK renews refreshing
		// credentials only once they have expired on this host's clock:
		// a request signed as they run out gets ExpiredToken, and the
		// next, with a new token, passes. Credentials that are never
		// renewed keep their token, which stays expired.
		if why := awscreds.NeverRenewed(creds); why != "" {
			return refused, "the session token has expired (" + code + "), and " + why + ": give the client new credentials"
		}
		return unknown, ""
	case status == http.StatusRequestTimeout, code == "RequestTimeout":
		// The request timed out: not a verdict on the request itself,
		// so let the engine read back and try again.
		return unknown, ""
	case status == http.StatusPreconditionFailed:
		if req == getObject {
			return unknown, ""
		}
		return raceLost, "the record changed (412 Precondition Failed)"
	case status == http.StatusConflict && code == "ConditionalRequestConflict":
		// A concurrent conditional write to the key won or is in progress.
		return raceLost, "a concurrent write to the record is in progress (409 ConditionalRequestConflict)"
	case status == http.StatusConflict && code == "OperationAborted":
		// "A conflicting conditional operation is currently in progress
		// against this resource. Try again."
		return throttled, "a conflicting operation is in progress (409 OperationAborted)"
	case status == http.StatusTooManyRequests,
		status == http.StatusServiceUnavailable && strings.HasPrefix(code, "SlowDown"):
		// AWS sends 503 SlowDown; MinIO SlowDownRead and SlowDownWrite;
		// others 429.
		return throttled, "the store asks to slow down"
	case status == http.StatusNotFound && code == "NoSuchBucket":
		return refused, "the bucket does not exist (404 NoSuchBucket)"
	case status == http.StatusNotFound && code == "NoSuchKey":
		switch req {
		case getObject:
			return missing, ""
		case putIfMatch:
			// AWS answers If-Match on a missing key with 404 NoSuchKey
			// (others with 412): the record conditioned on is gone.
			return raceLost, "the record conditioned on is gone (404 NoSuchKey)"
		}
		return refused, "404 NoSuchKey to a create"
	case status == http.StatusNotFound && noBody:
		return refused, "404 without an S3 error code: the endpoint does not serve this bucket, or is not S3"
	case status == http.StatusNotFound:
		return refused, "404 " + code
	case status == http.StatusForbidden:
		if req == getObject && code == "AccessDenied" {
			return refused, "403 AccessDenied (on AWS, a read of a missing object without s3:ListBucket on the bucket is also denied)"
		}
		return refused, "403 " + code
	case status == http.StatusNotImplemented:
		return refused, "501 " + code + ": the store does not implement this request (conditional writes?)"
	case status >= 300 && status < 500:
		// 301 PermanentRedirect (wrong region), 400 InvalidArgument, 405
		// MethodNotAllowed, ...: the same request will be refused again.
		return refused, statusAndCode(status, code, noBody)
	}
	return unknown, ""
}

func statusAndCode(status int, code string, noBody bool) string {
	if noBody {
		return fmt.Sprintf("%d without an S3 error code", status)
	}
	return fmt.Sprintf("%d %s", status, code)
}

// isDNSError reports whether err is a failure to resolve the host name.
func isDNSError(err error) bool {
	var dns *net.DNSError
	return errors.As(err, &dns)
}
