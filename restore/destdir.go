package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/segfs/segfs/dirfd"
	"golang.org/x/sys/unix"
)

// destDir is DEST_DIR of a restore, held open: every name below it is
// reached from this one descriptor, a component at a time, and no
// component is ever a followed symlink. A restore often runs as root
// into a directory its service user owns; that user can rename and
// replace anything below DEST_DIR at any moment, so a path string
// checked once says nothing about where the next operation on it lands.
//
// What it keeps true:
//   - Each operation walks from the held descriptor again (openat with
//     O_NOFOLLOW|O_DIRECTORY per directory, then one *at call on the last
//     component, which is never followed either): no directory
//     descriptor is kept between operations, so a directory swapped for a
//     link between two of them fails the second (errSwapped) instead of
//     being written through, and nothing is written outside DEST_DIR.
//   - Names are '/'-separated and relative ("." is DEST_DIR); a name
//     with an empty, "." or ".." component is refused, never resolved.
//
// Its methods may be called concurrently: they share only the held
// descriptor, which no call moves (listings read through a descriptor of
// their own).
type destDir struct {
	f    *os.File // DEST_DIR, O_RDONLY|O_DIRECTORY; also the restore's flock
	path string   // DEST_DIR where its symlinks lead, for messages
}

// errSwapped is the error of an operation that met a symlink or a
// non-directory where a directory of DEST_DIR was: something below
// DEST_DIR changed during the restore.
var errSwapped = errors.New("not a directory: it is a symbolic link or another file, which segfs restore never follows (did something change it during the restore?)")

// openDestDir opens the directory at path, which must not be a symlink
// itself (the caller resolved it).
func openDestDir(p string) (*destDir, error) {
	fd, err := dirfd.Openat(unix.AT_FDCWD, p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			err = errSwapped
		}
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return &destDir{f: os.NewFile(uintptr(fd), p), path: p}, nil
}

// Close closes the held descriptor (and so drops its flock).
func (d *destDir) Close() error { return d.f.Close() }

// fd is the held descriptor.
func (d *destDir) fd() int { return int(d.f.Fd()) }

// display is name as a path for messages.
func (d *destDir) display(name string) string {
	return filepath.Join(d.path, filepath.FromSlash(name))
}

// splitName checks name and returns its directory components and its base.
func splitName(name string) (dirs []string, base string, err error) {
	if name == "." || name == "" {
		return nil, ".", nil
	}
	parts := strings.Split(name, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, "", fmt.Errorf("%q: not a name below DEST_DIR", name)
		}
	}
	return parts[:len(parts)-1], parts[len(parts)-1], nil
}

// walkTo opens the directory dirs names below DEST_DIR, creating those
// missing with mode 0755 when create is set. The caller closes the
// descriptor; with no dirs it is a new descriptor of DEST_DIR.
func (d *destDir) walkTo(dirs []string, create bool) (int, error) {
	fd, err := dirfd.Openat(d.fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: d.path, Err: err}
	}
	for i, c := range dirs {
		next, err := dirfd.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = dirfd.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				err = errSwapped
			}
			return -1, &fs.PathError{Op: "open", Path: d.display(path.Join(dirs[:i+1]...)), Err: err}
		}
		fd = next
	}
	return fd, nil
}

// at runs op on the directory holding name and name's base; the
// directories on the way are created first when create is set.
func (d *destDir) at(name string, create bool, op func(dfd int, base string) error) error {
	dirs, base, err := splitName(name)
	if err != nil {
		return err
	}
	if base == "." {
		return fmt.Errorf("%s: DEST_DIR itself is not a file", d.path)
	}
	dfd, err := d.walkTo(dirs, create)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return op(dfd, base)
}

// OpenFile opens the file name with flags (O_NOFOLLOW is added: a link
// there fails with ELOOP), creating its directories first when flags
// hold O_CREATE.
func (d *destDir) OpenFile(name string, flags int, mode fs.FileMode) (*os.File, error) {
	var f *os.File
	err := d.at(name, flags&os.O_CREATE != 0, func(dfd int, base string) error {
		fd, err := dirfd.Openat(dfd, base, flags, uint32(mode.Perm()))
		if err != nil {
			return &fs.PathError{Op: "open", Path: d.display(name), Err: err}
		}
		f = os.NewFile(uintptr(fd), d.display(name))
		return nil
	})
	return f, err
}

// Remove removes the entry name, a file of any kind (a symlink itself,
// not what it points at); a name already gone gives an error that
// errors.Is fs.ErrNotExist.
func (d *destDir) Remove(name string) error {
	return d.at(name, false, func(dfd int, base string) error {
		if err := unix.Unlinkat(dfd, base, 0); err != nil {
			return &fs.PathError{Op: "remove", Path: d.display(name), Err: err}
		}
		return nil
	})
}

