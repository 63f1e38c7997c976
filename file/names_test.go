//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package file_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/file"
	"github.com/racedecider/leaderelection/internal/testenv"
	"github.com/racedecider/leaderelection/racedecidertest"
)

// names lays out one record, shared/record, that does not exist yet, and
// returns it with other names for it (the ways hosts or processes may reach
// one shared record) and the symlinks that make those names. None is a hard
// link.
func names(t *testing.T) (rec string, others, links []string) {
	t.Helper()
	// Resolved, so that rec is what Path returns where the temporary
	// directory is itself behind a symlink (macOS).
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(root, "shared")
	hostA := filepath.Join(root, "hostA")
	hostB := filepath.Join(root, "hostB")
	for _, d := range []string{shared, hostA, hostB} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	rec = filepath.Join(shared, "record")
	symlink(t, rec, filepath.Join(hostA, "record"))                           // absolute, dangling until the first write
	symlink(t, "../shared/record", filepath.Join(hostB, "record"))            // relative, climbing out
	symlink(t, "record", filepath.Join(shared, "alias"))                      // relative, beside it
	symlink(t, filepath.Join(hostA, "record"), filepath.Join(hostB, "chain")) // a link to a link
	symlink(t, shared, filepath.Join(hostA, "state"))                         // a link to the directory
	links = []string{
		filepath.Join(hostA, "record"),
		filepath.Join(hostB, "record"),
		filepath.Join(shared, "alias"),
		filepath.Join(hostB, "chain"),
		filepath.Join(hostA, "state"),
	}
	others = append(links[:4:4], filepath.Join(hostA, "state", "record"))
	return rec, others, links
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// checkStillLinks checks that writes replaced the record, not the links to it.
func checkStillLinks(t *testing.T, rec string, links []string) {
	t.Helper()
	fi, err := os.Lstat(rec)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the record %s: %v, %v; want a regular file", rec, fi, err)
	}
	for _, l := range links {
		fi, err := os.Lstat(l)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s after the writes: %v, %v; want it still a symlink", l, fi, err)
		}
	}
}

// TestNamesOfOneRecordRace: writers on Deciders opened under every name of
// one record race; exactly one wins each round. Before names were resolved
// to the end, a Decider on a symlink locked its own sidecar file and renamed
// over the link, so each name had a winner.
func TestNamesOfOneRecordRace(t *testing.T) {
	rec, others, links := names(t)
	var ds []leaderelection.RaceDecider
	for _, n := range append([]string{rec}, others...) {
		d := newDecider(t, n)
		// Two writers per name: in-process exclusion as well as flock.
		ds = append(ds, d, d)
	}
	racedecidertest.RaceWriters(t, ds, 20)
	for _, d := range ds {
		if d := d.(*file.Decider); d.Path() != rec {
			t.Errorf("Path() = %q, want %q", d.Path(), rec)
		}
	}
	checkStillLinks(t, rec, links)
}

