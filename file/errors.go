package file

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/racedecider/leaderelection/entry"
)

// classify is the one place where the filesystem's answers become the error
// classes the engine acts on: it wraps err with entry.ErrRefused or
// entry.ErrThrottled when it is one of the answers in errno.go, and returns it
// unchanged otherwise (an unknown outcome, or a lost race or context error
// already classified). Permission denied (EACCES, EPERM) is a refusal.
//
// Callers pass it only errors met up to the rename, which prove that the
// write was not applied, but for the rename's own ENOENT, left unknown
// below; an error after the rename (syncing the directory) leaves the
// outcome unknown and must not go through here.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, entry.ErrRefused), errors.Is(err, entry.ErrThrottled):
		return err
	case isRenameENOENT(err):
		// The rename's source, our temporary file, is gone, and no other
		// writer could have moved it (we hold the lock): on NFS, a rename
		// retransmitted after its reply was lost finds it so. The record
		// may have been replaced: an unknown outcome, which the engine
		// resolves by reading back.
		return err
	case isFlockEBADF(err):
		return fmt.Errorf("%w: %w (the filesystem refuses an exclusive lock on the lock file, "+
			"which is open for reading and writing; it needs working locks: a local disk, NFSv4, NFSv3 with lockd)",
			entry.ErrRefused, err)
	case errors.Is(err, fs.ErrPermission) || isAny(err, refusedErrnos):
		return fmt.Errorf("%w: %w", entry.ErrRefused, err)
	case isAny(err, throttledErrnos):
		return fmt.Errorf("%w: %w", entry.ErrThrottled, err)
	}
	return err
}

// isFlockEBADF reports whether err is flock's EBADF. On NFS, where Linux
// emulates flock with POSIX byte-range locks, it means the descriptor is not
// open for writing; lockFile opens the lock file for writing, so a
// filesystem that still answers it will keep doing so. EBADF from any other
// call is left alone.
func isFlockEBADF(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Op == "flock" && errors.Is(pe.Err, errBadFile)
}

// isRenameENOENT reports whether err is a rename's ENOENT.
func isRenameENOENT(err error) bool {
	var le *os.LinkError
	return errors.As(err, &le) && le.Op == "rename" && errors.Is(le.Err, fs.ErrNotExist)
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
