// Package awscreds tells the AWS SDK's errors whose HTTP answer came from a
// credential provider apart from those the store's service gave: the SDK
// fetches credentials within each operation, so that the instance metadata
// service's 403 on a host without a role reaches the caller as the
// operation's error, just as the store's own 403 would.
package awscreds

import (
	"errors"
	"fmt"
	"net"
	"net/http"

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