// TestStaleTokenThroughAnotherName: a write conditioned on a token that a
// write through another name has superseded loses, in both directions.
func TestStaleTokenThroughAnotherName(t *testing.T) {
	rec, others, links := names(t)
	for _, other := range others {
		direct, linked := newDecider(t, rec), newDecider(t, other)
		cur, err := direct.ReadCurrent(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		n := cur.ElectionNumber + 1
		t0, err := direct.WriteEntry(t.Context(), record(n, "direct-"+other, cur.Token))
		if err != nil {
			t.Fatal(err)
		}
		t1, err := linked.WriteEntry(t.Context(), record(n+1, "linked-"+other, t0))
		if err != nil {
			t.Fatalf("write through %s conditioned on the token of a write through %s: %v", other, rec, err)
		}
		if _, err := direct.WriteEntry(t.Context(), record(n+1, "stale-direct", t0)); !errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("write through %s on a token superseded through %s: %v, want ErrRaceLost", rec, other, err)
		}
		t2, err := direct.WriteEntry(t.Context(), record(n+2, "direct2-"+other, t1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := linked.WriteEntry(t.Context(), record(n+2, "stale-linked", t1)); !errors.Is(err, entry.ErrRaceLost) {
			t.Fatalf("write through %s on a token superseded through %s: %v, want ErrRaceLost", other, rec, err)
		}
		got, err := linked.ReadCurrent(t.Context())
		if err != nil || got.Token.Version != t2.Version {
			t.Fatalf("read through %s: %+v, %v; want the record written through %s", other, got, err, rec)
		}
	}
	checkStillLinks(t, rec, links)
}

// TestElectionUnderSeveralNames runs the election scenario with each
// candidate, and the watcher, reaching the record under another name, as
// hosts with a local symlink into a shared directory do: one leader at a
// time, and the shared record is the one written.
func TestElectionUnderSeveralNames(t *testing.T) {
	rec, others, links := names(t)
	ns := []string{others[0], others[4], rec, others[1]}
	synctest.Test(t, func(t *testing.T) {
		racedecidertest.RunElection(t, func(t *testing.T, i int) racedecidertest.Access {
			return racedecidertest.Cuttable(newDecider(t, ns[i]))
		}, racedecidertest.Timing{TermLength: 10 * time.Second, MaxClockSkew: time.Second})
	})
	checkStillLinks(t, rec, links)
}

// TestHardLinkRefused: a record with a second hard link is refused, by
// NewDecider and by a Decider opened before the link was made, and nothing
// is written.
func TestHardLinkRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "record")
	d := newDecider(t, path)
	tok, err := d.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{}))
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "hardlink")
	if err := os.Link(path, link); err != nil {
		testenv.Missing(t, fmt.Sprintf("no hard links here: %v", err))
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), "hard link") {
			t.Errorf("%s: %v; want an error wrapping ErrRefused about hard links", what, err)
		}
	}
	for _, n := range []string{path, link} {
		_, err := file.NewDecider(n)
		wantRefused(fmt.Sprintf("NewDecider(%q)", n), err)
		if err != nil && !strings.Contains(err.Error(), n) {
			t.Errorf("NewDecider(%q): %v does not name the path", n, err)
		}
	}
	_, err = d.ReadCurrent(t.Context())
	wantRefused("ReadCurrent", err)
	_, err = d.WriteEntry(t.Context(), record(1, "w-1", tok))
	wantRefused("WriteEntry", err)
	for _, n := range []string{path, link} {
		if after, err := os.ReadFile(n); err != nil || string(after) != string(before) {
			t.Errorf("%s changed by a refused write (%v)", n, err)
		}
	}

	// Once the second link is gone, the record is usable again.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteEntry(t.Context(), record(1, "w-1", tok)); err != nil {
		t.Fatalf("WriteEntry once the hard link is removed: %v", err)
	}
}

// TestRetargetedNameRefused: once the name a Decider was opened with leads
// to another file, its reads and writes are refused, naming both files, and
// neither file is written.
func TestRetargetedNameRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup returns the name to open and a function that makes it lead
		// elsewhere.
		setup func(t *testing.T, dir string) (name string, retarget func())
	}{
		{"symlink to the record retargeted", func(t *testing.T, dir string) (string, func()) {
			name := filepath.Join(dir, "link")
			symlink(t, filepath.Join(dir, "a"), name)
			return name, func() { replaceWithSymlink(t, filepath.Join(dir, "b"), name) }
		}},
		{"symlink to the directory retargeted", func(t *testing.T, dir string) (string, func()) {
			for _, s := range []string{"da", "db"} {
				if err := os.Mkdir(filepath.Join(dir, s), 0o777); err != nil {
					t.Fatal(err)
				}
			}
			symlink(t, filepath.Join(dir, "da"), filepath.Join(dir, "state"))
			return filepath.Join(dir, "state", "record"), func() {
				replaceWithSymlink(t, filepath.Join(dir, "db"), filepath.Join(dir, "state"))
			}
		}},
		{"record replaced by a symlink", func(t *testing.T, dir string) (string, func()) {
			name := filepath.Join(dir, "record")
			return name, func() { replaceWithSymlink(t, filepath.Join(dir, "elsewhere"), name) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			name, retarget := tc.setup(t, dir)
			d := newDecider(t, name)
			tok, err := d.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{}))
			if err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(d.Path())
			if err != nil {
				t.Fatal(err)
			}
			retarget()
			wantRefused := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), d.Path()) {
					t.Errorf("%s after %s: %v; want an error wrapping ErrRefused naming %s and %s", what, tc.name, err, name, d.Path())
				}
			}
			_, err = d.ReadCurrent(t.Context())
			wantRefused("ReadCurrent", err)
			_, err = d.WriteEntry(t.Context(), record(1, "w-1", tok))
			wantRefused("WriteEntry", err)
			// The original record is gone when the record itself was
			// replaced; otherwise it must be as it was.
			if fi, err := os.Lstat(d.Path()); err == nil && fi.Mode().IsRegular() {
				if after, err := os.ReadFile(d.Path()); err != nil || string(after) != string(before) {
					t.Errorf("the original record changed (%v)", err)
				}
			}
			if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the new target of %s was written: %v", name, err)
			}
		})
	}
}

