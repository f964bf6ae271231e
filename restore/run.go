package restore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sys/unix"

	"github.com/segfs/segfs/directio"
	"github.com/segfs/segfs/dirfd"
	"github.com/segfs/segfs/reader"
)

// restorer runs the pieces of a restore. Its counters and sum are
// guarded by mu; each file's state by the file's own lock.
type restorer struct {
	rd       *reader.Reader
	partSize int64
	level    Level
	dd       *destDir
	log      *slog.Logger
	bar      *progressbar.ProgressBar // nil off a terminal
	files    int                      // files to restore, for the bar
	space    spaceRule
	above    []string // directories above DEST_DIR holding one that MkdirAll made

	directBytes atomic.Int64 // bytes written with O_DIRECT

	mu       sync.Mutex
	finished int             // files renamed into place or failed
	dirs     map[string]bool // directories below DEST_DIR a file was renamed into, and those above them ("." is DEST_DIR)
	sum      *Summary
	// pending is what the temporary files being written still lack, in
	// bytes: the space they will take beyond what they take now.
	pending int64
}

// run fetches and writes the files' pieces, smallest files first, with at
// most workers goroutines, each holding one buffer of the part size, and
// returns once all of them have returned. Files it could not finish,
// because ctx ended, have their temporary files removed.
func (r *restorer) run(ctx context.Context, files []*File, workers int) {
	whole := func(f *File) bool { return f.entry.Inline != nil || f.entry.Table != nil || f.size == 0 }
	npieces := 0
	for _, f := range files {
		f.left = 1
		if !whole(f) {
			f.left = int((f.size + r.partSize - 1) / r.partSize) // f.size <= fetcher.MaxObjectSize (Plan)
		}
		npieces += f.left
	}
	// The pieces are handed out from a cursor (a file and an offset), in
	// order: a list of them would grow with the shard, not the flags.
	var mu sync.Mutex
	fi, off := 0, int64(0)
	nextPiece := func() (piece, bool) {
		mu.Lock()
		defer mu.Unlock()
		if fi >= len(files) {
			return piece{}, false
		}
		f := files[fi]
		p := piece{f, off, f.size - off}
		if !whole(f) {
			p.n = min(r.partSize, f.size-off)
		}
		if off += p.n; off >= f.size {
			fi, off = fi+1, 0
		}
		return p, true
	}
	var wg sync.WaitGroup
	for range min(workers, npieces) {
		wg.Go(func() {
			buf := make([]byte, r.partSize)
			for ctx.Err() == nil {
				p, ok := nextPiece()
				if !ok {
					return
				}
				r.pieceDone(ctx, p, r.write(ctx, p, buf), buf)
			}
		})
	}
	wg.Wait()
	for _, f := range files {
		f.mu.Lock()
		if f.f != nil && !f.done {
			r.discard(f)
		}
		f.mu.Unlock()
	}
}

// write fetches piece p through buf and writes it at its offset into the
// file's temporary file, which the file's first piece creates.
func (r *restorer) write(ctx context.Context, p piece, buf []byte) error {
	f := p.f
	out, err := r.tempFile(f)
	if err != nil {
		return err
	}
	if f.entry.Inline != nil {
		if _, err := out.WriteAt(f.entry.Inline, 0); err != nil {
			return fmt.Errorf("write %s: %w", r.dd.display(f.temp), err)
		}
		r.wrote(f, len(f.entry.Inline))
		r.progress(len(f.entry.Inline))
		return nil
	}
	h := r.rd.Open(f.entry, reader.Place{}, true)
	defer h.Close()
	for off, end := p.off, p.off+p.n; off < end; {
		data, release, err := h.Read(ctx, buf[:min(int64(len(buf)), end-off)], off)
		if err == nil && len(data) == 0 {
			err = fmt.Errorf("the source's file ends at %d of %d bytes", off, f.size)
		}
		if err != nil {
			if release != nil {
				release()
			}
			return fmt.Errorf("fetch: %w", err)
		}
		err = r.writeAt(f, out, data, off)
		if release != nil {
			release()
		}
		if err != nil {
			return fmt.Errorf("write %s at %d: %w", r.dd.display(f.temp), off, err)
		}
		r.wrote(f, len(data))
		r.progress(len(data))
		off += int64(len(data))
	}
	return nil
}

// tempFile returns f's temporary file, creating it (and the directories
// above it) for the first piece: an earlier run's is replaced. A file
// that failed already gives its error, and its later pieces do nothing.
func (r *restorer) tempFile(f *File) (*os.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if f.f != nil {
		return f.f, nil
	}
	f.start = time.Now()
	if err := r.reserve(f); err != nil {
		return nil, err
	}
	// Through the held DEST_DIR (destDir): whatever appeared below it
	// since its check, nothing is written through a link, and nothing
	// outside it.
	// An earlier run's temporary file is unlinked, not truncated: a
	// file linked there from elsewhere is left as it is, and the new one
	// is restore's own (O_EXCL).
	if err := r.dd.Remove(f.temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.unreserve(f)
		return nil, err
	}
	out, err := r.dd.OpenFile(f.temp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		r.unreserve(f)
		return nil, err
	}
	f.f, f.created = out, true
	// Whole parts go to the disk with O_DIRECT: from the part's own
	// buffer, with no copy into the page cache and no writeback of it
	// at the fsync, which on this path is what bounds a restore
	// (docs/BENCH.md). A file system that refuses it is written through
	// the page cache.
	// Opened through the descriptor, not the name: the same inode,
	// whatever happens to the name meanwhile.
	if d, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", out.Fd()), os.O_WRONLY|syscall.O_DIRECT, 0); err == nil {
		f.direct = d
	}
	return out, nil
}

