//go:build !plan9

package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/racedecider/leaderelection/entry"
)

// TestClassify checks the mapping on each errno the filesystem may answer,
// wrapped as package os returns them. errors_test.go meets the same answers
// from a real filesystem where the test can set them up.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error // nil: left alone, an unknown outcome
	}{
		{syscall.EACCES, entry.ErrRefused},
		{syscall.EPERM, entry.ErrRefused},
		{syscall.EROFS, entry.ErrRefused},
		{syscall.ENOENT, entry.ErrRefused},
		{syscall.ENOTDIR, entry.ErrRefused},
		{syscall.EISDIR, entry.ErrRefused},
		{syscall.ELOOP, entry.ErrRefused},
		{syscall.ENAMETOOLONG, entry.ErrRefused},
		{syscall.ENOLCK, entry.ErrRefused},
		{syscall.EOPNOTSUPP, entry.ErrRefused},
		{syscall.ENOSPC, entry.ErrThrottled},
		{syscall.EDQUOT, entry.ErrThrottled},
		{syscall.EIO, nil},
		{syscall.ESTALE, nil},
		{syscall.EINTR, nil},
	} {
		err := &fs.PathError{Op: "open", Path: "/x/record", Err: tc.err}
		got := classify(err)
		if !errors.Is(got, tc.err) {
			t.Errorf("classify(%v) = %v: lost the cause", err, got)
		}
		for _, class := range []error{entry.ErrRefused, entry.ErrThrottled} {
			if errors.Is(got, class) != (class == tc.want) {
				t.Errorf("classify(%v) = %v; want class %v", err, got, tc.want)
			}
		}
	}
	// EBADF from flock: on NFS, an exclusive lock on a descriptor not open
	// for writing. A refusal with a hint; EBADF from any other call is not.
	flockErr := fmt.Errorf("locking: %w", &fs.PathError{Op: "flock", Path: "/x/record.lock", Err: syscall.EBADF})
	if got := classify(flockErr); !errors.Is(got, entry.ErrRefused) || !errors.Is(got, syscall.EBADF) ||
		!strings.Contains(got.Error(), "exclusive lock") {
		t.Errorf("classify(%v) = %v; want a refusal with a hint, keeping the cause", flockErr, got)
	}
	readErr := &fs.PathError{Op: "read", Path: "/x/record", Err: syscall.EBADF}
	if got := classify(readErr); got != error(readErr) {
		t.Errorf("classify(%v) = %v, want it unchanged", readErr, got)
	}
	// ENOENT from the rename: its source is gone, which a retransmitted
	// NFS rename whose first try was applied answers. Unknown, unlike
	// ENOENT from any other call (a missing directory).
	renameErr := &os.LinkError{Op: "rename", Old: "/x/record.tmp", New: "/x/record", Err: syscall.ENOENT}
	if got := classify(renameErr); got != error(renameErr) {
		t.Errorf("classify(%v) = %v, want it unchanged: the record may have been replaced", renameErr, got)
	}
	for _, err := range []error{context.Canceled, entry.ErrRaceLost, nil} {
		if got := classify(err); got != err {
			t.Errorf("classify(%v) = %v, want it unchanged", err, got)
		}
	}
}