// replaceWithSymlink makes name a symlink to target, atomically, as an
// administrator retargeting a link in production would.
func replaceWithSymlink(t *testing.T, target, name string) {
	t.Helper()
	tmp := name + ".new"
	symlink(t, target, tmp)
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

// TestUnresolvableNamesRefused: a link into a missing directory and loops of
// links are refusals naming the path.
func TestUnresolvableNamesRefused(t *testing.T) {
	dir := t.TempDir()
	symlink(t, filepath.Join(dir, "missing", "record"), filepath.Join(dir, "dangling"))
	symlink(t, filepath.Join(dir, "loop2"), filepath.Join(dir, "loop1"))
	symlink(t, filepath.Join(dir, "loop1"), filepath.Join(dir, "loop2"))
	symlink(t, filepath.Join(dir, "dirloop"), filepath.Join(dir, "dirloop"))
	for _, n := range []string{
		filepath.Join(dir, "dangling"),
		filepath.Join(dir, "loop1"),
		filepath.Join(dir, "dirloop", "record"),
	} {
		_, err := file.NewDecider(n)
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), n) {
			t.Errorf("NewDecider(%q) = %v; want an error wrapping ErrRefused naming the path", n, err)
		}
	}
}

// A record may not be named like another record's lock or temporary file: a
// record "leader.lock" would be renamed over the lock file of a record
// "leader", letting two of its writers in at once; a record "leader.tmp"
// would be removed by every write to "leader". A symlink so named that
// leads to a record named otherwise is fine: the lock and temporary files
// are named after the record it leads to.
func TestSidecarNamesRefused(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"leader.lock", "leader.tmp"} {
		p := filepath.Join(dir, n)
		_, err := file.NewDecider(p)
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "must not end in") {
			t.Errorf("NewDecider(%q) = %v; want a refusal naming the path and saying why", p, err)
		}
	}
	symlink(t, filepath.Join(dir, "leader"), filepath.Join(dir, "alias.lock"))
	if _, err := file.NewDecider(filepath.Join(dir, "alias.lock")); err != nil {
		t.Errorf("a link named alias.lock to the record leader: %v", err)
	}
}

// TestDotDotAfterALinkFollowsTheLink: a ".." after a symlink climbs out of
// the link's target, as the OS resolves it, not out of the directory that
// holds the link: NewDecider opens the record the OS would, however the path
// is spelt. A path ending in a slash names a directory and is refused.
func TestDotDotAfterALinkFollowsTheLink(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o777); err != nil {
		t.Fatal(err)
	}
	symlink(t, filepath.Join("a", "b"), filepath.Join(root, "link"))
	want := filepath.Join(root, "a", "rec") // what the OS opens
	lexical := filepath.Join(root, "rec")   // what cleaning the path first opens

	check := func(name string) {
		t.Helper()
		d, err := file.NewDecider(name)
		if err != nil {
			t.Errorf("NewDecider(%q): %v", name, err)
			return
		}
		if d.Path() != want {
			t.Errorf("NewDecider(%q).Path() = %s, want %s, the file the OS opens", name, d.Path(), want)
		}
		if err := os.WriteFile(want, []byte("x"), 0o666); err != nil {
			t.Fatal(err)
		}
		// The OS agrees.
		if got, err := os.ReadFile(name); err != nil || string(got) != "x" {
			t.Fatalf("the OS opens another file for %q: %q, %v", name, got, err)
		}
		if err := os.Remove(want); err != nil {
			t.Fatal(err)
		}
	}
	check(root + "/link/../rec")
	t.Chdir(root)
	check("link/../rec")
	// A working directory reached through the link: "../" climbs out of
	// the link's target.
	t.Chdir(filepath.Join(root, "link"))
	check("../rec")
	if _, err := os.Lstat(lexical); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v; nothing should have made it", lexical, err)
	}

	if err := os.WriteFile(want, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{want + "/", filepath.Join(root, "new") + "/", root + "/link/../rec/"} {
		_, err := file.NewDecider(n)
		if err == nil || !strings.Contains(err.Error(), n) || !strings.Contains(err.Error(), "names a directory") {
			t.Errorf("NewDecider(%q) = %v; want an error naming the path saying it names a directory", n, err)
		}
	}
}

// TestSidecarNamesRefusedInAnyCase: the sidecar names are refused whatever
// their case. On a case-insensitive filesystem (macOS, Windows by default)
// leader.LOCK is the file leader.lock, the lock file of the record leader.
func TestSidecarNamesRefusedInAnyCase(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"leader.LOCK", "leader.Lock", "leader.TMP", "leader.tMp"} {
		p := filepath.Join(dir, n)
		_, err := file.NewDecider(p)
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "must not end in") {
			t.Errorf("NewDecider(%q) = %v; want a refusal naming the path and saying why", p, err)
		}
	}
}
