package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/segfs/segfs/dirfd"
	"golang.org/x/sys/unix"
)

// The cache directory is segfs's own, and only that.
//
// Open accepts a directory only if it is a real directory (not a
// symlink), owned by the user segfs runs as, not writable by group or
// others, and either empty or segfs's: its lock file holds the marker,
// or (a directory made by a segfs from before the marker) it holds an
// empty lock file and nothing but the names segfs makes. Anything else
// is refused with a DirError before anything in it is touched, so a
// mistyped --cache-dir, or a symlink planted where one is expected,
// cannot make segfs remove a stranger's files.
//
// From then on every file is named relative to the descriptor of a
// directory checked this way, one path component at a time, and opened,
// created, renamed or removed without following a symlink: openat with
// O_NOFOLLOW, fstatat with AT_SYMLINK_NOFOLLOW, unlinkat and renameat
// (which never follow the last component). So neither a symlink in the
// directory nor a rename of a directory above it after Open can lead
// segfs elsewhere. And segfs removes only the names it makes: part,
// whole-object and seal files in the fan-out directories (a directory
// in their place only if it is empty), its own temporary files in tmp/.
// Whatever else is there is left alone and logged.

// marker is the content of DIR/lock that makes a directory segfs's. A
// segfs that finds other content there refuses the directory, so a
// change of layout changes the marker.
const marker = "segfs cache directory, layout 1: segfs removes only the files it made here\n"

const (
	lockName  = "lock"
	tmpName   = "tmp"
	lostFound = "lost+found" // the root of a file system given to the cache
	tmpSlot   = 256          // the slot of tmp/; slots 0 to 255 are the fan-out directories
	tempExt   = ".tmp"
)

// Sentinels of refused directories, besides ErrUnsafeDir and ErrInUse.
var (
	// ErrNotCacheDir: the directory holds files and is not a segfs cache
	// (no marker, and names segfs does not make).
	ErrNotCacheDir = errors.New("not a segfs cache directory")
)

// DirError is Open's error about the cache directory itself: refused
// (Err is ErrUnsafeDir, ErrNotCacheDir or ErrInUse), or not usable (Err
// is the system's error). Reason says what is wrong, and what to do, in
// words for one line.
type DirError struct {
	Dir    string // absolute path
	Reason string
	Err    error
}

func (e *DirError) Error() string { return "cache dir " + e.Dir + ": " + e.Reason }
func (e *DirError) Unwrap() error { return e.Err }

func refuse(dir string, sentinel error, format string, args ...any) *DirError {
	return &DirError{Dir: dir, Reason: fmt.Sprintf(format, args...), Err: sentinel}
}

func dirFailed(dir, what string, err error) *DirError {
	return &DirError{Dir: dir, Reason: what + ": " + err.Error(), Err: err}
}

// dirs is the cache directory held open: its descriptor, the locked lock
// file, and the descriptors of its subdirectories. All methods may be
// called concurrently, close excepted.
type dirs struct {
	// Immutable after openDirs.
	path string   // absolute, for messages
	fd   int      // DIR itself
	lock *os.File // DIR/lock, flocked; closing it drops the lock

	// fds[slot] is the descriptor of subdirectory slot (tmp/ or a fan-out
	// directory), -1 until first used. Stored under mu, loaded without.
	// At most 257 stay open: opening a part is then one openat of one
	// path component, with nothing above it to resolve.
	fds    [tmpSlot + 1]atomic.Int32
	warned [tmpSlot + 1]atomic.Bool // a subdirectory found unusable was logged

	mu sync.Mutex
	// retired holds descriptors of subdirectories removed under a running
	// cache and replaced; calls may still use them, so close closes them.
	retired []int // guarded by mu
}

// slotName is the name of subdirectory slot in DIR.
func slotName(slot int) string {
	if slot == tmpSlot {
		return tmpName
	}
	const hexDigits = "0123456789abcdef"
	return string([]byte{hexDigits[slot>>4], hexDigits[slot&15]})
}

