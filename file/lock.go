package file

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/internal/backoff"
)

// lockBackoff paces the polling of a lock: the first retry comes after 250
// to 500 us, and the wait doubles up to 20 ms, jittered so that processes
// polling together do not keep colliding. A lock is held only for a read, a
// small write and an fsync, so waits are short; polling keeps every wait
// cancellable.
var lockBackoff = backoff.Backoff{Min: 500 * time.Microsecond, Max: 20 * time.Millisecond}

// heldHere records the lock files a Decider of this process holds, so that
// Deciders on the same file in one process exclude each other whatever the
// filesystem's lock semantics.
var heldHere = struct {
	sync.Mutex
	m map[string]bool
}{m: map[string]bool{}}

func tryLockHere(path string) bool {
	heldHere.Lock()
	defer heldHere.Unlock()
	if heldHere.m[path] {
		return false
	}
	heldHere.m[path] = true
	return true
}

func unlockHere(path string) {
	heldHere.Lock()
	defer heldHere.Unlock()
	delete(heldHere.m, path)
}

// waitLock sleeps b's next wait before another attempt at a lock, or
// returns ctx's error.
func waitLock(ctx context.Context, b *backoff.Backoff) error {
	if !clocks.DefaultClock().SleepFor(ctx, b.Next()) {
		return ctx.Err()
	}
	return nil
}

// lock takes the in-process lock and then the file lock on d.lockPath,
// waiting until ctx ends, and returns the function that releases both.
func (d *Decider) lock(ctx context.Context) (unlock func(), err error) {
	w := lockBackoff
	for !tryLockHere(d.lockPath) {
		if err := waitLock(ctx, &w); err != nil {
			return nil, err
		}
	}
	f, err := lockFile(ctx, d.lockPath, &w)
	if err != nil {
		unlockHere(d.lockPath)
		return nil, err
	}
	return func() {
		// Closing the only descriptor releases the lock.
		_ = f.Close()
		unlockHere(d.lockPath)
	}, nil
}

// lockFile opens (creating it if need be) and exclusively locks the file at
// path. It checks, once locked, that path still names the file it locked: a
// lock file deleted and recreated while we waited would otherwise let two
// writers in.
//
// The file is opened for writing, although nothing is written to it: on NFS,
// Linux emulates flock with POSIX byte-range locks, and an exclusive one
// needs a descriptor open for writing (flock fails with EBADF otherwise).
//
// A symlink at path is refused, never followed: it could lead to another
// record's lock file, or have a writer create and lock any file. Opening
// with O_NOFOLLOW refuses it where the platform has the flag; the Lstat once
// locked catches it where open followed it anyway, or it was planted since.
func lockFile(ctx context.Context, path string, w *backoff.Backoff) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|openNoFollow, 0o666)
		if err != nil {
			// O_NOFOLLOW's error differs between platforms (ELOOP,
			// EMLINK, EFTYPE): say what it means.
			if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return nil, symlinkedLock(path)
			}
			return nil, err
		}
		for {
			locked, err := tryFlock(f)
			if err != nil {
				f.Close()
				return nil, err
			}
			if locked {
				break
			}
			if err := waitLock(ctx, w); err != nil {
				f.Close()
				return nil, err
			}
		}
		held, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		now, err := os.Lstat(path)
		if err == nil && now.Mode()&fs.ModeSymlink != 0 {
			f.Close()
			return nil, symlinkedLock(path)
		}
		if err == nil && os.SameFile(held, now) {
			return f, nil
		}
		f.Close()
	}
}

func symlinkedLock(path string) error {
	return fmt.Errorf("%w: the lock file %s is a symbolic link, which is never followed (it could lead to another record's lock file): remove it",
		entry.ErrRefused, path)
}
