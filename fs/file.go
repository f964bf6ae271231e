package fs

import (
	"context"
	"log/slog"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/fetcher"
)

// fileNode is one remote object shown as a read-only regular file: its
// bytes, or for a seekable zstd object its decompressed bytes.
type fileNode struct {
	gofs.Inode

	// Immutable after construction.
	entry  Entry
	obj    fetcher.Object // entry.Obj
	reader *Reader
	frames *FrameReader // serves entries with a seek table
	log    *slog.Logger
}

var (
	_ = (gofs.NodeGetattrer)((*fileNode)(nil))
	_ = (gofs.NodeSetattrer)((*fileNode)(nil))
	_ = (gofs.NodeOpener)((*fileNode)(nil))
	_ = (gofs.NodeReader)((*fileNode)(nil))
)

const blockSize = 4096

func (f *fileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = fuse.S_IFREG | 0o444
	out.Nlink = 1
	out.Size = uint64(f.entry.Size())
	out.Blksize = blockSize
	out.Blocks = (out.Size + 511) / 512
	out.SetTimes(nil, &f.obj.ModTime, &f.obj.ModTime)
	return 0
}

func (f *fileNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// fileHandle is one open file: it tracks the access pattern for readahead
// and keeps the object's cached parts pinned until it is released.
type fileHandle struct {
	seq    Sequence
	node   *fileNode
	closed sync.Once
}

var _ = (gofs.FileReleaser)((*fileHandle)(nil))

// Release unpins the object's parts when the kernel drops the handle.
func (h *fileHandle) Release(ctx context.Context) syscall.Errno {
	h.closed.Do(func() { h.node.reader.Closed(h.node.obj) })
	return 0
}

// Open refuses any access mode but read-only. The object is immutable for
// its ETag, so the kernel may keep its page cache across opens. With
// prefetch "open" or "all" the rest of the file is queued in the
// background.
func (f *fileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND|syscall.O_CREAT) != 0 {
		return nil, 0, syscall.EROFS
	}
	f.reader.Opened(f.obj)
	if f.reader.Prefetch() != PrefetchNone {
		f.reader.PrefetchObject(f.obj)
	}
	return &fileHandle{node: f}, fuse.FOPEN_KEEP_CACHE, 0
}

// Read serves [off, off+len(dest)) of the object, clamped to its size.
func (f *fileNode) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	var seq *Sequence
	if h, ok := fh.(*fileHandle); ok {
		seq = &h.seq
	}
	var data []byte
	var err error
	if f.entry.Table != nil {
		data, err = f.frames.ReadAt(ctx, f.entry, dest, off, seq)
	} else {
		data, err = f.reader.ReadAt(ctx, f.obj, dest, off, seq)
	}
	if err != nil {
		return nil, toErrno(f.log, "read", f.obj.Key, err)
	}
	return fuse.ReadResultData(data), 0
}