// isSlotName reports whether name is a fan-out directory's name.
func isSlotName(name string) bool {
	if len(name) != 2 {
		return false
	}
	for _, c := range []byte(name) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// openDirs checks the cache directory at path (absolute), making it 0700
// if it does not exist, locks it, marks it as segfs's and sweeps its
// temporary files. A refusal is a *DirError, returned before anything in
// the directory was created, changed or removed.
func openDirs(path string, log *slog.Logger) (_ *dirs, err error) {
	d := &dirs{path: path, fd: -1}
	for i := range d.fds {
		d.fds[i].Store(-1)
	}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.fd, err = openTop(path); err != nil {
		return nil, err
	}
	if err := checkTop(d.fd, path); err != nil {
		return nil, err
	}
	marked, foreign, err := survey(d.fd, path)
	if err != nil {
		return nil, err
	}
	if d.lock, err = lockAt(d.fd, path); err != nil {
		return nil, err
	}
	if !marked {
		if err := writeMarker(d.lock); err != nil {
			return nil, dirFailed(path, "write the marker to lock", err)
		}
	}
	if len(foreign) > 0 {
		log.Warn("cache: the cache directory holds entries segfs did not make; they are left alone",
			"dir", path, "entries", len(foreign), "names", sample(foreign))
	}
	tmp, err := d.dir(tmpSlot, true)
	if err != nil {
		return nil, dirFailed(path, "tmp", err)
	}
	if err := sweep(tmp, filepath.Join(path, tmpName), log); err != nil {
		return nil, dirFailed(path, "sweep tmp", err)
	}
	return d, nil
}

// openTop opens the cache directory, not following a symlink, after
// making it (0700, and its missing parents) if it does not exist.
func openTop(path string) (int, error) {
	fd, err := openPath(path)
	if err == unix.ENOENT {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return -1, dirFailed(path, "create", err)
		}
		if err := unix.Mkdir(path, 0o700); err != nil && err != unix.EEXIST {
			return -1, dirFailed(path, "create", err)
		}
		fd, err = openPath(path)
	}
	if err == unix.ENOTDIR || err == unix.ELOOP {
		// O_NOFOLLOW|O_DIRECTORY: ENOTDIR for a symlink as for a file.
		var st unix.Stat_t
		if unix.Lstat(path, &st) == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return -1, refuse(path, ErrUnsafeDir, "is a symlink; give a real directory")
			}
			return -1, refuse(path, ErrUnsafeDir, "is %s, not a directory", kind(st.Mode))
		}
	}
	if err != nil {
		return -1, dirFailed(path, "open", err)
	}
	return fd, nil
}

func openPath(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// checkTop refuses a directory of another user, or one that group or
// others may write in: they could plant files there.
func checkTop(fd int, path string) error {
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		return dirFailed(path, "stat", err)
	}
	if euid := os.Geteuid(); int(st.Uid) != euid {
		return refuse(path, ErrUnsafeDir, "is owned by uid %d, not by the user segfs runs as (uid %d); give a directory of your own", st.Uid, euid)
	}
	if perm := os.FileMode(st.Mode).Perm(); perm&0o022 != 0 {
		return refuse(path, ErrUnsafeDir, "mode %v lets group or others write in it; chmod go-w it or give another directory", perm)
	}
	return nil
}

