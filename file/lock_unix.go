//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package file

import (
	"errors"
	"os"
	"syscall"
)

func lockingSupported() error { return nil }

// openNonblock opens a FIFO without waiting for a writer.
const openNonblock = syscall.O_NONBLOCK

// openNoFollow makes opening a symlink fail rather than follow it.
const openNoFollow = syscall.O_NOFOLLOW

// tryFlock takes an exclusive flock on f without blocking. It reports false,
// with no error, when another holder has it.
func tryFlock(f *os.File) (bool, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if !errors.Is(ferr, syscall.EINTR) {
				return
			}
		}
	})
	switch {
	case err != nil:
		return false, err
	case errors.Is(ferr, syscall.EWOULDBLOCK):
		return false, nil
	case ferr != nil:
		return false, &os.PathError{Op: "flock", Path: f.Name(), Err: ferr}
	}
	return true, nil
}
