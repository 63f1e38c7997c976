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

func tryFlock(*os.File) (bool, error) { return false, lockingSupported() }
