//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package file_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	leaderelection "github.com/racedecider/leaderelection"
	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/file"
	"github.com/racedecider/leaderelection/racedecidertest"
)

func newDecider(t *testing.T, path string) *file.Decider {
	t.Helper()
	d, err := file.NewDecider(path)
	if err != nil {
		t.Fatalf("NewDecider: %v", err)
	}
	return d
}

func TestConformance(t *testing.T) {
	racedecidertest.Run(t, func(t *testing.T) leaderelection.RaceDecider {
		return newDecider(t, filepath.Join(t.TempDir(), "record"))
	})
}

func TestDeleted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	racedecidertest.CheckDeleted(t, newDecider(t, path), func(t *testing.T) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	d := newDecider(t, path)
	racedecidertest.CheckCorrupt(t, d, func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o666); err != nil {
			t.Fatal(err)
		}
	}, path)
}

func TestOversizedFileIsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	if err := os.WriteFile(path, make([]byte, 2<<20), 0o666); err != nil {
		t.Fatal(err)
	}
	d := newDecider(t, path)
	_, err := d.ReadCurrent(t.Context())
	if !errors.Is(err, entry.ErrCorruptRecord) || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadCurrent of a 2 MiB file: %v; want an error naming %s wrapping ErrCorruptRecord", err, path)
	}
	// Nobody can hold its token: every write loses.
	e := record(0, "w-0", entry.LeaderToken{})
	if _, err := d.WriteEntry(t.Context(), e); !errors.Is(err, entry.ErrRaceLost) {
		t.Errorf("create over a 2 MiB file: %v, want ErrRaceLost", err)
	}
}

// TestFIFOIsCorrupt: a FIFO at the record's path, which no one writes, is
// an error naming it, not a read (or a write, which reads first) that blocks
// for ever whatever its context says.
func TestFIFOIsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	if err := syscall.Mkfifo(path, 0o666); err != nil {
		t.Fatal(err)
	}
	d := newDecider(t, path)
	type result struct {
		read, write error
	}
	done := make(chan result, 1)
	go func() {
		_, rerr := d.ReadCurrent(t.Context())
		_, werr := d.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{}))
		done <- result{rerr, werr}
	}()
	select {
	case r := <-done:
		if !errors.Is(r.read, entry.ErrCorruptRecord) || !strings.Contains(r.read.Error(), path) {
			t.Errorf("ReadCurrent of a FIFO: %v; want an error naming %s wrapping ErrCorruptRecord", r.read, path)
		}
		if !errors.Is(r.write, entry.ErrRaceLost) {
			t.Errorf("create over a FIFO: %v, want ErrRaceLost", r.write)
		}
	case <-time.After(10 * time.Second):
		// Only a hang gets here: the calls answer at once.
		t.Fatal("ReadCurrent or WriteEntry still blocked on a FIFO after 10s")
	}
}

// TestSocketIsCorrupt: a Unix socket at the record's path is an error
// naming it that wraps ErrCorruptRecord, as a FIFO is, and a write over it
// loses without replacing it.
func TestSocketIsCorrupt(t *testing.T) {
	// Every platform this file builds for has Unix sockets: a failure is
	// a failure (CI would not notice a skip). A short directory keeps the
	// path within a socket address's ~100 bytes, however long TMPDIR is.
	dir, err := os.MkdirTemp("/tmp", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "record")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("a Unix socket for the test: %v", err)
	}
	defer l.Close()
	d := newDecider(t, path)
	if _, err := d.ReadCurrent(t.Context()); !errors.Is(err, entry.ErrCorruptRecord) || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadCurrent of a socket: %v; want an error naming %s wrapping ErrCorruptRecord", err, path)
	}
	if _, err := d.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{})); !errors.Is(err, entry.ErrRaceLost) {
		t.Errorf("create over a socket: %v, want ErrRaceLost", err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Errorf("the socket after a write: %v, %v; want it left alone", fi, err)
	}
}

// TestElection runs the election scenario in virtual time, each candidate
// with its own Decider on one file.
func TestElection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	synctest.Test(t, func(t *testing.T) {
		racedecidertest.RunElection(t, func(t *testing.T, _ int) racedecidertest.Access {
			return racedecidertest.Cuttable(newDecider(t, path))
		}, racedecidertest.Timing{TermLength: 10 * time.Second, MaxClockSkew: time.Second})
	})
}

func record(n int64, writeID string, tok entry.LeaderToken) *entry.RaceEntry {
	return &entry.RaceEntry{
		ElectionNumber: n, Term: n, LeaderID: "l", WriteID: writeID,
		TermExpiry: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Token: tok,
	}
}

