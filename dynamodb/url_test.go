package dynamodb_test

import (
	"errors"
	"strings"
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
	ledynamodb "github.com/racedecider/leaderelection/dynamodb"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/faultproxy"
)

func TestOpenDeciderErrors(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	cases := map[string]string{
		"dynamodb:///key?region=r":                    "no table",
		"dynamodb://elections?region=r":               "no key",
		"dynamodb://elections/?region=r":              "no key",
		"dynamodb://ab/key?region=r":                  `table "ab"`,
		"dynamodb://elections/key?region=r&x=1":       "x",
		"dynamodb://elections/key?endpoint=localhost": `endpoint="localhost"`,
		"dynamodb://elections/key":                    "no AWS region",
		// Present but empty is not left out: no fallback to real AWS.
		"dynamodb://elections/key?region=r&endpoint=":                           "query parameter endpoint is empty",
		"dynamodb://elections/key?region=":                                      "query parameter region is empty",
		"dynamodb://elections/key?region=r&region=s":                            "query parameter region is given 2 times",
		"dynamodb://elections/key?region=r#1":                                   `fragment "#1"`,
		"dynamodb://u@elections/key?region=r":                                   `user information "u@": dynamodb URLs take no user name or password`,
		"dynamodb://localhost:8000/elections/key?region=r":                      `table "localhost:8000" has a port`,
		"dynamodb://elections/key?region=r&endpoint=http://u:pw@127.0.0.1:8000": "no user information",
		"dynamodb://elections/key?region=a%20b":                                 `region="a b": want an AWS region`,
		"dynamodb://elections/key?region=r&endpoint=http://h:1/p?x":             "no user information, query or fragment",
		"dynamodb://elections/k%FF?region=r":                                    `key "k\xff" is not valid UTF-8`,
	}
	for raw, want := range cases {
		t.Run(raw, func(t *testing.T) {
			d, err := leaderelection.OpenDecider(t.Context(), raw)
			if !errors.Is(err, leaderelection.ErrBadURL) || !strings.Contains(err.Error(), want) {
				t.Fatalf("OpenDecider(%q) = %v, %v; want an ErrBadURL saying %q", raw, d, err, want)
			}
		})
	}
}

// TestOpenDecider opens a Decider by URL on DynamoDB Local, with the SDK's
// default configuration taking credentials from the environment.
func TestOpenDecider(t *testing.T) {
	s := newStore(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "leaderelectiontest")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	key := "jobs/" + newKey()
	raw := "dynamodb://" + s.table + "/" + key + "?region=us-east-1&endpoint=" + s.endpoint
	d, err := leaderelection.OpenDecider(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.(*ledynamodb.Decider).String(), s.name(key); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "a", WriteID: "w-0"})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := ledynamodb.NewDecider(s.c, s.table, key)
	if err != nil {
		t.Fatal(err)
	}
	if got := faultproxy.MustRead(t, direct); !got.Token.SameVersion(tok) {
		t.Errorf("read %+v through a client of our own, want the token %q", got, tok.Version)
	}
}
