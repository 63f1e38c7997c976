// Package file is a leaderelection.RaceDecider that keeps the election record
// in one file, for candidates on one host or on hosts sharing a POSIX
// filesystem that supports file locks (a local disk, NFSv4, NFSv3 with lockd).
//
// Import it, if only with a blank import, for leaderelection.OpenDecider to
// open "file:///path/to/record" URLs.
//
// # How a write is made atomic
//
// WriteEntry holds an exclusive lock on a sidecar file, the record's path
// with ".lock" appended, while it reads the current record, compares it with
// the token the write is conditioned on and, if they match, replaces the
// record. Locks are taken with flock(2) without blocking, retried with a
// short backoff until the context ends, so a cancelled candidate never waits
// on a lock. The kernel drops a lock when its holder dies, so a candidate
// killed while holding one blocks nobody; one stopped while holding it
// (SIGSTOP, a starving CPU quota) holds up every other write until it runs
// again. Within one process, Deciders on the
// same record also exclude each other without relying on the kernel (on NFS,
// Linux emulates flock with POSIX locks, which do not exclude two descriptors
// of the same process).
//
// The new record is written to a temporary file next to the record (the
// record's path with ".tmp" appended), flushed to disk with fsync, and
// renamed over the record, after which the directory is flushed too. A
// rename is atomic: a reader, or a candidate killed at any instant, sees the
// old record whole or the new one whole, never a torn one. A killed writer
// may leave the temporary file behind; the next writer replaces it.
//
// Reads take no lock: they open the file and read it whole, which the
// rename makes safe.
//
// # Names of the record
//
// Every name of one record shares one lock and one record, however the path
// was spelt: NewDecider follows every symbolic link in the path, the last
// component included (a dangling link names the file the first write will
// create), and the lock, the temporary file and the rename all work on the
// file the links lead to. Hosts that each reach a shared directory through
// a local symlink therefore lock and replace the shared record, and the
// links stay links. The lock and temporary files live beside that file, in
// its directory.
//
// Every ReadCurrent and WriteEntry checks that the name still leads to the
// same file, and refuses (entry.ErrRefused) if a link has been retargeted
// meanwhile: processes opening the name afterwards would use another
// record. A record with more than one hard link is refused too: a rename
// replaces one name only, so the first write would split it in two. To give
// a record several names, use symbolic links. A record whose name ends in
// .lock or .tmp, in any case, is refused by NewDecider: it could be another
// record's lock or temporary file, and a record renamed over another's lock
// file would let two of its writers in at once.
//
// # Errors
//
// Permission denied, a read-only filesystem, a missing directory, a path
// that is a directory and a filesystem without lock support are refusals
// (entry.ErrRefused): the write was not applied and will not be until
// someone changes the setup. A full filesystem or exhausted quota is
// reported as throttled (entry.ErrThrottled): the write was not applied,
// and the condition heals once space is freed. Any other error, a rename
// that finds its temporary file gone (on NFS, a rename retransmitted after
// its reply was lost), and any error once the record has been renamed into
// place leave the outcome unknown.
//
// # Tokens
//
// A record's token is a SHA-256 digest (128 bits of it) of the file's
// content. Metadata would not do: the inode number of a replaced file is
// reused as soon as it is freed, and many filesystems keep modification
// times at a coarse granularity (or an NFS client caches them), so two
// successive records can share inode, size and modification time. Content
// always differs, because every record carries a random write id, and
// WriteEntry refuses a record without one. The token's CommitTime is the
// file's modification time: the clock of the host, or of the NFS server,
// that stored it.
//
// # Permissions
//
// Every candidate needs read and write access to the record's directory
// (the one its symlinks lead to: to create the lock and temporary files and
// to rename), and to the lock file once it exists. Observers that only read
// (status, watch) need read access to the record alone. Files are created
// with mode 0666 less the umask.
//
// There is no push notification: this Decider does not implement
// leaderelection.ChangeNotifier, so waiting candidates and watchers poll.
package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/racedecider/leaderelection/entry"
)

// The lock and temporary files beside a record are named after it.
const (
	lockExt = ".lock"
	tmpExt  = ".tmp"
)

// maxRecordSize bounds the file ReadCurrent will read. A record is well under
// a kilobyte; a larger file is not one.
const maxRecordSize = 1 << 20

// Decider is a leaderelection.RaceDecider on one file. It is safe for
// concurrent use. Create it with NewDecider.
type Decider struct {
	name     string // absolute, as given: checked on every call to still lead to path
	path     string // absolute, every symlink resolved: the file read and replaced
	lockPath string
	tmpPath  string
	dir      string
}