func TestNewDecider(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "plain")
	if err := os.WriteFile(notDir, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"", "empty path"},
		{filepath.Join(dir, "missing", "record"), "no such file or directory"},
		{filepath.Join(notDir, "record"), "not a directory"},
		{dir, "is a directory"},
		{dir + "/", "names a directory"},
		{"/", "names a directory"},
	} {
		_, err := file.NewDecider(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewDecider(%q) = %v; want an error containing %q", tc.path, err, tc.want)
		}
	}

	// A relative path is resolved once, against the working directory then.
	t.Chdir(dir)
	d := newDecider(t, "rel")
	if want := filepath.Join(dir, "rel"); d.Path() != want {
		resolved, _ := filepath.EvalSymlinks(dir)
		if d.Path() != filepath.Join(resolved, "rel") {
			t.Errorf("Path() = %q, want %q", d.Path(), want)
		}
	}
}

func TestWriteWithoutWriteIDRefused(t *testing.T) {
	d := newDecider(t, filepath.Join(t.TempDir(), "record"))
	if _, err := d.WriteEntry(t.Context(), record(0, "", entry.LeaderToken{})); err == nil {
		t.Fatal("WriteEntry of a record without a WriteID succeeded")
	}
}

// TestLockWaitRespectsContext holds the lock from outside and checks that a
// write gives up when its context ends, without applying.
func TestLockWaitRespectsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	d := newDecider(t, path)
	tok, err := d.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{}))
	if err != nil {
		t.Fatal(err)
	}
	lf, err := os.Open(path + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = d.WriteEntry(ctx, record(1, "w-1", tok))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteEntry while another holds the lock: %v, want context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("WriteEntry returned %v after its deadline", waited)
	}

	// Once the lock is free, a write goes through.
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteEntry(t.Context(), record(1, "w-1", tok)); err != nil {
		t.Fatalf("WriteEntry after the lock was released: %v", err)
	}
}

// TestSymlinkedLockFileRefused: a symlink at the lock file's path is not
// followed: a write is refused, naming the lock file, and neither the link's
// target (dangling or not) nor the record is written. Followed, it could
// lead to another record's lock file, or make a writer create or lock any
// file its user may write.
func TestSymlinkedLockFileRefused(t *testing.T) {
	for _, existing := range []bool{false, true} {
		dir := t.TempDir()
		path := filepath.Join(dir, "record")
		target := filepath.Join(dir, "target")
		if existing {
			if err := os.WriteFile(target, []byte("keep"), 0o666); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(target, path+".lock"); err != nil {
			t.Fatal(err)
		}
		d := newDecider(t, path)
		_, err := d.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{}))
		if !errors.Is(err, entry.ErrRefused) || !strings.Contains(err.Error(), path+".lock") || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("write with a symlink (existing target: %v) as its lock file: %v; want a refusal naming %s.lock saying it is a symbolic link", existing, err, path)
		}
		if got, err := os.ReadFile(target); existing && (err != nil || string(got) != "keep") || !existing && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the link's target (existing: %v) after the write: %q, %v; want it untouched", existing, got, err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the record after a refused write: %v; want none", err)
		}
	}
}

// TestLeftoversOfACrashedWriter: a temporary file left by a writer that died,
// and a lock file deleted while held, do not break later writes.
func TestLeftoversOfACrashedWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	d := newDecider(t, path)
	tok, err := d.WriteEntry(t.Context(), record(0, "w-0", entry.LeaderToken{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", []byte("half a rec"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	tok, err = d.WriteEntry(t.Context(), record(1, "w-1", tok))
	if err != nil {
		t.Fatalf("WriteEntry with a stale temporary file: %v", err)
	}
	got, err := d.ReadCurrent(t.Context())
	if err != nil || got.WriteID != "w-1" || got.Token != tok {
		t.Fatalf("ReadCurrent = %+v, %v; want w-1 with token %v", got, err, tok)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left after a write: %v", err)
	}
}

// TestDecidersOnOnePathShareALock: two Deciders for one file (spelt
// differently) in one process exclude each other.
func TestDecidersOnOnePathShareALock(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	a := newDecider(t, filepath.Join(dir, "record"))
	b := newDecider(t, filepath.Join(link, "record"))
	if a.Path() != b.Path() {
		t.Fatalf("paths differ: %q and %q", a.Path(), b.Path())
	}
	tok, err := a.WriteEntry(t.Context(), record(0, "w-a", entry.LeaderToken{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteEntry(t.Context(), record(0, "w-b", entry.LeaderToken{})); !errors.Is(err, entry.ErrRaceLost) {
		t.Fatalf("create through the second Decider: %v, want ErrRaceLost", err)
	}
	got, err := b.ReadCurrent(t.Context())
	if err != nil || got.Token != tok {
		t.Fatalf("second Decider reads %+v, %v; want token %v", got, err, tok)
	}
}
