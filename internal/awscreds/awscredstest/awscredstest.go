// Package awscredstest gives the AWS backends' tests credentials of each kind
// that awscreds.NeverRenewed tells apart.
package awscredstest

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Kind is credentials of one kind, and what a backend's refusal of an
// expired session token signed with them says ("" where the token may be
// renewed, so that an expired one is an unknown outcome, retried).
type Kind struct {
	Name    string
	Creds   aws.CredentialsProvider
	Refused string
}

// Kinds returns static credentials, which are never renewed, and cached ones
// that expire in an hour, which are.
func Kinds() []Kind {
	refreshing := aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret", SessionToken: "token",
			Source: "test", CanExpire: true, Expires: time.Now().Add(time.Hour)}, nil
	}))
	return []Kind{
		{"static", credentials.NewStaticCredentialsProvider("AKID", "secret", "token"), "static credentials"},
		{"refreshing", refreshing, ""},
	}
}