// NewDecider returns a Decider keeping the election record in the file at
// path, which need not exist yet: the first write creates it. Its directory
// must exist. A relative path is taken relative to the working directory at
// the time of the call. Symbolic links in path, including a link as its last
// component, are followed (see "Names of the record" above); a record with
// more than one hard link is refused. Errors that the filesystem will repeat
// until someone changes the setup wrap entry.ErrRefused.
func NewDecider(path string) (*Decider, error) {
	if err := lockingSupported(); err != nil {
		return nil, fmt.Errorf("file: NewDecider: %w", err)
	}
	if path == "" {
		return nil, errors.New("file: NewDecider: empty path")
	}
	if os.IsPathSeparator(path[len(path)-1]) {
		// The OS takes "rec/" for a directory; cleaning it to "rec" would
		// open a record the OS would not.
		return nil, fmt.Errorf("file: NewDecider(%q): the path ends in a slash: it names a directory, not a file", path)
	}
	abs, err := absolute(path)
	if err != nil {
		return nil, fmt.Errorf("file: NewDecider(%q): %w", path, err)
	}
	target, err := resolve(abs)
	if err != nil {
		return nil, fmt.Errorf("file: NewDecider(%q): %w", path, classify(err))
	}
	if fi, err := os.Stat(target); err == nil {
		if err := checkLinks(target, fi); err != nil {
			return nil, fmt.Errorf("file: NewDecider(%q): %w", path, err)
		}
	}
	if ext := filepath.Ext(target); strings.EqualFold(ext, lockExt) || strings.EqualFold(ext, tmpExt) {
		// It could be another record's lock or temporary file: a record
		// renamed over a lock file would let two writers in at once. In
		// any case: on a case-insensitive filesystem x.LOCK is x.lock.
		return nil, fmt.Errorf("file: NewDecider(%q): %s: a record's name must not end in %s or %s, which name the lock and temporary files beside a record: %w",
			path, target, lockExt, tmpExt, entry.ErrRefused)
	}
	return &Decider{
		name:     abs,
		path:     target,
		lockPath: target + lockExt,
		tmpPath:  target + tmpExt,
		dir:      filepath.Dir(target),
	}, nil
}

