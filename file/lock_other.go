//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package file

import (
	"errors"
	"os"
	"runtime"
)

func lockingSupported() error {
	return errors.New("file locking (flock) is not supported on " + runtime.GOOS)
}

// openNonblock: NewDecider refuses to run on platforms without flock
// (lockingSupported), some of which (js, wasip1, plan9) have no such flag.
const openNonblock = 0

// openNoFollow: not every such platform has O_NOFOLLOW; lockFile's Lstat
// check stands in for it.
const openNoFollow = 0

func tryFlock(*os.File) (bool, error) { return false, lockingSupported() }
