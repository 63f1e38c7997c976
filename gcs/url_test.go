package gcs_test

import (
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
	legcs "github.com/racedecider/leaderelection/gcs"
	"github.com/racedecider/leaderelection/internal/urltest"
)

func TestOpenURLRejects(t *testing.T) {
	// Making a client needs credentials or an emulator; these URLs are
	// refused before one is made, or would be opened with it unreached.
	t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:1")
	urltest.Rejects(t, "", map[string]string{
		"gs://elections/o?min_write_interval=":                        "query parameter min_write_interval is empty",
		"gs://elections/o?kms_key_name=&predefined_acl=":              "query parameters kms_key_name, predefined_acl are empty",
		"gs://elections/o?min_write_interval=0&min_write_interval=1s": "query parameter min_write_interval is given 2 times",
		"gs://elections/jobs#1":                                       `fragment "#1"`,
		"gs://elections/jobs?min_write_interval=0#1":                  `fragment "#1"`,
		"gs://u@elections/o":                                          `user information "u@": gs URLs take no user name or password`,
		"gs://localhost:4443/elections/o":                             `bucket "localhost:4443" has a port`,
	})
}

func TestOpenURLAccepts(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:1")
	for raw, name := range map[string]string{
		"gs://elections/jobs/report%20sender?min_write_interval=0": "gs://elections/jobs/report sender",
		"gs://elections/a%23b": "gs://elections/a#b",
		"gs://elections/o?":    "gs://elections/o",
	} {
		d, err := leaderelection.OpenDecider(t.Context(), raw)
		if err != nil {
			t.Errorf("OpenDecider(%q): %v", raw, err)
			continue
		}
		if got := d.(*legcs.Decider).String(); got != name {
			t.Errorf("OpenDecider(%q) opened %q, want %q", raw, got, name)
		}
	}
}
