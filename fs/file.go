package fs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/reader"
)

// fileNode is one remote object shown as a read-only regular file: its
// bytes, or for a seekable zstd object its decompressed bytes.
type fileNode struct {
	gofs.Inode

	// Constant after construction.
	entry  entry.Entry
	reader *reader.Reader
	stats  *Stats
	log    *slog.Logger
	attr   *Attr // the tree's owner and modes

	stale atomic.Bool // a read found the object changed or gone (toErrnoOnce)
	// dir counts the reads of a repository mount's shard; nil elsewhere.
	dir atomic.Pointer[DirCounters]

	// Guarded by mu: the node's place in its directory, for the prefetch
	// policies (a Refresh that changes the directory moves it), and how
	// the open handles read. The kernel refuses an open
	// in passthrough mode while the file is open in the usual mode, and
	// the other way round, so one mode holds until its last handle goes.
	mu          sync.Mutex
	place       reader.Place
	backing     *os.File // the whole-object file handed to the kernel; nil if none
	backingRefs int      // open handles in passthrough mode
	servedOpens int      // open handles whose reads segfs serves
}

var (
	_ = (gofs.NodeGetattrer)((*fileNode)(nil))
	_ = (gofs.NodeSetattrer)((*fileNode)(nil))
	_ = (gofs.NodeOpener)((*fileNode)(nil))
	_ = (gofs.NodeReader)((*fileNode)(nil))
)

const blockSize = 4096

func (f *fileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = fuse.S_IFREG | f.attr.FileMode
	out.Uid, out.Gid = f.attr.UID, f.attr.GID
	out.Nlink = 1
	out.Size = uint64(f.entry.Size())
	out.Blksize = blockSize
	out.Blocks = (out.Size + 511) / 512
	mtime := f.entry.Obj.ModTime
	out.SetTimes(nil, &mtime, &mtime)
	return 0
}

func (f *fileNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// fileHandle is one open file: the engine's handle, or for a passthrough
// open the whole-object file the kernel reads.
type fileHandle struct {
	rh      *reader.Handle
	node    *fileNode
	backing *os.File // set for a passthrough handle
	closed  sync.Once
}

var (
	_ = (gofs.FileReleaser)((*fileHandle)(nil))
	_ = (gofs.FileFlusher)((*fileHandle)(nil))
	_ = (gofs.FilePassthroughFder)((*fileHandle)(nil))
)

// Release closes the engine's handle when the kernel drops the handle,
// and drops the file's pages from the kernel's page cache if
// dropOnRelease says so. The handle stops counting as open last: go-fuse
// drops a reference to the node's passthrough backing file after every
// release, whatever the handle's mode, so an open that turned to
// passthrough while a served handle's release was still running would
// have its backing file closed under it. A small window stays, between
// this method's return and go-fuse's bookkeeping.
func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	h.closed.Do(func() {
		if h.node.dropOnRelease(h, h.rh.ReadWhole()) {
			h.node.dropPageCache()
		}
		h.node.release(h)
		h.rh.Close() // uncounts the handle: last, once the node let go of it
	})
	return 0
}

// Flush answers ENOSYS, which tells the kernel to send no FLUSH again for
// the whole mount: the tree is read-only and segfs keeps no locks, so a
// close has nothing to flush, and without it every close(2) of every file
// waits on a round trip to segfs (on a busy node, as long as a cached
// read's).
func (h *fileHandle) Flush(ctx context.Context) syscall.Errno {
	return syscall.ENOSYS
}

// PassthroughFd gives the kernel the whole-object file of a passthrough
// handle. go-fuse asks only the first handle of a file in that mode; the
// kernel holds its own reference to the file from then on.
func (h *fileHandle) PassthroughFd() (int, bool) {
	if h.backing == nil {
		return 0, false
	}
	return int(h.backing.Fd()), true
}

// acquire decides how a new handle reads: in passthrough mode if the file
// is open in that mode already, or if it is not open at all and the
// engine has its sealed whole-object file; else served by segfs.
func (f *fileNode) acquire(h *fileHandle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.backing == nil && f.servedOpens == 0 && f.reader != nil {
		f.backing, _ = f.reader.OpenWhole(f.entry)
	}
	if f.backing != nil {
		f.backingRefs++
		h.backing = f.backing
		return
	}
	f.servedOpens++
}

// placeOf returns the node's place in its directory.
func (f *fileNode) placeOf() reader.Place {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.place
}

// setPlace moves the node to p, its place in its directory's new model.
func (f *fileNode) setPlace(p reader.Place) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.place = p
}