// RemoveDir removes the directory name if it is empty.
func (d *destDir) RemoveDir(name string) error {
	return d.at(name, false, func(dfd int, base string) error {
		if err := unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR); err != nil {
			return &fs.PathError{Op: "remove", Path: d.display(name), Err: err}
		}
		return nil
	})
}

// Rename renames from to to within one directory of DEST_DIR (both
// names must have the same directory): one walk, one renameat.
func (d *destDir) Rename(from, to string) error {
	if path.Dir(from) != path.Dir(to) {
		return fmt.Errorf("rename %s to %s: not in one directory", from, to)
	}
	return d.at(from, false, func(dfd int, base string) error {
		if err := unix.Renameat(dfd, base, dfd, path.Base(to)); err != nil {
			return &os.LinkError{Op: "rename", Old: d.display(from), New: d.display(to), Err: err}
		}
		return nil
	})
}

// Lstat returns what name is, a link not followed.
func (d *destDir) Lstat(name string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := d.at(name, false, func(dfd int, base string) error {
		var err error
		fi, err = statAt(dfd, base)
		if err != nil {
			return &fs.PathError{Op: "lstat", Path: d.display(name), Err: err}
		}
		return nil
	})
	return fi, err
}

// SyncDir syncs the directory name ("." for DEST_DIR).
func (d *destDir) SyncDir(name string) error {
	dirs, base, err := splitName(name)
	if err != nil {
		return err
	}
	if base != "." {
		dirs = append(dirs, base)
	}
	dfd, err := d.walkTo(dirs, false)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer unix.Close(dfd)
	if err := unix.Fsync(dfd); err != nil {
		return fmt.Errorf("sync directory %s: %w", d.display(name), err)
	}
	return nil
}

// Walk calls fn for every entry below DEST_DIR, depth first in lexical
// order, with its '/'-separated name and its type (from fstatat, never
// followed): a directory's entries come after it, unless fn returns
// fs.SkipDir for it. Directories are entered through descriptors opened
// without following links, so a swap during the walk fails it instead
// of listing what a link points at. An error from fn stops the walk and
// is returned.
func (d *destDir) Walk(fn func(name string, mode fs.FileMode) error) error {
	fd, err := d.walkTo(nil, false)
	if err != nil {
		return err
	}
	err = d.walkDir(fd, "", fn)
	unix.Close(fd)
	if errors.Is(err, fs.SkipDir) {
		return nil
	}
	return err
}

// walkDir walks the directory dfd, named prefix ("" for DEST_DIR); it
// does not close dfd.
func (d *destDir) walkDir(dfd int, prefix string, fn func(string, fs.FileMode) error) error {
	names, err := dirfd.ReadNames(dfd)
	if err != nil {
		return fmt.Errorf("list %s: %w", d.display(prefix), err)
	}
	slices.Sort(names)
	for _, n := range names {
		name := path.Join(prefix, n)
		fi, err := statAt(dfd, n)
		if errors.Is(err, unix.ENOENT) {
			continue // gone since the listing
		}
		if err != nil {
			return &fs.PathError{Op: "lstat", Path: d.display(name), Err: err}
		}
		err = fn(name, fi.Mode())
		switch {
		case errors.Is(err, fs.SkipDir) && fi.IsDir():
			continue
		case err != nil:
			return err
		case !fi.IsDir():
			continue
		}
		sub, err := dirfd.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				err = errSwapped
			}
			return &fs.PathError{Op: "open", Path: d.display(name), Err: err}
		}
		err = d.walkDir(sub, name, fn)
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// Names returns the names of the entries of the directory name ("."
// for DEST_DIR).
func (d *destDir) Names(name string) ([]string, error) {
	dirs, base, err := splitName(name)
	if err != nil {
		return nil, err
	}
	if base != "." {
		dirs = append(dirs, base)
	}
	dfd, err := d.walkTo(dirs, false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	names, err := dirfd.ReadNames(dfd)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.display(name), err)
	}
	return names, nil
}

// statAt is fstatat of name in dfd, a link not followed.
func statAt(dfd int, name string) (fs.FileInfo, error) {
	var st unix.Stat_t
	if err := dirfd.Fstatat(dfd, name, &st); err != nil {
		return nil, err
	}
	return statInfo{name: name, st: st}, nil
}

// statInfo is a unix.Stat_t as an fs.FileInfo.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (s statInfo) Name() string { return s.name }
func (s statInfo) Size() int64  { return s.st.Size }
func (s statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	}
	return m
}
func (s statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s statInfo) Sys() any           { return &s.st }
