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
		// A secret inside a value that is itself a URL without user
		// information: a SAS token's sig, an S3 presigned signature.
		{"azblob://c/b?storage_account=a&endpoint=https%3A%2F%2Facct.blob.core.windows.net%2F%3Fsv%3D2020-08-04%26sig%3Ds3cret",
			"azblob://c/b?storage_account=a&endpoint=https%3A%2F%2Facct.blob.core.windows.net%2F%3Fsv%3D2020-08-04%26sig%3Dxxxxx"},
		{"s3://b/k?endpoint=https%3A%2F%2Fh%2Fp%3FX-Amz-Signature%3Ds3cret%26X-Amz-Security-Token%3Dk3y",
			"s3://b/k?endpoint=https%3A%2F%2Fh%2Fp%3FX-Amz-Signature%3Dxxxxx%26X-Amz-Security-Token%3Dxxxxx"},
		{"s3://b/k?endpoint=https://h/?X-Amz-Signature=s3cret", "s3://b/k?endpoint=https%3A%2F%2Fh%2F%3FX-Amz-Signature%3Dxxxxx"},
		{"s3://b/k?endpoint=https%3A%2F%2Fh%2F%3Fsig%3Da%2523s3cret", "s3://b/k?endpoint=https%3A%2F%2Fh%2F%3Fsig%3Dxxxxx"},
		// An unescaped '#' cuts a secret value in two: the fragment
		// holds its rest.
		{"postgres://app@db/app?table=t&password=ab#s3cret", "postgres://app@db/app?table=t&password=xxxxx#xxxxx"},
		{"postgres://app:pw@db/app#s3cret", "postgres://app:xxxxx@db/app#xxxxx"},
		{"gs://b/o?min_write_interval=0#1", "gs://b/o?min_write_interval=0#1"},
		// With nothing to hide, as given.
		{"s3://b/k?endpoint=http://minio:9000/?x=1&region=r", "s3://b/k?endpoint=http://minio:9000/?x=1&region=r"},
		{"s3://b/k?endpoint=http%3A%2F%2Fminio%3A9000&region=r", "s3://b/k?endpoint=http%3A%2F%2Fminio%3A9000&region=r"},
		{"s3://b/k?region=C:x", "s3://b/k?region=C:x"},
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

// Accepting also hides the value of every parameter the scheme does not
// accept: one meant for something else may be a key or a token.
func TestAccepting(t *testing.T) {
	azblob := func(name string) bool { return name == "storage_account" || name == "endpoint" }
	for _, c := range []struct {
		in       string
		accepted func(string) bool
		want     string
	}{
		{"azblob://c/b?storage_account=a&account_key=s3cret", azblob, "azblob://c/b?storage_account=a&account_key=xxxxx"},
		{"azblob://c/b?sas=sv%3D1%26sig%3Ds3cret&endpoint=http://h", azblob, "azblob://c/b?sas=xxxxx&endpoint=http://h"},
		{"azblob://c/b?storage%5Faccount=a&pwd=s3cret", azblob, "azblob://c/b?storage%5Faccount=a&pwd=xxxxx"},
		{"azblob://c/b?storage_account=a&endpoint=https%3A%2F%2Fh%2F%3Fsig%3Ds3cret", azblob, "azblob://c/b?storage_account=a&endpoint=https%3A%2F%2Fh%2F%3Fsig%3Dxxxxx"},
		// A '#' cutting an unknown parameter's value: the fragment too.
		{"azblob://c/b?account_key=ab#s3cret", azblob, "azblob://c/b?account_key=xxxxx#xxxxx"},
		{"azblob://c/b?storage_account=a#1", azblob, "azblob://c/b?storage_account=a#1"},
		{"etcd://x/y?a=s3cret&b", nil, "etcd://x/y?a=xxxxx&b"},
		{"azblob://c/b?storage_account=a", azblob, "azblob://c/b?storage_account=a"},
		{"postgres://u:s3cret@h/db?table=t", func(n string) bool { return n == "table" }, "postgres://u:xxxxx@h/db?table=t"},
	} {
		got := Accepting(c.in, c.accepted)
		if got != c.want {
			t.Errorf("Accepting(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3cret") {
			t.Errorf("Accepting(%q) = %q shows a secret", c.in, got)
		}
	}
}
