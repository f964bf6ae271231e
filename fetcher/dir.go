package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// DirStore is a Store over a local directory, created by Open for file://
// sources. Objects are the regular files below the directory; symbolic
// links and other special files are not listed, and no path may leave the
// directory. An object's ETag is derived from its inode, size and
// modification time, so a rewrite or replacement of a file is seen as a
// change (a rewrite that keeps all three is not). All methods may be
// called concurrently.
type DirStore struct {
	// Immutable after construction.
	src  Source
	root *os.Root // the directory, opened once; confines every access

	counters *Counters // atomic; Config.Counters or its own
}

var _ Store = (*DirStore)(nil)

// openDir opens src.Dir, which must be an existing directory.
func openDir(src Source, cfg Config) (*DirStore, error) {
	fi, err := os.Stat(src.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", src)
	}
	root, err := os.OpenRoot(src.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	counters := cfg.Counters
	if counters == nil {
		counters = new(Counters)
	}
	return &DirStore{src: src, root: root, counters: counters}, nil
}

// List implements Store: a recursive walk that lists regular files only.
// Files that vanish during the walk are skipped; any other error fails
// the listing.
func (d *DirStore) List(ctx context.Context) ([]Object, error) {
	d.counters.Lists.Add(1)
	var objs []Object
	err := fs.WalkDir(d.root.FS(), ".", func(key string, de fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && key != "." {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !de.Type().IsRegular() {
			return nil // directories are walked; links and devices are not objects
		}
		fi, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		objs = append(objs, fileObject(key, fi))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: list: %w", d.src, err)
	}
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return objs, nil
}

// Stat implements Store. A key that is not a regular file (or not a valid
// key, such as one with ".." elements) is not found.
func (d *DirStore) Stat(ctx context.Context, key string) (Object, error) {
	d.counters.Stats.Add(1)
	if err := checkKey(key); err != nil {
		return Object{}, fmt.Errorf("file stat %s: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return Object{}, fmt.Errorf("file stat %s: %w", key, err)
	}
	fi, err := d.root.Lstat(key)
	if err != nil {
		return Object{}, fmt.Errorf("file stat %s: %w", key, fileError(err))
	}
	if !fi.Mode().IsRegular() {
		return Object{}, fmt.Errorf("file stat %s: not a regular file: %w", key, ErrNotFound)
	}
	return fileObject(key, fi), nil
}

// ReadRange implements Store. It checks the file's identity against
// obj.ETag before and after reading, so bytes of a file that was replaced
// or changed (in size or modification time) during the read are never
// returned as data. p is not retained.
func (d *DirStore) ReadRange(ctx context.Context, obj Object, off int64, p []byte) error {
	err := d.readRange(ctx, obj, off, p)
	if err == nil {
		return nil
	}
	d.counters.ReadErrors.Add(1)
	if errors.Is(err, ErrChanged) {
		d.counters.Changed.Add(1)
	}
	return fmt.Errorf("file get %s [%d,%d): %w", obj.Key, off, off+int64(len(p)), err)
}

func (d *DirStore) readRange(ctx context.Context, obj Object, off int64, p []byte) error {
	if off < 0 || off+int64(len(p)) > obj.Size {
		return fmt.Errorf("range outside object of size %d", obj.Size)
	}
	if err := checkKey(obj.Key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// One "GET": timed from the open to the end of the read, however it
	// ends. ReadAt delivers its bytes at once, so the first byte is timed
	// when it returns any.
	d.counters.Gets.Add(1)
	start := time.Now()
	defer d.counters.GetTime.Since(start)
	f, err := d.root.Open(obj.Key)
	if err != nil {
		return fileError(err)
	}
	defer f.Close()
	if err := sameFile(f, obj); err != nil {
		return err
	}
	n, rerr := f.ReadAt(p, off)
	if n > 0 {
		d.counters.GetFirstByte.Since(start)
	}
	d.counters.GetBytes.Add(int64(n))
	// Check identity again before judging the read: a file truncated
	// during the read is a change, not a short read.
	if err := sameFile(f, obj); err != nil {
		return err
	}
	if n < len(p) {
		if rerr == nil || errors.Is(rerr, io.EOF) {
			rerr = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("short read, %d of %d bytes: %w", n, len(p), rerr)
	}
	return nil
}

// sameFile checks that the open file f is still the object obj.
func sameFile(f *os.File, obj Object) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: no longer a regular file", ErrChanged)
	}
	if etag := fileETag(fi); etag != obj.ETag {
		return fmt.Errorf("%w: identity %s, want %s", ErrChanged, etag, obj.ETag)
	}
	return nil
}

// Counters implements Store.
func (d *DirStore) Counters() *Counters { return d.counters }

// String implements Store: the source URL.
func (d *DirStore) String() string { return d.src.String() }

// fileObject builds the Object for the regular file at key.
func fileObject(key string, fi fs.FileInfo) Object {
	return Object{Key: key, Size: fi.Size(), ETag: fileETag(fi), ModTime: fi.ModTime()}
}

// fileETag derives a file's identity from its inode, size and modification
// time in nanoseconds.
func fileETag(fi fs.FileInfo) string {
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	return fmt.Sprintf("%x-%x-%x", ino, fi.Size(), fi.ModTime().UnixNano())
}

// ErrBadKey marks a key refused before any request: one no store of
// segfs sends (checkKey). Its errors wrap ErrNotFound as well, since no
// object can be read by such a key; a caller that must tell a refusal
// from a missing object tests for ErrBadKey. It is never retried.
var ErrBadKey = errors.New("key refused")

// checkKey refuses a key (or a key prefix) that is not a clean relative
// path, as a listing's usable keys are: empty, absolute, with a trailing
// slash, with an empty, "." or ".." element, or holding a NUL. A server
// may resolve dot elements and collapse empty ones in a request's path,
// and so serve another object than the key names; a local directory
// would leave the root. The error wraps ErrBadKey and ErrNotFound.
func checkKey(key string) error {
	if key == "." || !fs.ValidPath(key) || strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("%w: %q is not a clean relative path (%w)", ErrBadKey, key, ErrNotFound)
	}
	return nil
}

// fileError wraps a failed open or stat with ErrNotFound when the file,
// or a directory on its path, does not exist.
func fileError(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}
