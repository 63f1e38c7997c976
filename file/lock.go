package file

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	clocks "github.com/vimeo/go-clocks"

	"github.com/racedecider/leaderelection/entry"
)

// Lock polling: the first retry comes after about minLockWait, and the wait
// doubles up to maxLockWait. A lock is held only for a read, a small write
// and an fsync, so waits are short; polling keeps every wait cancellable.
const (
	minLockWait = 500 * time.Microsecond
	maxLockWait = 20 * time.Millisecond
)

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

// lockWaiter paces the polling of a lock.
type lockWaiter struct{ cur time.Duration }

// wait sleeps before the next attempt, or returns ctx's error.
func (w *lockWaiter) wait(ctx context.Context) error {
	if w.cur == 0 {
		w.cur = minLockWait
	} else {
		w.cur = min(2*w.cur, maxLockWait)
	}
	// Jitter, so that processes polling together do not keep colliding.
	if !clocks.DefaultClock().SleepFor(ctx, w.cur/2+rand.N(w.cur/2+1)) {
		return ctx.Err()
	}
	return nil
}

// lock takes the in-process lock and then the file lock on d.lockPath,
// waiting until ctx ends, and returns the function that releases both.
func (d *Decider) lock(ctx context.Context) (unlock func(), err error) {
	var w lockWaiter
	for !tryLockHere(d.lockPath) {
		if err := w.wait(ctx); err != nil {
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
func lockFile(ctx context.Context, path string, w *lockWaiter) (*os.File, error) {
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
			if err := w.wait(ctx); err != nil {
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
