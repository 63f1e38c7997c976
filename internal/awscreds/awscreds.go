// Package awscreds tells the AWS SDK's errors whose HTTP answer came from a
// credential provider apart from those the store's service gave: the SDK
// fetches credentials within each operation, so that the instance metadata
// service's 403 on a host without a role reaches the caller as the
// operation's error, just as the store's own 403 would.
package awscreds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Answer reports whether err's HTTP answer came from a service other than
// service (the store's ServiceID, such as "S3"): a credential provider, such
// as the EC2 instance metadata service, STS or SSO. If so, refusal says why
// there are no credentials when that answer was a 4xx other than 408 and
// 429, which waiting will not change, or when the instance metadata service
// refused the connection (there is none off EC2); it is empty for an answer
// that may pass.
func Answer(err error, service string) (refusal string, fromProvider bool) {
	answeredBy := service
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch e := e.(type) {
		case *smithy.OperationError:
			// The innermost operation around the answer is the one
			// that received it.
			answeredBy = e.ServiceID
		case *smithyhttp.ResponseError:
			if answeredBy == service {
				return "", false
			}
			status := e.HTTPStatusCode()
			if status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests {
				return fmt.Sprintf("no AWS credentials: %s answered %d", answeredBy, status), true
			}
			return "", true
		case *smithyhttp.RequestSendError:
			// No answer at all. From the store, an unknown outcome;
			// from a credential provider that refused the connection
			// outright (no instance metadata service off EC2: the
			// connection is refused, or there is no route to it), no
			// credentials, and waiting will not change that. A
			// timeout may be this call's own deadline, and stays
			// unknown. So does a refusal by a container credential
			// endpoint (the ECS agent, the EKS Pod Identity agent):
			// the SDK asks one only where the environment names it,
			// so it exists, and it refuses connections while it
			// restarts.
			var ne *net.OpError
			if answeredBy == service || answeredBy == containerEndpoint || !errors.As(e, &ne) || ne.Op != "dial" || ne.Timeout() {
				return "", answeredBy != service
			}
			return fmt.Sprintf("no AWS credentials: %s cannot be reached (%v)", answeredBy, ne.Err), true
		}
	}
	return "", false
}

// containerEndpoint is the ServiceID of the SDK's client for container
// credential endpoints (package credentials/endpointcreds).
const containerEndpoint = "endpoint-credentials"

// NeverRenewed says why the credentials creds provides will never be
// replaced, if they will not, and "" if they may be. A store's answer that the
// session token has expired (S3's ExpiredToken, DynamoDB's
// ExpiredTokenException) then holds for as long as the client runs: every
// request is signed with that token. That is so of
//
//   - credentials.StaticCredentialsProvider (the SDK's static credentials,
//     and what config.LoadDefaultConfig makes of AWS_SESSION_TOKEN and of a
//     shared credentials file), bare or inside an aws.CredentialsCache;
//   - an aws.CredentialsCache holding credentials that cannot expire
//     (CanExpire false): the cache never asks its provider again.
//
// A provider that is not cached is asked for credentials for every request,
// and may give new ones whatever they say of themselves: it is given the
// benefit of the doubt, as are cached credentials that can expire (the cache
// renews them once they have).
func NeverRenewed(creds aws.CredentialsProvider) string {
	if creds == nil {
		return ""
	}
	if aws.IsCredentialsProvider(creds, credentials.StaticCredentialsProvider{}) {
		return "static credentials (credentials.StaticCredentialsProvider) are never refreshed"
	}
	cache, ok := creds.(*aws.CredentialsCache)
	if !ok {
		return ""
	}
	// Only the cached credentials matter, never a refresh: with a context
	// that has already ended the cache returns them if it holds any that
	// have not expired, and otherwise an error at once (credentials that
	// need renewing can expire, and are renewed).
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := cache.Retrieve(ended)
	if err != nil || c.CanExpire {
		return ""
	}
	return fmt.Sprintf("the credentials cached for the client (source %q) cannot expire, so that they are never refreshed", c.Source)
}
