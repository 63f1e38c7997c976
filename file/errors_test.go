//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package file_test

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/file"
	"github.com/racedecider/leaderelection/internal/testenv"
)

// wantRefused checks that err wraps entry.ErrRefused and names path.
func wantRefused(t *testing.T, what string, err error, path string) {
	t.Helper()
	if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), path) {
		t.Errorf("%s: %v; want an error wrapping ErrRefused naming %s", what, err, path)
	}
}

// TestRefusedPaths: paths that cannot hold a record are refusals naming the
// path, when NewDecider is given them and when they become so afterwards.
// None of these needs privileges, so they run as root too.
func TestRefusedPaths(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		filepath.Join(dir, "missing", "record"), // ENOENT on the directory
		filepath.Join(plain, "record"),          // ENOTDIR
		dir,                                     // EISDIR
		filepath.Join(dir, strings.Repeat("n", 300)), // ENAMETOOLONG
	} {
		_, err := file.NewDecider(p)
		wantRefused(t, "NewDecider("+p+")", err, p)
	}

	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, dir, record string)
	}{
		{"directory removed", func(t *testing.T, dir, _ string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory replaced by a file", func(t *testing.T, dir, _ string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir, nil, 0o666); err != nil {
				t.Fatal(err)
			}
		}},
		{"record replaced by a directory", func(t *testing.T, _, record string) {
			if err := os.Remove(record); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(record, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "dir")
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "record")
			d := newDecider(t, path)
			tok, err := d.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{}))
			if err != nil {
				t.Fatal(err)
			}
			tc.break_(t, dir, path)
			// Never "no record yet", which would let a candidate create one.
			_, err = d.ReadCurrent(t.Context())
			wantRefused(t, "ReadCurrent", err, path)
			_, err = d.WriteEntry(t.Context(), record(1, "w-1", tok))
			wantRefused(t, "WriteEntry", err, path)
			_, err = d.WriteEntry(t.Context(), record(0, "w-1", entry.LeaderToken{}))
			wantRefused(t, "WriteEntry creating the record", err, path)
		})
	}
}

// TestPermissionDenied: a directory the candidate may not write to and a
// record it may not read are refusals. As root, which no file mode denies,
// the checks run with the filesystem identity of nobody.
func TestPermissionDenied(t *testing.T) {
	dir := t.TempDir()
	// Open to all, so that nobody reaches it; t.TempDir's parent is 0700.
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	readOnlyDir := filepath.Join(dir, "ro")
	if err := os.Mkdir(readOnlyDir, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(readOnlyDir, 0o555); err != nil { // whatever the umask
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	w := newDecider(t, secret)
	tok, err := w.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(secret+".lock", 0o600); err != nil {
		t.Fatal(err)
	}

	asNobody(t, readOnlyDir, func() {
		path := filepath.Join(readOnlyDir, "record")
		d, err := file.NewDecider(path)
		if err != nil {
			t.Errorf("NewDecider in a directory readable by all: %v", err)
			return
		}
		if e, err := d.ReadCurrent(t.Context()); err != nil || e.ElectionNumber != entry.NoElections {
			t.Errorf("ReadCurrent of a missing record in a readable directory: %+v, %v", e, err)
		}
		_, err = d.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{}))
		wantRefused(t, "WriteEntry in a read-only directory", err, path)

		d, err = file.NewDecider(secret)
		if err != nil {
			t.Errorf("NewDecider on an unreadable record: %v", err)
			return
		}
		_, err = d.ReadCurrent(t.Context())
		wantRefused(t, "ReadCurrent of an unreadable record", err, secret)
		_, err = d.WriteEntry(t.Context(), record(1, "w-1", tok))
		wantRefused(t, "WriteEntry with an unopenable lock file", err, secret)
	})
	if got, err := w.ReadCurrent(t.Context()); err != nil || got.WriteID != "w-0" {
		t.Errorf("record after refused writes: %+v, %v; want w-0 unchanged", got, err)
	}
}

// TestFullAndReadOnlyFilesystems: a full filesystem is throttled and heals
// when space is freed; a read-only one is refused. Both run on a small
// tmpfs mounted in a private mount namespace by a helper process, which
// needs root (CAP_SYS_ADMIN); elsewhere the test skips, and TestClassify
// still covers the mapping.
func TestFullAndReadOnlyFilesystems(t *testing.T) {
	out := runMountsHelper(t, t.TempDir())
	sc := bufio.NewScanner(strings.NewReader(out))
	checks := 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "SKIP "):
			testenv.Missing(t, strings.TrimPrefix(line, "SKIP "))
		case strings.HasPrefix(line, "PASS "):
			checks++
			t.Log(line)
		default:
			t.Error(line)
		}
	}
	if checks == 0 && !t.Failed() {
		t.Fatalf("the helper checked nothing; it said:\n%s", out)
	}
}
