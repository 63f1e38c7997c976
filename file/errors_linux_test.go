package file_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/racedecider/leaderelection/entry"
	"github.com/racedecider/leaderelection/file"
	"github.com/racedecider/leaderelection/internal/testenv"
)

// nobody is the uid and gid of the unprivileged user on Linux.
const nobody = 65534

// asNobody runs f with file permissions checked as for an unprivileged
// user: as root, on a thread of its own whose filesystem uid and gid are
// nobody's (setfsuid drops root's override of file modes for that thread
// only); otherwise as the user running the test. probe is a directory
// nobody may not write to, used to check that the setup works. f must report
// with t.Error, not t.Fatal: it runs in another goroutine.
func asNobody(t *testing.T, probe string, f func()) {
	t.Helper()
	skip := make(chan string, 1)
	go func() {
		// Never unlocked: the thread, with its changed identity, ends
		// with this goroutine instead of going back to the pool.
		runtime.LockOSThread()
		if os.Geteuid() == 0 {
			if err := syscall.Setfsgid(nobody); err != nil {
				skip <- fmt.Sprintf("setfsgid: %v", err)
				return
			}
			if err := syscall.Setfsuid(nobody); err != nil {
				skip <- fmt.Sprintf("setfsuid: %v", err)
				return
			}
		}
		p := filepath.Join(probe, "probe")
		if err := os.WriteFile(p, nil, 0o666); err == nil {
			_ = os.Remove(p)
			skip <- "file modes do not deny writes here"
			return
		}
		f()
		skip <- ""
	}()
	if reason := <-skip; reason != "" {
		testenv.Missing(t, reason)
	}
}

// runMountsHelper runs mountsHelper in a private mount namespace, in dir,
// and returns its output.
func runMountsHelper(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return "SKIP mounting a tmpfs needs root"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=mounts", pathEnv+"="+dir)
	// A mount namespace of its own (made private by package syscall), so
	// that its mounts are invisible outside and vanish with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		return fmt.Sprintf("SKIP cannot run a helper in a mount namespace: %v", err)
	}
	if err != nil {
		return fmt.Sprintf("%shelper: %v", out, err)
	}
	return string(out)
}

// mountsHelper mounts two small tmpfs under $FILE_TEST_PATH, fills one and
// makes the other read-only, and prints "PASS check" or "FAIL check: why"
// for each check, or "SKIP why" when it cannot mount.
func mountsHelper() {
	base := os.Getenv(pathEnv)
	full, ro := filepath.Join(base, "full"), filepath.Join(base, "ro")
	for _, d := range []string{full, ro} {
		if err := os.Mkdir(d, 0o777); err != nil {
			fmt.Println("FAIL mkdir:", err)
			return
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "size=64k"); err != nil {
			fmt.Println("SKIP cannot mount a tmpfs:", err)
			return
		}
	}
	check := func(name string, err error, want error, path string) {
		switch {
		case want == nil && err == nil:
			fmt.Println("PASS", name)
		case want != nil && errors.Is(err, want) && strings.Contains(err.Error(), path):
			fmt.Printf("PASS %s: %v\n", name, err)
		default:
			fmt.Printf("FAIL %s: %v; want %v naming %s\n", name, err, want, path)
		}
	}
	ctx := context.Background()

	// A full filesystem: throttled, not applied, and healed once space is freed.
	path := filepath.Join(full, "record")
	d, err := file.NewDecider(path)
	if err != nil {
		fmt.Println("FAIL NewDecider:", err)
		return
	}
	tok, err := d.WriteEntry(ctx, record(0, "w-0", entry.LeaderToken{}))
	check("first write", err, nil, path)
	filler, err := os.Create(filepath.Join(full, "filler"))
	if err != nil {
		fmt.Println("FAIL filler:", err)
		return
	}
	for err == nil {
		_, err = filler.Write(make([]byte, 4096))
	}
	filler.Close()
	check("filling the filesystem", err, syscall.ENOSPC, "filler")
	_, err = d.WriteEntry(ctx, record(1, "w-1", tok))
	check("write on a full filesystem", err, entry.ErrThrottled, path)
	if e, err := d.ReadCurrent(ctx); err != nil || e.WriteID != "w-0" {
		fmt.Printf("FAIL a throttled write was applied: %+v, %v\n", e, err)
	}
	if err := os.Remove(filepath.Join(full, "filler")); err != nil {
		fmt.Println("FAIL removing the filler:", err)
		return
	}
	_, err = d.WriteEntry(ctx, record(1, "w-1", tok))
	check("write once space is freed", err, nil, path)

	// A read-only filesystem: refused, whether the lock file exists or not;
	// reads still work.
	path = filepath.Join(ro, "record")
	d, err = file.NewDecider(path)
	if err != nil {
		fmt.Println("FAIL NewDecider:", err)
		return
	}
	tok, err = d.WriteEntry(ctx, record(0, "w-0", entry.LeaderToken{}))
	check("first write", err, nil, path)
	if err := syscall.Mount("tmpfs", ro, "tmpfs", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		fmt.Println("FAIL remounting read-only:", err)
		return
	}
	_, err = d.WriteEntry(ctx, record(1, "w-1", tok))
	check("write on a read-only filesystem", err, entry.ErrRefused, path)
	_, err = d.ReadCurrent(ctx)
	check("read on a read-only filesystem", err, nil, path)
	other := filepath.Join(ro, "other")
	d, err = file.NewDecider(other)
	if err != nil {
		fmt.Println("FAIL NewDecider:", err)
		return
	}
	_, err = d.WriteEntry(ctx, record(0, "w-0", entry.LeaderToken{}))
	check("first write on a read-only filesystem", err, entry.ErrRefused, other)
}
