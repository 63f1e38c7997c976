// Not on OpenBSD, whose libc has no syscall(2) for syscall.Syscall.

//go:build darwin || dragonfly || freebsd || linux || netbsd

package file

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLockFileOpenForWriting: the lock file is locked through a descriptor
// open for reading and writing. On NFS, Linux emulates flock with POSIX
// byte-range locks, and an exclusive one on a descriptor open for reading
// only fails with EBADF; a local filesystem does not mind, so the test
// checks the descriptor's access mode.
func TestLockFileOpenForWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record.lock")
	w := lockBackoff
	for _, what := range []string{"creating", "existing"} {
		f, err := lockFile(t.Context(), path, &w)
		if err != nil {
			t.Fatalf("lockFile (%s lock file): %v", what, err)
		}
		mode, err := accessMode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if mode != syscall.O_RDWR {
			t.Errorf("lock file (%s) open with access mode %#o, want O_RDWR (%#o)", what, mode, syscall.O_RDWR)
		}
	}
}

// accessMode returns f's access mode (O_RDONLY, O_WRONLY or O_RDWR) as the
// kernel reports it.
func accessMode(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var flags uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		flags, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	}); err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, os.NewSyscallError("fcntl F_GETFL", errno)
	}
	return int(flags) & syscall.O_ACCMODE, nil
}