// writeAt writes data at off into f's temporary file: the whole
// aligned blocks through the O_DIRECT descriptor when offset and
// buffer allow it, the rest (a file's tail) through the page cache.
func (r *restorer) writeAt(f *File, out *os.File, data []byte, off int64) error {
	if n := directio.Prefix(data, off); f.direct != nil && n > 0 {
		w, err := f.direct.WriteAt(data[:n], off)
		if err != nil && !errors.Is(err, syscall.EINVAL) {
			return err
		}
		r.directBytes.Add(int64(w))
		data, off = data[w:], off+int64(w)
	}
	if len(data) == 0 {
		return nil
	}
	_, err := out.WriteAt(data, off)
	return err
}

// pieceDone records a piece's outcome; the file's last one seals it (or
// gives it up) on this goroutine, with buf for a deep check.
func (r *restorer) pieceDone(ctx context.Context, p piece, err error, buf []byte) {
	f := p.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil && f.err == nil {
		f.err, f.interrupted = err, ctx.Err() != nil
	}
	if f.left--; f.left > 0 {
		return
	}
	if f.err == nil {
		f.err = r.seal(ctx, f, buf)
		f.interrupted = f.err != nil && ctx.Err() != nil
	}
	if f.err != nil {
		r.giveUp(f)
		return
	}
	f.done = true
	r.unreserve(f)
	r.restored(f)
}

// giveUp removes the temporary file of f, which failed, and counts it
// failed unless an interrupt is what failed it: those are not restored,
// not failed. A failure first recorded after the interrupt is taken as
// its casualty, whatever the error says (not every path keeps the
// context's error). f.mu is held.
func (r *restorer) giveUp(f *File) {
	r.discard(f)
	if !f.interrupted && !errors.Is(f.err, context.Canceled) {
		r.failed(f)
	}
}

// seal checks f's complete temporary file at the verify level, gives it
// the object's modification time, syncs it and renames it into place.
// f.mu is held.
func (r *restorer) seal(ctx context.Context, f *File, buf []byte) error {
	fi, err := f.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != f.size {
		return fmt.Errorf("wrote %d bytes, the file has %d", fi.Size(), f.size)
	}
	if err := checkRestored(ctx, f, f.f, r.level, buf); err != nil {
		return err
	}
	if mt := f.entry.Obj.ModTime; !mt.IsZero() {
		if err := futimens(f.f, mt); err != nil {
			return fmt.Errorf("set the modification time of %s: %w", r.dd.display(f.temp), err)
		}
	}
	if f.direct != nil {
		if err := f.direct.Close(); err != nil {
			return fmt.Errorf("close %s: %w", r.dd.display(f.temp), err)
		}
		f.direct = nil
	}
	if err := f.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", r.dd.display(f.temp), err)
	}
	err = f.f.Close()
	f.f = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", r.dd.display(f.temp), err)
	}
	return r.dd.Rename(f.temp, f.entry.Name)
}

// discard closes and removes f's temporary file, if it has one: it is
// not complete, or failed its check. f.mu is held.
func (r *restorer) discard(f *File) {
	f.done = true
	r.unreserve(f)
	if f.direct != nil {
		f.direct.Close()
		f.direct = nil
	}
	if f.f != nil {
		f.f.Close()
		f.f = nil
	}
	if !f.created {
		return
	}
	if err := r.dd.Remove(f.temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Warn("could not remove a temporary file; the next restore replaces it", "file", r.dd.display(f.temp), "err", err)
	}
}

// progress counts n bytes written.
func (r *restorer) progress(n int) {
	if r.bar != nil {
		r.bar.Add(n)
	}
}

// restored counts f as renamed into place, and its directories as to
// be synced.
func (r *restorer) restored(f *File) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum.Restored++
	r.sum.RestoredBytes += f.size
	r.markDirs(f)

	r.fileEnded()
	if r.bar == nil {
		r.log.Info("restored", "file", f.entry.Name, "size", f.size, "took", time.Since(f.start).Round(time.Millisecond))
	}
}

// failed counts f as failed.
func (r *restorer) failed(f *File) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum.Failed = append(r.sum.Failed, Failed{f.entry.Name, f.err})
	r.fileEnded()
	if r.bar == nil {
		r.log.Warn("restore failed", "file", f.entry.Name, "err", f.err)
	}
}

// fileEnded moves the bar's count of files on. r.mu is held.
func (r *restorer) fileEnded() {
	r.finished++
	if r.bar != nil {
		r.bar.Describe(fmt.Sprintf("%d/%d files", r.finished, r.files))
	}
}

// syncDirs syncs every directory a file was renamed into, and those
// above it up to DEST_DIR and the directories above DEST_DIR that hold
// one restore created, so the renames outlast a crash.
func (r *restorer) syncDirs() error {
	r.mu.Lock()
	dirs := make([]string, 0, len(r.dirs))
	for d := range r.dirs {
		dirs = append(dirs, d)
	}
	r.mu.Unlock()
	sort.Strings(dirs)
	var errs []error
	for _, d := range dirs {
		if err := r.dd.SyncDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range r.above {
		if err := syncDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncDir syncs the directory at dir, a path above DEST_DIR.
func syncDir(dir string) error {
	fd, err := dirfd.Openat(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// markDirs records the directories from f's up to DEST_DIR for the
// final sync. r.mu is held, or r is not yet shared.
func (r *restorer) markDirs(f *File) {
	for d := path.Dir(f.entry.Name); !r.dirs[d]; d = path.Dir(d) {
		r.dirs[d] = true
		if d == "." {
			break
		}
	}
}

// futimens sets f's access and modification times to t, to the
// nanosecond, through its descriptor: utimensat with a NULL path, as
// the C library's futimens is (the package's UtimesNanoAt needs a name).
func futimens(f *os.File, t time.Time) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, f.Fd(), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
