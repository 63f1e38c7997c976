package file

import (
	"errors"
	"syscall"
)

// Plan 9's errors are strings, and NewDecider refuses to run there
// (lockingSupported); these let the package build, for programs that
// import it among other backends.
var (
	refusedErrnos   = []error{syscall.ENOENT, syscall.ENOTDIR, syscall.EISDIR, syscall.ENAMETOOLONG}
	throttledErrnos []error
	errLoop         = errors.New("too many levels of symbolic links")
	errNotSupported = errors.New("operation not supported")
	errBadFile      = errors.New("bad file descriptor")
)

func isErrno(err error) bool {
	var e syscall.ErrorString
	return errors.As(err, &e)
}