// absolute returns path made absolute against the working directory, but
// not cleaned as filepath.Abs would: cleaning takes "link/../rec" for "rec",
// where the OS follows link first and ".." climbs out of its target.
// resolve walks the components in order, as the OS does.
func absolute(path string) (string, error) {
	if filepath.IsAbs(path) {
		return path, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return wd + string(filepath.Separator) + path, nil
}

// Path returns the absolute path of the record file, with every symbolic
// link resolved: the file that is read and replaced.
func (d *Decider) Path() string { return d.path }

// String returns the Decider's URL, file:///path/to/record, of the file
// Path returns. '%', '?', '#' and control characters in the path are
// percent-encoded, so that leaderelection.OpenDecider opens the same record
// from it; the rest is left as is, to read as the path does.
func (d *Decider) String() string { return "file://" + escapePath(filepath.ToSlash(d.path)) }

// escapePath percent-encodes the bytes of p that a URL path cannot hold as
// they are: '%' starts an escape, '?' a query, '#' a fragment, and net/url
// refuses a URL with control characters.
func escapePath(p string) string {
	var b strings.Builder
	for i := range len(p) {
		switch c := p[i]; {
		case c == '%' || c == '?' || c == '#' || c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ReadCurrent implements leaderelection.RaceDecider. A missing file reads as
// entry.NoElections, a missing directory is a refusal; an empty or foreign
// file is an error wrapping entry.ErrCorruptRecord.
func (d *Decider) ReadCurrent(ctx context.Context) (*entry.RaceEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("file: read %s: %w", d.path, err)
	}
	// This also finds a directory removed since NewDecider, which must not
	// read as a missing record.
	if err := d.checkName(); err != nil {
		return nil, fmt.Errorf("file: read %s: %w", d.path, err)
	}
	data, mtime, err := readRecord(d.path)
	if errors.Is(err, fs.ErrNotExist) {
		return &entry.RaceEntry{ElectionNumber: entry.NoElections}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("file: read: %w", classify(err))
	}
	e, err := entry.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("file: record %s: %w", d.path, err)
	}
	e.Token = entry.LeaderToken{Version: version(data), CommitTime: mtime}
	return e, nil
}

// readRecord reads the file at path whole, with its modification time taken
// from the same open file, so the two always belong together. It refuses a
// file with several hard links (see checkLinks).
func readRecord(path string) ([]byte, time.Time, error) {
	// Nothing but a regular file (or a directory, refused below) is
	// opened: opening a socket fails (ENXIO), and opening a device may act
	// on it. The check after opening covers a file swapped meanwhile.
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, time.Time{}, notRegular(path, fi)
	}
	// Without blocking: opening a FIFO no one writes would hang, whatever
	// the context says.
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	if fi.IsDir() {
		return nil, time.Time{}, &fs.PathError{Op: "read", Path: path, Err: syscall.EISDIR}
	}
	if !fi.Mode().IsRegular() {
		return nil, time.Time{}, notRegular(path, fi)
	}
	if err := checkLinks(path, fi); err != nil {
		return nil, time.Time{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRecordSize+1))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxRecordSize {
		return nil, time.Time{}, fmt.Errorf("%w: %s is larger than %d bytes: not an election record",
			entry.ErrCorruptRecord, path, maxRecordSize)
	}
	return data, fi.ModTime(), nil
}

// notRegular is the error for a file that is no regular file (a FIFO, a
// socket, a device): no election record.
func notRegular(path string, fi fs.FileInfo) error {
	return fmt.Errorf("%w: %s is a %v, not a regular file", entry.ErrCorruptRecord, path, fi.Mode().Type())
}

// version is the token of a record with content data.
func version(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// WriteEntry implements leaderelection.RaceDecider.
func (d *Decider) WriteEntry(ctx context.Context, rentry *entry.RaceEntry) (entry.LeaderToken, error) {
	if err := ctx.Err(); err != nil {
		return entry.LeaderToken{}, fmt.Errorf("file: write %s: %w", d.path, err)
	}
	if rentry.WriteID == "" {
		// The token is derived from the content; only the write id keeps
		// two records with equal fields from sharing one.
		return entry.LeaderToken{}, fmt.Errorf("file: write %s: %w: the record has no WriteID", d.path, entry.ErrRefused)
	}
	body, err := entry.Marshal(rentry)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("file: write %s: %w", d.path, err)
	}
	unlock, err := d.lock(ctx)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("file: write %s: locking %s: %w", d.path, d.lockPath, classify(err))
	}
	defer unlock()
	// Checked under the lock, right before the record is compared.
	if err := d.checkName(); err != nil {
		return entry.LeaderToken{}, fmt.Errorf("file: write %s: %w", d.path, err)
	}

	cur := ""
	switch data, _, err := readRecord(d.path); {
	case err == nil:
		cur = version(data)
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, entry.ErrCorruptRecord):
		// Too large to be a record, or not a regular file: no token can
		// match it.
		cur = "foreign"
	default:
		return entry.LeaderToken{}, fmt.Errorf("file: write: reading the current record: %w", classify(err))
	}
	if cur != rentry.Token.Version {
		return entry.LeaderToken{}, fmt.Errorf("file: write %s conditioned on version %q, stored version %q: %w",
			d.path, rentry.Token.Version, cur, entry.ErrRaceLost)
	}
	// The lock may have taken a while: a write whose caller has given up
	// must not be applied.
	if err := ctx.Err(); err != nil {
		return entry.LeaderToken{}, fmt.Errorf("file: write %s: %w", d.path, err)
	}
	mtime, err := d.replace(body)
	if err != nil {
		return entry.LeaderToken{}, fmt.Errorf("file: write %s: %w", d.path, err)
	}
	return entry.LeaderToken{Version: version(body), CommitTime: mtime}, nil
}

// replace writes body to the temporary file, flushes it and renames it over
// the record. It is called with the lock held, so no other writer uses the
// temporary file; one left by a writer that died is removed first (it may
// belong to another user, whom we could not truncate it for). Errors up to
// the rename are classified: the record is untouched (but for a rename that
// finds its source gone, which classify leaves unknown).
func (d *Decider) replace(body []byte) (time.Time, error) {
	if err := os.Remove(d.tmpPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, classify(err)
	}
	f, err := os.OpenFile(d.tmpPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return time.Time{}, classify(err)
	}
	mtime, err := writeAndSync(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(d.tmpPath, d.path)
	}
	if err != nil {
		_ = os.Remove(d.tmpPath)
		return time.Time{}, classify(err)
	}
	// The record has been replaced: from here on an error leaves the outcome
	// unknown (it may not survive a power loss), which the engine resolves
	// by reading back.
	return mtime, syncDir(d.dir)
}

func writeAndSync(f *os.File, body []byte) (time.Time, error) {
	if _, err := f.Write(body); err != nil {
		return time.Time{}, err
	}
	if err := f.Sync(); err != nil {
		return time.Time{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// syncDir flushes the directory entry of a rename to disk. Filesystems that
// cannot sync a directory say so with EINVAL; nothing more can be done there.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, errNotSupported) {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
