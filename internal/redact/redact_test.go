package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"file:///var/lib/job/leader", "file:///var/lib/job/leader"},
		{"s3://bucket/key?region=eu-west-1&path_style=true", "s3://bucket/key?region=eu-west-1&path_style=true"},
		{"postgres://app:s3cret@db:5432/app?table=t&election=e", "postgres://app:xxxxx@db:5432/app?table=t&election=e"},
		{"postgres://app@db/app?table=t&password=s3cret&election=e&sslpassword=k3y", "postgres://app@db/app?table=t&password=xxxxx&election=e&sslpassword=xxxxx"},
		{"postgres://app@db/app?PassWord=s3cret", "postgres://app@db/app?PassWord=xxxxx"},
		{"postgres://app@db/app?pass%77ord=s3cret", "postgres://app@db/app?pass%77ord=xxxxx"},
		{"azblob://c/b?sig=s3cret", "azblob://c/b?sig=xxxxx"},
		{"postgres://app:s3 cret@db/app", "postgres://(not shown: it does not parse)"},
		{"postgres://app:s3cret@db:54a/app", "postgres://(not shown: it does not parse)"},
		{"postgres:app:s3cret@db/app", "postgres:(not shown: user information without //)"},
		{"app:s3cret@db:54a/app%zz", "app:(not shown: user information without //)"},
		{":s3cret@db", "(not shown: it does not parse)"},
		{"file:record", "file:record"},
		{"postgres://app:12#s3cret@db/app", "postgres://(not shown: user information cut by a '#')"},
		{"s3://b/k?endpoint=http://u:s3cret@minio:9000&path_style=true", "s3://b/k?endpoint=http%3A%2F%2Fu%3Axxxxx%40minio%3A9000&path_style=true"},
		{"s3://b/k?endpoint=http%3A%2F%2Fu%3As3cret%40minio", "s3://b/k?endpoint=http%3A%2F%2Fu%3Axxxxx%40minio"},
		{"s3://b/k?endpoint=http://u@minio:9000", "s3://b/k?endpoint=http%3A%2F%2Fu%40minio%3A9000"},
		{"postgres://app:1234?s3cret@db.internal/app?table=t", "postgres://(not shown: user information cut by a '/' or '?')"},
		{"postgres://app:1234/s3cret@db.internal/app?table=t", "postgres://(not shown: user information cut by a '/' or '?')"},
		{"s3://b/k@v?region=r", "s3://b/k@v?region=r"},
		// With nothing to hide, as given.
		{"mem://", "mem://"},
		{"not a url", "not a url"},
		{"postgres://app@db/app?table=t", "postgres://app@db/app?table=t"},
	} {
		got := URL(c.in)
		if got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "k3y") || strings.Contains(got, "12") {
			t.Errorf("URL(%q) = %q shows a secret", c.in, got)
		}
	}
}
