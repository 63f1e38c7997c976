package memory_test

import (
	"fmt"
	"strings"
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/internal/urltest"
	"github.com/racedecider/leaderelection/memory"
)

func TestOpenURLRejects(t *testing.T) {
	urltest.Rejects(t, "s3cret", map[string]string{
		"mem://election#1":        `fragment "#1"`,
		"mem://election/a#b":      `fragment "#b"`,
		"mem://u@election":        `user information "u@": mem URLs take no user name or password`,
		"mem://u:s3cret@election": `user information "u:xxxxx@"`,
	})
}

func TestOpenURLAccepts(t *testing.T) {
	for _, raw := range []string{"mem://url-test-election", "mem://url-test/a%23b", "mem://url-test-x?"} {
		d, err := leaderelection.OpenDecider(t.Context(), raw)
		if err != nil {
			t.Errorf("OpenDecider(%q): %v", raw, err)
			continue
		}
		want := strings.TrimSuffix(strings.ReplaceAll(raw, "%23", "#"), "?")
		if got := fmt.Sprint(d); got != want {
			t.Errorf("OpenDecider(%q) opened %q, want %q", raw, got, want)
		}
	}
}

// A corrupt record opened by URL is named by it, as the engine names the
// store.
func TestCorruptRecordNamesTheURL(t *testing.T) {
	d, err := leaderelection.OpenDecider(t.Context(), "mem://corrupt-name-test")
	if err != nil {
		t.Fatal(err)
	}
	d.(*memory.Decider).SetRaw([]byte("not a record"))
	if _, err := d.ReadCurrent(t.Context()); err == nil || !strings.HasPrefix(err.Error(), "mem://corrupt-name-test: record") {
		t.Errorf("ReadCurrent of a corrupt record: %v; want an error naming mem://corrupt-name-test", err)
	}
}