// survey looks at the cache directory's entries, changing nothing, and
// refuses it unless it is empty or segfs's. marked reports that its lock
// file holds the marker; foreign lists the entries of a marked directory
// that segfs does not make.
func survey(fd int, path string) (marked bool, foreign []string, err error) {
	names, err := dirfd.ReadNames(fd)
	if err != nil {
		return false, nil, dirFailed(path, "list", err)
	}
	slices.Sort(names)
	var legacy bool // an empty lock: made by a segfs from before the marker
	var ours []string
	for _, name := range names {
		var st unix.Stat_t
		if err := dirfd.Fstatat(fd, name, &st); err == unix.ENOENT {
			continue
		} else if err != nil {
			return false, nil, dirFailed(path, "stat "+name, err)
		}
		typ := st.Mode & unix.S_IFMT
		switch {
		case name == lockName:
			if typ != unix.S_IFREG {
				return false, nil, refuse(path, ErrUnsafeDir, "%s is %s, not segfs's lock file; remove it or give another directory", name, kind(st.Mode))
			}
			content, err := readLock(fd)
			if err != nil {
				return false, nil, dirFailed(path, "read lock", err)
			}
			switch content {
			case marker:
				marked = true
			case "":
				legacy = true
			default:
				foreign = append(foreign, name)
			}
		case name == tmpName:
			if typ != unix.S_IFDIR {
				return false, nil, refuse(path, ErrUnsafeDir, "%s is %s, not segfs's temporary directory; remove it or give another directory", name, kind(st.Mode))
			}
			ours = append(ours, name)
		case isSlotName(name) && typ == unix.S_IFDIR:
			ours = append(ours, name)
		case name == lostFound && typ == unix.S_IFDIR:
			// fsck's, on a file system given whole to the cache.
		default:
			foreign = append(foreign, name)
		}
	}
	switch {
	case marked:
		return true, foreign, nil
	case len(foreign) == 0 && (legacy || len(ours) == 0):
		return false, nil, nil
	case len(foreign) == 0:
		foreign = ours // segfs makes lock first: without it these are not segfs's
	}
	return false, nil, refuse(path, ErrNotCacheDir, "is not empty and not a segfs cache directory (it holds %s); give an empty or new directory", sample(foreign))
}

// readLock returns the start of DIR/lock's content: enough to tell the
// marker from anything else.
func readLock(dfd int) (string, error) {
	fd, err := dirfd.Openat(dfd, lockName, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", fmt.Errorf("lock is %s", kind(st.Mode))
	}
	b := make([]byte, min(st.Size, int64(len(marker))+1))
	if err := preadFull(fd, b, 0); err != nil {
		return "", err
	}
	return string(b), nil
}

// lockAt opens DIR/lock, making it 0600 if missing, and takes an
// exclusive flock on it. The kernel drops the lock when the process
// dies, so a killed process leaves no stale lock.
func lockAt(dfd int, path string) (*os.File, error) {
	fd, err := dirfd.Openat(dfd, lockName, unix.O_RDWR|unix.O_CREAT|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, dirFailed(path, "open lock", err)
	}
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, dirFailed(path, "stat lock", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, refuse(path, ErrUnsafeDir, "lock is %s, not segfs's lock file; remove it or give another directory", kind(st.Mode))
	}
	// O_NONBLOCK only kept a FIFO from blocking the open.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, dirFailed(path, "open lock", err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(path, lockName))
	for {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, refuse(path, ErrInUse, "in use by another segfs")
		}
		return nil, dirFailed(path, "lock", err)
	}
	return f, nil
}

// writeMarker makes the locked lock file hold the marker. No fsync: a
// lock emptied by a power loss is still accepted, as a directory of a
// segfs from before the marker, while nothing but segfs's names is there.
func writeMarker(lock *os.File) error {
	if _, err := lock.WriteAt([]byte(marker), 0); err != nil {
		return err
	}
	return lock.Truncate(int64(len(marker)))
}

// sweep removes the temporary files a crash left in tmp/: the entries
// named as tempName names them, directories excepted. It leaves and logs
// everything else.
func sweep(tmpFd int, tmpPath string, log *slog.Logger) error {
	names, err := dirfd.ReadNames(tmpFd)
	if err != nil {
		return err
	}
	var removed int
	var left []string
	for _, name := range names {
		var st unix.Stat_t
		if !isTempName(name) || dirfd.Fstatat(tmpFd, name, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			left = append(left, name)
			continue
		}
		if err := unix.Unlinkat(tmpFd, name, 0); err != nil && err != unix.ENOENT {
			return fmt.Errorf("remove %s: %w", name, err)
		}
		removed++
	}
	if removed > 0 {
		log.Info("cache: removed temporary files left by an earlier run", "dir", tmpPath, "files", removed)
	}
	if len(left) > 0 {
		slices.Sort(left)
		log.Warn("cache: tmp holds entries segfs did not make; they are left alone", "dir", tmpPath, "entries", len(left), "names", sample(left))
	}
	return nil
}

