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
