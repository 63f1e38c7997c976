package awscreds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
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

// TestNeverRenewed: static credentials, bare or cached, and cached ones that
// cannot expire are never renewed, so that an expired session token stays
// so; a cache renews credentials that can expire, and a provider that is not
// cached is asked for every request, and may give new ones whatever they say
// of themselves.
func TestNeverRenewed(t *testing.T) {
	fixed := func(canExpire bool) aws.CredentialsProviderFunc {
		return func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret", SessionToken: "token",
				Source: "test", CanExpire: canExpire, Expires: time.Now().Add(time.Hour)}, nil
		}
	}
	static := credentials.NewStaticCredentialsProvider("AKID", "secret", "token")
	for _, tc := range []struct {
		name  string
		creds aws.CredentialsProvider
		want  string // what NeverRenewed says, "" if they may be renewed
	}{
		{"none", nil, ""},
		{"static", static, "static credentials"},
		{"static, cached", aws.NewCredentialsCache(static), "static credentials"},
		{"cached, cannot expire", aws.NewCredentialsCache(fixed(false)), `(source "test") cannot expire`},
		{"cached, can expire", aws.NewCredentialsCache(fixed(true)), ""},
		{"not cached, cannot expire", fixed(false), ""},
		{"not cached, can expire", fixed(true), ""},
	} {
		if c, ok := tc.creds.(*aws.CredentialsCache); ok {
			// As the request that got the expired token's answer did.
			if _, err := c.Retrieve(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		got := NeverRenewed(tc.creds)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: NeverRenewed says %q; want %q", tc.name, got, tc.want)
		}
	}
}
