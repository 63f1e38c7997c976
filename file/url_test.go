package file_test

import (
	"path/filepath"
	"testing"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/file"
	"github.com/racedecider/leaderelection/internal/urltest"
)

func TestOpenURLRejects(t *testing.T) {
	dir := filepath.ToSlash(t.TempDir())
	urltest.Rejects(t, "s3cret", map[string]string{
		"file://" + dir + "/rec#1":            `fragment "#1"`,
		"file://localhost" + dir + "/rec#a/b": `fragment "#a/b"`,
		// net/url drops it without a word: a '#' ending a name was lost.
		"file://" + dir + "/rec#":              "a '#' with nothing after it",
		"file://user@localhost" + dir + "/rec": `user information "user@": file URLs take no user name or password`,
		"file://u:s3cret@" + dir + "/rec":      `user information "u:xxxxx@"`,
	})
}

func TestOpenURLAccepts(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for raw, path := range map[string]string{
		"file://" + filepath.ToSlash(dir) + "/rec":             filepath.Join(dir, "rec"),
		"file://localhost" + filepath.ToSlash(dir) + "/a%23b?": filepath.Join(dir, "a#b"),
	} {
		d, err := leaderelection.OpenDecider(t.Context(), raw)
		if err != nil {
			t.Errorf("OpenDecider(%q): %v", raw, err)
			continue
		}
		if got := d.(*file.Decider).Path(); got != path {
			t.Errorf("OpenDecider(%q) opened %s, want %s", raw, got, path)
		}
	}
}
