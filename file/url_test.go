package file_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
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

// TestStringOpensTheRecord: a Decider's String, handed to OpenDecider, opens
// the same record, whatever characters its path holds: '%', '?', '#' and
// control characters must be percent-encoded for the URL to parse to it.
func TestStringOpensTheRecord(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i, rel := range []string{
		"plain", "a%b", "a%23b", "a%zz", "a?b", "q?x=1&y", "a#b", "a#", "a?#%",
		"tab\tand\nnewline", "del\x7f", "esc\x1b", "a b", "caf\u00e9", "dir?#%\x01/rec",
		"not-utf8\xff\xfe", "a;b=c&d", "back\\slash", "a:b@c",
	} {
		dir := filepath.Join(root, fmt.Sprint(i))
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
			t.Fatal(err)
		}
		d, err := file.NewDecider(path)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := d.WriteEntry(t.Context(), &entry.RaceEntry{LeaderID: "l", WriteID: "w", TermExpiry: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		o, err := leaderelection.OpenDecider(t.Context(), d.String())
		if err != nil {
			t.Errorf("OpenDecider(%q), the String of the Decider on %q: %v", d.String(), path, err)
			continue
		}
		if got := o.(*file.Decider).Path(); got != path {
			t.Errorf("OpenDecider(%q) opened %q, want %q", d.String(), got, path)
			continue
		}
		if got, err := o.ReadCurrent(t.Context()); err != nil || got.Token.Version != tok.Version {
			t.Errorf("ReadCurrent through OpenDecider(%q): %+v, %v; want the record written", d.String(), got, err)
		}
	}
}
