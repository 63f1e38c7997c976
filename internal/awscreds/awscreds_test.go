package awscreds

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"

	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The errors are built as the SDK wraps them (the S3 and DynamoDB tests get
// the real ones from the SDK's metadata-service client).
func TestAnswer(t *testing.T) {
	answer := func(status int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: errors.New("x")}
	}
	op := func(svc string, err error) error {
		return &smithy.OperationError{ServiceID: svc, OperationName: "Op", Err: err}
	}
	viaCreds := func(status int) error {
		return op("S3", fmt.Errorf("get identity: get credentials: %w", op("ec2imds", answer(status))))
	}
	viaCredsUnanswered := func(err error) error {
		return op("S3", fmt.Errorf("get identity: get credentials: %w", op("ec2imds", &smithyhttp.RequestSendError{Err: err})))
	}
	for _, c := range []struct {
		name         string
		err          error
		refusal      string
		fromProvider bool
	}{
		{"the store's own 403", op("S3", answer(403)), "", false},
		{"no answer", op("S3", errors.New("reset")), "", false},
		{"metadata service 403", viaCreds(403), "no AWS credentials: ec2imds answered 403", true},
		{"metadata service 404", viaCreds(404), "no AWS credentials: ec2imds answered 404", true},
		{"metadata service 429", viaCreds(429), "", true},
		{"metadata service 500", viaCreds(500), "", true},
		{"metadata service refusing the connection", viaCredsUnanswered(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}),
			"no AWS credentials: ec2imds cannot be reached (connection refused)", true},
		{"metadata service timing out", viaCredsUnanswered(&net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}), "", true},
		{"metadata service cut off mid-read", viaCredsUnanswered(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), "", true},
		{"container credential endpoint refusing the connection", op("S3", fmt.Errorf("get credentials: %w", op("endpoint-credentials",
			&smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}))), "", true},
		{"container credential endpoint answering 403", op("S3", fmt.Errorf("get credentials: %w", op("endpoint-credentials", answer(403)))),
			"no AWS credentials: endpoint-credentials answered 403", true},
		{"the store refusing the connection", op("S3", &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}), "", false},
	} {
		refusal, from := Answer(c.err, "S3")
		if refusal != c.refusal || from != c.fromProvider {
			t.Errorf("%s: Answer = %q, %v; want %q, %v", c.name, refusal, from, c.refusal, c.fromProvider)
		}
	}
}

// timeoutErr is a network error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
