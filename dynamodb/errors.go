package dynamodb

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/awscreds"
	"github.com/racedecider/leaderelection/internal/tlsfail"
)

// classify maps an error from a DynamoDB call to the class the engine acts
// on: entry.ErrRaceLost, entry.ErrThrottled, entry.ErrRefused (or an error
// wrapping it that says why), or nil for an unknown outcome. It is the one
// place where DynamoDB's answers are interpreted. Every class but nil means
// the request was not applied.
//
// creds is the client's credentials provider: it decides whether an
// ExpiredTokenException can pass (see awscreds.NeverRenewed).
func classify(err error, creds aws.CredentialsProvider) error {
	if refusal, fromProvider := awscreds.Answer(err, "DynamoDB"); fromProvider {
		// Not DynamoDB's answer, but the credential provider's: no
		// request was sent. The class carries why.
		if refusal != "" {
			return fmt.Errorf("%w: %s", entry.ErrRefused, refusal)
		}
		return nil
	}
	if why := tlsfail.Why(err); why != "" {
		return fmt.Errorf("%w: %s", entry.ErrRefused, why)
	}
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	switch code {
	case "ConditionalCheckFailedException":
		return entry.ErrRaceLost
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
		// The table's or the account's throughput was exceeded: DynamoDB
		// rejected the request before acting on it.
		return entry.ErrThrottled
	case "ResourceNotFoundException", // the table does not exist (or is not active)
		"AccessDeniedException",               // IAM denies the action on the table
		"UnrecognizedClientException",         // unknown access key or security token
		"InvalidSignatureException",           // wrong secret key
		"MissingAuthenticationTokenException", // unsigned request
		"MissingAuthenticationToken",          // the same, as DynamoDB Local spells it
		"ValidationException",                 // the key does not fit the table's key schema, and the like
		"SerializationException":              // a request DynamoDB cannot parse
		return entry.ErrRefused
	case "TransactionConflictException", // the item is in a transaction: try again
		"ReplicatedWriteConflictException": // a concurrent write in another region: try again
		// 400s that a later attempt may pass: not a refusal.
		return nil
	case "ExpiredTokenException": // signed as the token ran out
		// Credentials that refresh are renewed only once this host's
		// clock says they have expired (the SDK's cache has no window,
		// but for container endpoint credentials), so a request signed
		// as they run out can get ExpiredTokenException, and the next
		// one, with a new token, pass; as S3's ExpiredToken. Credentials
		// that are never refreshed keep their token, which stays expired.
		if why := awscreds.NeverRenewed(creds); why != "" {
			return fmt.Errorf("%w: the session token has expired, and %s: give the client new credentials", entry.ErrRefused, why)
		}
		return nil
	}
	// No code listed above. A 4xx, bar 408 and 429, is a refusal: DynamoDB
	// did not act on the request and will answer the same again, and an
	// answer that does not come from DynamoDB at all (an HTML page from a
	// proxy, S3's XML, an empty body: an endpoint that is not DynamoDB) is
	// worse than useless to retry. InternalServerError, ServiceUnavailable,
	// other 5xx, no answer at all (a timeout, a reset, a cancelled call) and
	// anything unforeseen: the request may have been applied.
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) {
		return nil
	}
	if re.Response != nil {
		if why := notDynamoDB(re.Response.Response); why != "" {
			return fmt.Errorf("%w: %s", entry.ErrRefused, why)
		}
	}
	status := re.HTTPStatusCode()
	if status < 400 || status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests {
		return nil
	}
	var what string
	switch {
	case code == "" || code == "UnknownError":
		// The SDK found no DynamoDB error in the body (it names an empty
		// one UnknownError, and fails to decode anything but JSON).
		what = fmt.Sprintf("%d without a DynamoDB error code: is it a DynamoDB endpoint?", status)
	default:
		what = fmt.Sprintf("%d %s", status, code)
	}
	var resp *http.Response
	if re.Response != nil {
		resp = re.Response.Response
	}
	return fmt.Errorf("%w: %s answered %s", entry.ErrRefused, endpointOf(resp), what)
}

// notDynamoDB says why resp is not DynamoDB's answer, for a refusal, if it
// is a 2xx answer that carries neither the request id DynamoDB (and
// DynamoDB Local) puts on every answer nor the content type of DynamoDB's
// protocol (application/x-amz-json-1.0, which DynamoDB-compatible stores
// send too), and "" otherwise. Such an answer comes from a server that is not
// DynamoDB (an endpoint that points at some other web server): not an
// unknown outcome to retry for ever, and never a success, since an empty
// body or "{}" decodes as a GetItem that found no item and a PutItem that
// was applied, so that every candidate would win.
func notDynamoDB(resp *http.Response) string {
	if resp == nil || resp.StatusCode < 200 || resp.StatusCode >= 300 || resp.Header.Get("X-Amzn-Requestid") != "" {
		return ""
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err == nil && strings.HasPrefix(mt, "application/x-amz-json-") {
		return ""
	}
	return fmt.Sprintf("%s answered %d with neither a DynamoDB request id (x-amzn-RequestId) nor DynamoDB's content type (application/x-amz-json-1.0): is it a DynamoDB endpoint?",
		endpointOf(resp), resp.StatusCode)
}

// answerOf is the HTTP answer to a call that succeeded, from its metadata
// (nil if the SDK kept none).
func answerOf(md middleware.Metadata) *http.Response {
	if r, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok && r != nil {
		return r.Response
	}
	return nil
}

// endpointOf names the endpoint that gave the answer resp: the scheme and
// host of the request (never its user information or path).
func endpointOf(resp *http.Response) string {
	if resp != nil && resp.Request != nil && resp.Request.URL != nil {
		u := resp.Request.URL
		return "endpoint " + u.Scheme + "://" + u.Host
	}
	return "the endpoint"
}

// isMissingTable reports whether err says the table does not exist.
func isMissingTable(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ResourceNotFoundException" {
		return true
	}
	return false
}

// withoutCanonicalRequest returns err with the canonical request that a
// signature error quotes left out of its text, still wrapping err: AWS quotes
// the request it expected, headers and all, and they include the session
// token (x-amz-security-token).
func withoutCanonicalRequest(err error) error {
	text := err.Error()
	i := strings.Index(text, "The Canonical String")
	if i < 0 {
		return err
	}
	return retold{err, strings.TrimSpace(text[:i]) + " (the canonical request it quoted is left out: it holds the session token)"}
}

// retold is err told in other words.
type retold struct {
	err  error
	text string
}

func (r retold) Error() string { return r.text }
func (r retold) Unwrap() error { return r.err }

// responseDate is the Date of the HTTP answer behind err, if any: DynamoDB's
// clock when it answered.
func responseDate(err error) time.Time {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil && re.Response.Response != nil {
		if t, perr := http.ParseTime(re.Response.Header.Get("Date")); perr == nil {
			return t
		}
	}
	return time.Time{}
}
