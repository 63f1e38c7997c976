//go:build !plan9

package file

import (
	"errors"
	"syscall"
)

// refusedErrnos are the filesystem's answers that will not change until
// someone changes the setup. ENOENT is among them because the callers of
// classify handle a missing record themselves: any ENOENT left is a missing
// directory, which is a missing store, never "no record yet" (but for the
// rename's, see classify). The lock
// errors come from flock on a filesystem without lock support (NFSv3
// without lockd answers ENOLCK).
var refusedErrnos = []error{
	syscall.EROFS,        // read-only filesystem
	syscall.ENOENT,       // missing directory
	syscall.ENOTDIR,      // a component of the path is not a directory
	syscall.EISDIR,       // the record's path is a directory
	syscall.ELOOP,        // a loop of symbolic links
	syscall.ENAMETOOLONG, // the path is too long for the filesystem
	syscall.ENOLCK,       // no lock support
	syscall.ENOTSUP,      // no lock support
	syscall.EOPNOTSUPP,   // no lock support
}

// throttledErrnos are a full filesystem or an exhausted quota. They are
// reported as throttled, not refused: they heal once space is freed (a log
// rotated, a quota raised), and a refusal would end Acquire, taking a
// leader down for a condition its next extension may well not meet. The
// engine retries them with backoff until the term runs out.
var throttledErrnos = []error{syscall.ENOSPC, syscall.EDQUOT}

// The other answers this package names (plan9, whose errors are strings,
// has its own in errno_plan9.go).
var (
	errLoop         = syscall.ELOOP   // a loop of symbolic links
	errNotSupported = syscall.ENOTSUP // a directory that cannot be synced
	errBadFile      = syscall.EBADF
)

// isErrno reports whether err carries the system's own error code.
func isErrno(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno)
}
