package s3_test

import (
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/urltest"
	les3 "github.com/racedecider/leaderelection/s3"
)

// urlTestEnv gives the AWS SDK credentials and no files or instance
// metadata to read, so that opening a URL needs no network.
func urlTestEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestOpenURLRejects(t *testing.T) {
	urlTestEnv(t)
	urltest.Rejects(t, "s3cret", map[string]string{
		// A parameter present but empty, as an unset variable leaves it, is
		// not taken for one left out (which would mean real AWS).
		"s3://elections/k?region=us-east-1&endpoint=":                                     "query parameter endpoint is empty",
		"s3://elections/k?region=&endpoint=http://127.0.0.1:9000":                         "query parameter region is empty",
		"s3://elections/k?region=us-east-1&path_style":                                    "query parameter path_style is empty",
		"s3://elections/k?region=us-east-1&region=eu-west-1":                              "query parameter region is given 2 times",
		"s3://elections/k?region=us-east-1&endpoint=http://a:9000&endpoint=http://b:9000": "query parameter endpoint is given 2 times",
		"s3://elections/jobs?region=us-east-1#1":                                          `fragment "#1"`,
		"s3://u:s3cret@elections/k?region=us-east-1":                                      `user information "u:xxxxx@": s3 URLs take no user name or password`,
		"s3://minio:9000/elections/k?region=us-east-1":                                    `bucket "minio:9000" has a port`,
		"s3://elections:/k?region=us-east-1":                                              `bucket "elections:" has a port`,
		"s3://elections/k?region=us-east-1&endpoint=http://u:pw@minio:9000":               "no user information",
		"s3://elections/k?region=us-east-1&endpoint=http://h:1/p?x":                       "no user information, query or fragment",
		"s3://elections/k?region=r/../x":                                                  `region="r/../x": want an AWS region`,
		"s3://elections/k?region=US-EAST-1":                                               `region="US-EAST-1"`,
		"s3://elections/b%FF?region=us-east-1":                                            `key "b\xff" is not valid UTF-8`,
	})
}

func TestOpenURLAccepts(t *testing.T) {
	urlTestEnv(t)
	for _, tc := range []struct{ url, envRegion, name string }{
		{"s3://elections/jobs/report?region=us-east-1", "", "s3://elections/jobs/report"},
		{"s3://my.bucket-1/k?region=us-east-1&path_style=true&endpoint=http%3A%2F%2F127.0.0.1%3A9000", "", "s3://my.bucket-1/k"},
		{"s3://elections/a%23b?region=us-east-1&path_style=false", "", "s3://elections/a#b"},
		{"s3://elections/k?", "eu-west-1", "s3://elections/k"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Setenv("AWS_REGION", tc.envRegion)
			d, err := leaderelection.OpenDecider(t.Context(), tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.(*les3.Decider).String(); got != tc.name {
				t.Errorf("opened %q, want %q", got, tc.name)
			}
		})
	}
}