// dropOnRelease reports whether the file's pages should go from the
// kernel's page cache when h is released (see dropPageCache): when h is
// the last handle segfs serves and its reads covered the whole file
// (readWhole, reader.Handle.ReadWhole).
func (f *fileNode) dropOnRelease(h *fileHandle, readWhole bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return h.backing == nil && f.servedOpens == 1 && readWhole
}

// release ends h's hold on the file.
func (f *fileNode) release(h *fileHandle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.backing == nil {
		f.servedOpens--
		return
	}
	if f.backingRefs--; f.backingRefs == 0 {
		f.backing.Close()
		f.backing = nil
	}
}

// dropPageCache asks the kernel to drop the file's pages from its page
// cache, once a whole read of it is done. The bytes stay in segfs's
// caches, and a later read faults them back in through segfs. A copy of a
// shard out of the mount reads each file once: keeping its pages would
// push other files' pages out, and would have the kernel take fresh
// memory for every file where it can reuse the pages of the last one
// (docs/BENCH.md has what that costs on a VM). A race with a new open
// only costs that open's reader a read through segfs.
func (f *fileNode) dropPageCache() {
	if errno := f.NotifyContent(0, 0); errno != 0 {
		// An unmount in progress, or a kernel without the notification.
		f.log.Debug("page cache of a read file not dropped", "key", f.entry.Obj.Key, "err", errno)
		return
	}
	f.stats.PageDrops.Add(1)
}

// Open refuses any access mode but read-only. With --passthrough, an
// object that has a sealed whole-object file, and is not open in the usual
// mode, is opened in passthrough mode: the kernel reads that file itself.
// Otherwise the object is immutable for its ETag, so the kernel may keep
// its page cache across opens; the engine's open runs the prefetch
// policies.
func (f *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND|syscall.O_CREAT) != 0 {
		return nil, 0, syscall.EROFS
	}
	start := time.Now()
	h := &fileHandle{node: f}
	f.acquire(h)
	h.rh = f.reader.Open(f.entry, f.placeOf(), h.backing == nil)
	if f.log.Enabled(ctx, slog.LevelDebug) {
		f.log.Debug("open", "name", f.entry.Name, "passthrough", h.backing != nil, "took", time.Since(start))
	}
	if h.backing != nil {
		return h, 0, 0 // go-fuse adds FOPEN_PASSTHROUGH
	}
	return h, fuse.FOPEN_KEEP_CACHE, 0
}

// Read serves [off, off+len(dest)) of the file, clamped to its size.
func (f *fileNode) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (res fuse.ReadResult, errno syscall.Errno) {
	defer f.recoverRead(&res, &errno, off)
	h, ok := fh.(*fileHandle)
	if !ok || h.rh == nil {
		return nil, syscall.EBADF // Open always returns a fileHandle
	}
	data, release, err := h.rh.Read(ctx, dest, off)
	if dc := f.dir.Load(); dc != nil {
		dc.count(len(data), err)
	}
	if err != nil {
		errno := toErrnoOnce(f.log, "read", f.entry.Obj.Key, err, &f.stale)
		if errno == syscall.ESTALE {
			f.stats.StaleReads.Add(1)
		}
		return nil, errno
	}
	if release != nil {
		return &partReply{data: data, release: release}, 0
	}
	return fuse.ReadResultData(data), 0
}

// recoverRead, deferred by Read, fails a read that panicked with EIO
// and logs it with its stack, so that the daemon serves on.
func (f *fileNode) recoverRead(res *fuse.ReadResult, errno *syscall.Errno, off int64) {
	if p := recover(); p != nil {
		err := fmt.Errorf("read %s at %d: %w: %v\n%s", f.entry.Obj.Key, off, reader.ErrInternal, p, debug.Stack())
		*res, *errno = nil, toErrno(f.log, "read", f.entry.Obj.Key, err)
	}
}

// partReply is a read's reply sent from a part's buffer: go-fuse writes
// Slices to the kernel as they are, with no copy, and calls Done after,
// which gives the buffer back.
type partReply struct {
	data    []byte
	release func()
	done    atomic.Bool
}

func (p *partReply) Size() int { return len(p.data) }

// Bytes copies: a caller of Bytes may call Done before it sends them.
func (p *partReply) Bytes(buf []byte) ([]byte, fuse.Status) {
	return append(buf[:0], p.data...), fuse.OK
}

func (p *partReply) Slices() ([][]byte, fuse.Status) { return [][]byte{p.data}, fuse.OK }
func (p *partReply) Readv(dst [][]byte) (int, fuse.Status) {
	n := 0
	for _, d := range dst {
		n += copy(d, p.data[n:])
	}
	return n, fuse.OK
}

// Done gives the buffer back, once however often it is called.
func (p *partReply) Done() {
	if p.done.CompareAndSwap(false, true) {
		p.release()
	}
}
