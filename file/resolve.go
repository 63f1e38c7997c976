package file

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/racedecider/leaderelection/entry"
)

// maxSymlinks bounds the symbolic links resolve follows, as the kernel does
// (Linux gives up after 40), so that a loop of links is an error.
const maxSymlinks = 40

// resolve returns the file that the absolute path name stands for, with
// every symbolic link in it followed, the last component included, whether
// or not that file exists yet: a dangling link resolves to the file it would
// create. A link may point into another directory; the directory of the
// result must exist.
//
// The lock, the temporary file and the rename all work on the result, so
// every name of one record shares them. Working on the name as given would
// make two spellings two records: each would lock its own sidecar file, and
// the first write through a symlink would replace the link with a regular
// file.
func resolve(name string) (string, error) {
	p := name
	for range maxSymlinks {
		dir, base := filepath.Split(p)
		if base == "" || base == "." || base == ".." {
			return "", &fs.PathError{Op: "open", Path: p, Err: syscall.EISDIR}
		}
		// EvalSymlinks walks the components in order, so a ".." in a
		// link's target climbs out of the directory the preceding link
		// led to, as the kernel would.
		rdir, err := filepath.EvalSymlinks(dir)
		if err != nil {
			var pe *fs.PathError
			if !isErrno(err) && !errors.As(err, &pe) {
				// Its only error of its own is a loop of links.
				err = fmt.Errorf("%w (%v)", errLoop, err)
			}
			// Its error does not always name the path.
			return "", fmt.Errorf("resolving the directory %s: %w", dir, err)
		}
		p = filepath.Join(rdir, base)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return p, nil // The first write will create it.
		case err != nil:
			return "", err
		case fi.IsDir():
			return "", &fs.PathError{Op: "open", Path: p, Err: syscall.EISDIR}
		case fi.Mode()&fs.ModeSymlink == 0:
			return p, nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			// Not filepath.Join: cleaning "link/.." lexically would be
			// wrong when link is itself a symlink; EvalSymlinks gets it
			// right on the next round.
			target = rdir + string(filepath.Separator) + target
		}
		p = target
	}
	return "", &fs.PathError{Op: "resolve", Path: name, Err: errLoop}
}

// checkName refuses when the name d was opened with no longer resolves to
// d.path: a symlink retargeted, or a record or directory replaced by one,
// while the Decider runs. d goes on using the file it resolved at first, but
// another process opening the same name now would use another record, and
// two records mean two leaders. Every ReadCurrent and WriteEntry calls it.
func (d *Decider) checkName() error {
	now, err := resolve(d.name)
	if err != nil {
		return classify(err)
	}
	if now != d.path {
		return fmt.Errorf("%w: %s resolved to %s when opened and now resolves to %s: "+
			"a record must keep one name for as long as candidates use it", entry.ErrRefused, d.name, d.path, now)
	}
	return nil
}

// checkLinks refuses a record file with more than one hard link. A rename
// replaces only the name it is given, so the first write through one link
// would leave the other naming the old record: two records, each with its
// own lock. A link made after a write has checked, and before it renames,
// escapes this check; hard-linking a live record is not supported.
func checkLinks(path string, fi fs.FileInfo) error {
	if n := linkCount(fi); n > 1 {
		return fmt.Errorf("%w: %s has %d hard links: every name of a record must be a symbolic link to one file",
			entry.ErrRefused, path, n)
	}
	return nil
}