// tempName returns a new temporary file's name for id: the first 16 hex
// digits of id and a number that does not repeat within the Cache's life
// (and the lock keeps other Caches out), then ".tmp".
func (c *Cache) tempName(id partID) string {
	return fmt.Sprintf("%s.%d%s", id.String()[:16], c.tmpSeq.Add(1), tempExt)
}

// isTempName reports whether name is one tempName makes, alone or with
// the seal suffix (a seal being written).
func isTempName(name string) bool {
	name = strings.TrimSuffix(name, sealSuffix)
	rest, ok := strings.CutSuffix(name, tempExt)
	if !ok {
		return false
	}
	id, seq, ok := strings.Cut(rest, ".")
	if !ok || len(id) != 16 || seq == "" {
		return false
	}
	for _, c := range []byte(id) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	for _, c := range []byte(seq) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// dir returns the descriptor of subdirectory slot, opening it on first
// use; with create, a missing one is made 0700. A name there that is not
// a directory (a symlink, a file) is an error: ENOTDIR.
func (d *dirs) dir(slot int, create bool) (int, error) {
	if fd := d.fds[slot].Load(); fd >= 0 {
		return int(fd), nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.openLocked(slot, create)
}

func (d *dirs) openLocked(slot int, create bool) (int, error) {
	if fd := d.fds[slot].Load(); fd >= 0 {
		return int(fd), nil
	}
	name := slotName(slot)
	fd, err := dirfd.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err == unix.ENOENT && create {
		if err = unix.Mkdirat(d.fd, name, 0o700); err == nil || err == unix.EEXIST {
			fd, err = dirfd.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		}
	}
	if err != nil {
		return -1, err
	}
	d.fds[slot].Store(int32(fd))
	return fd, nil
}

// renew replaces stale, the descriptor of subdirectory slot, if that
// directory has been removed (by hand, under a running cache), making it
// anew, and returns the descriptor to use from then on: stale itself if
// its directory is still there.
func (d *dirs) renew(slot, stale int) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur := int(d.fds[slot].Load()); cur != stale && cur >= 0 {
		return cur, nil // renewed by another call
	}
	var st unix.Stat_t
	if err := fstat(stale, &st); err != nil || st.Nlink > 0 {
		return stale, err
	}
	d.retired = append(d.retired, stale)
	d.fds[slot].Store(-1)
	return d.openLocked(slot, true)
}

// warnOnce reports whether an unusable subdirectory slot is to be logged:
// the first time only.
func (d *dirs) warnOnce(slot int) bool { return d.warned[slot].CompareAndSwap(false, true) }

// close closes every descriptor and so releases the lock.
func (d *dirs) close() error {
	for i := range d.fds {
		if fd := d.fds[i].Load(); fd >= 0 {
			unix.Close(int(fd))
		}
	}
	for _, fd := range d.retired {
		unix.Close(fd)
	}
	if d.fd >= 0 {
		unix.Close(d.fd)
	}
	if d.lock != nil {
		return d.lock.Close()
	}
	return nil
}

// removeName removes the entry name of the directory dfd: a file of any
// kind, or a directory only if it is empty, never with what is in it. A
// name already gone is no error.
func removeName(dfd int, name string) error {
	err := unix.Unlinkat(dfd, name, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
	}
	if err == unix.ENOENT {
		return nil
	}
	return err
}

// kind names a file type for messages.
func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "a symlink"
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	default:
		return "a device"
	}
}

// sample quotes up to three names, for messages.
func sample(names []string) string {
	const most = 3
	q := make([]string, 0, most)
	for _, n := range names[:min(len(names), most)] {
		q = append(q, fmt.Sprintf("%q", n))
	}
	s := strings.Join(q, ", ")
	if len(names) > most {
		s += fmt.Sprintf(" and %d more", len(names)-most)
	}
	return s
}
