package urlcheck

import (
	"net/url"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		url  string
		want string // "" for no error
	}{
		{"s3://b/k?region=r&endpoint=http://x", ""},
		{"s3://b/k?", ""},
		{"s3://b/a%23b", ""},
		{"s3://b/k#", ""},
		{"s3://b/k?endpoint=", "query parameter endpoint is empty (endpoint=)"},
		{"s3://b/k?path_style", "query parameter path_style is empty"},
		{"s3://b/k?region=&endpoint=", "query parameters endpoint, region are empty"},
		{"s3://b/k?region=a&region=b", "query parameter region is given 2 times"},
		{"s3://b/k?region=a&region=", "query parameter region is given 2 times"},
		{"s3://b/k?a=1&b=2&a=3&b=4", "query parameters a, b are each given more than once"},
		{"s3://b/k#1", `fragment "#1"`},
		{"gs://b/jobs#1?region=r", `fragment "#1?region=r"`},
		{"file://user@localhost/x", `user information "user@": file URLs take no user name or password`},
		{"S3://u:s3cret@b/k", `user information "u:xxxxx@": s3 URLs`},
		{"s3://@b/k", `user information "@"`},
		{"s3://b/k?a=%zz", "query: "},
		// The fragment may be the rest of a secret value.
		{"s3://b/k?region=r&password=ab#s3cret", "a fragment (#...) after the query"},
		{"file:///tmp/rec%00x", "a NUL byte (%00) in the host or path"},
		{"mem://x/a%00b", "a NUL byte (%00)"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		err = Check(u)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Check(%q) = %v, want nil", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Check(%q) = %v, want an error saying %q", c.url, err, c.want)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("Check(%q) = %v shows the password", c.url, err)
		}
	}
}

func TestCheckWithUser(t *testing.T) {
	for _, c := range []struct {
		url  string
		want string
	}{
		{"postgres://u:pw@h:5432/db?table=t&election=e", ""},
		{"postgres://u@h/db?table=t&election=e&sslmode=", "query parameter sslmode is empty"},
		{"postgres://u@h/db?password=s3cret&password=s3cret", "query parameter password is given 2 times"},
		// An unescaped '#' in a password starts a fragment: not shown.
		{"postgres://u:12#s3cret@h/db", "a fragment (#...)"},
		{"postgres://u:s3cret@h/db%00x?table=t", "a NUL byte (%00)"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckWithUser(u)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckWithUser(%q) = %v, want nil", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckWithUser(%q) = %v, want an error saying %q", c.url, err, c.want)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("CheckWithUser(%q) = %v shows the password", c.url, err)
		}
	}
}

// Fragment refuses a '#' anywhere in the raw URL, an empty fragment (which
// net/url drops without a trace) included, and shows the fragment only
// where it cannot be the rest of a secret.
func TestFragment(t *testing.T) {
	azblob := func(name string) bool { return name == "storage_account" || name == "endpoint" }
	for _, c := range []struct {
		url      string
		accepted func(string) bool
		want     string // "" for no error
	}{
		{"file:///tmp/rec", nil, ""},
		{"file:///tmp/a%23b", nil, ""},
		{"file:///tmp/rec#", nil, "a '#' with nothing after it"},
		{"postgres://u:s3cret@h/db?table=t#", nil, "a '#' with nothing after it"},
		{"s3://b/k#1", nil, `fragment "#1": a store URL has none (write a '#' in a name as %23)`},
		{"azblob://c/b?storage_account=a#1", azblob, `fragment "#1"`},
		{"azblob://c/b?account_key=ab#s3cret", azblob, "a fragment (#...) after the query"},
		{"azblob://c/b?sig=ab#s3cret", nil, "a fragment (#...) after the query"},
		{"postgres://u:pw@h/db#s3cret", nil, "a fragment (#...): a store URL has none (write a '#' in a password"},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		err = Fragment(c.url, u, c.accepted)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Fragment(%q) = %v, want nil", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Fragment(%q) = %v, want an error saying %q", c.url, err, c.want)
		case err != nil && (strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "%23")):
			t.Errorf("Fragment(%q) = %v shows a secret, or does not say to write %%23", c.url, err)
		}
	}
}

func TestEndpoint(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:9000", "https://minio.internal", "http://127.0.0.1:10000/devstoreaccount1"} {
		if _, err := Endpoint("endpoint", ok); err != nil {
			t.Errorf("Endpoint(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"localhost", "minio:9000", "ftp://x", "http://", "http://u:s3cret@x", "http://x#a", "%zz://x"} {
		_, err := Endpoint("endpoint", bad)
		if err == nil || !strings.Contains(err.Error(), "endpoint=") || !strings.Contains(err.Error(), "want an http:// or https:// URL") {
			t.Errorf("Endpoint(%q) = %v, want an error naming endpoint", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Endpoint(%q) = %v shows the password", bad, err)
		}
	}
}
