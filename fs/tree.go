package fs

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/view"
)

// Root is the root directory of a segfs mount. Build it with NewRoot and
// pass it to Mount.
type Root struct {
	dirNode

	// Constant after construction.
	mountTime time.Time // every directory's time until a refresh changes it
	reader    *reader.Reader
	log       *slog.Logger
	attr      Attr // every node points to it
	stats     Stats

	entries atomic.Pointer[[]entry.Entry] // the files shown, in listing order; replaced whole by Refresh

	// mu serialises the changes of the tree (OnAdd, Refresh) and guards
	// the rest.
	mu      sync.Mutex
	ino     uint64          // the last inode number given
	changed time.Time       // the time of the change being made: a new directory's
	listed  []entry.Entry   // the last listing applied (entries holds it and the kept names)
	grace   entry.Grace     // names a newer listing dropped, shown for a grace (RefreshKeeping)
	dirtied map[string]bool // during a change: the directories whose entries it changed

	// view is held for reading by each request that may record a child
	// in its parent (viewGuard: go-fuse records the child a Lookup
	// returned after the handler, with no lock of this tree), and for
	// writing while a refresh changes the tree, so that no lookup can
	// put back a node the change took out.
	view sync.RWMutex

	duringChange func() // test hook: run while a refresh holds view for writing; nil in production

	// A repository mount's (SetLazy; nil otherwise): set before
	// mounting.
	lazy    Lazy
	admit   func(files int) error
	maxDirs int           // LazyLimits.MaxDirs
	lazySt  view.DirState // the root's resolution
	dirs    int           // the lazy directories shown; guarded by mu
	// dirReads are the read counters of each shard directory shown, by
	// its path; guarded by mu.
	dirReads map[string]*DirCounters
}

var _ = (gofs.NodeOnAdder)((*Root)(nil))

// Attr is the owner and the permission bits that every node of a tree
// shows. Mount has the kernel check each caller against them
// (default_permissions); root bypasses them.
type Attr struct {
	UID, GID uint32
	// FileMode and DirMode are the permission bits of every file and of
	// every directory. Only read and execute bits are kept (NewRoot
	// clears the others): nothing in the tree is writable.
	FileMode, DirMode uint32
}

// DefaultAttr is what a tree shows unless told otherwise: the user who
// runs segfs owns everything, files are 0444 and directories 0555.
func DefaultAttr() Attr {
	return Attr{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), FileMode: 0o444, DirMode: 0o555}
}

// NewRoot returns the root of a tree holding entries, served by rd, whose
// nodes show attr. The entries' names become paths; every prefix ending
// in "/" becomes a directory. A name that is also a directory's, or that
// is not a clean relative path, is skipped with a warning: no key can
// escape the mount.
func NewRoot(entries []entry.Entry, rd *reader.Reader, attr Attr, log *slog.Logger) *Root {
	if log == nil {
		log = slog.Default()
	}
	attr.FileMode &= 0o555
	attr.DirMode &= 0o555
	now := time.Now()
	r := &Root{
		dirNode:   dirNode{mtime: now},
		mountTime: now,
		changed:   now,
		reader:    rd,
		log:       log,
		attr:      attr,
		ino:       RootIno,
	}
	shown := entry.Shown(entries, log)
	r.entries.Store(&shown)
	r.listed = shown
	r.dirNode.attr = &r.attr
	return r
}

// Entries returns the files the tree shows, in listing order: what the
// engine serves (reader.Reader.Serve). Keys the tree skips, and the
// hidden form of a file stored both raw and compressed, are not among
// them. After a Refresh it returns the new listing's; the slice
// returned is never changed.
func (r *Root) Entries() []entry.Entry { return *r.entries.Load() }

// Stats returns the edge's counters.
func (r *Root) Stats() *Stats { return &r.stats }

// RootIno is the root's inode number, what stat shows for the
// mountpoint: the FUSE root's node ID, as in most FUSE file systems.
// Mount sets it; go-fuse would show 0.
const RootIno = fuse.FUSE_ROOT_ID

// OnAdd builds the whole tree once, with persistent inodes. Each node
// gets its inode number here, counting up from RootIno+1 in the order
// the nodes are made (listing order): every file and directory has a
// distinct, non-zero st_ino for the mount's life (the nodes are never
// forgotten), which find, du and tar rely on to tell files apart, and
// the same one in each mount of the same listing (Refresh numbers new
// nodes on from the last). Numbers this small
// also fit the 32-bit st_ino of old binaries and a signed 64-bit one
// (go-fuse's automatic numbers start at 2^63). Two nodes must never
// share a number: go-fuse would take the second for a hard link of the
// first.
func (r *Root) OnAdd(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	entries := *r.entries.Load()
	dirs, places := reader.Dirs(entries)
	for i, e := range entries {
		r.putFileLocked(e, places[i])
	}
	for dir, d := range dirs {
		if in, _ := r.dirInode(dir, false); in != nil {
			dirNodeOf(in).setDir(d, true, r.reader)
		}
	}
}

// dirNodeOf returns the directory node of inode, the root's included.
func dirNodeOf(inode *gofs.Inode) *dirNode {
	switch n := inode.Operations().(type) {
	case *dirNode:
		return n
	case *Root:
		return &n.dirNode
	case *lazyDir:
		return &n.dirNode
	}
	return nil
}

// Seen tells the engine that every directory of the tree is seen, as a
// listing of each would: for a shard layout, whose one directory is the
// index, at mount.
func (r *Root) Seen() { r.dirNode.seen() }

// dirNode is a directory. Its children change only in OnAdd and Refresh.
type dirNode struct {
	gofs.Inode

	// Constant.
	attr *Attr // the tree's owner and modes

	// Guarded by mu: set when the tree is built, and by a Refresh that
	// changes the directory's files.
	mu     sync.Mutex
	mtime  time.Time      // the mount time, or the last refresh that changed its entries
	dir    reader.Dir     // the directory's files, for the prefetch policies
	reader *reader.Reader // told when the directory is first looked up or listed; nil if it holds no file to prefetch
}

// setDir gives the directory the model d of its files, or none when ok
// is false (it holds none to prefetch).
func (d *dirNode) setDir(dir reader.Dir, ok bool, rd *reader.Reader) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !ok {
		d.dir, d.reader = reader.Dir{}, nil
		return
	}
	d.dir, d.reader = dir, rd
}

// seen tells the engine the directory is seen, if it holds files to
// prefetch.
func (d *dirNode) seen() {
	d.mu.Lock()
	dir, rd := d.dir, d.reader
	d.mu.Unlock()
	if rd != nil {
		rd.SeenDir(dir)
	}
}

var (
	_ = (gofs.NodeOpendirer)((*dirNode)(nil))
	_ = (gofs.NodeLookuper)((*dirNode)(nil))
)

// Lookup finds a child as go-fuse would without it, and tells the engine
// when the child is a directory it sees for the first time: looking up
// an index's directory is the first step of opening it.
func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	child := d.GetChild(name)
	if child == nil {
		return nil, syscall.ENOENT
	}
	if ga, ok := child.Operations().(gofs.NodeGetattrer); ok {
		var a fuse.AttrOut
		if errno := ga.Getattr(ctx, nil, &a); errno == 0 {
			out.Attr = a.Attr
		}
	}
	if dn, ok := child.Operations().(*dirNode); ok {
		dn.seen()
	}
	return child, 0
}

// Opendir tells the engine the directory is seen: a listing of a Lucene
// index's directory is the first step of opening it (prefetch.LuceneOpen).
func (d *dirNode) Opendir(ctx context.Context) syscall.Errno {
	d.seen()
	return 0
}

var (
	_ = (gofs.NodeGetattrer)((*dirNode)(nil))
	_ = (gofs.NodeSetattrer)((*dirNode)(nil))
	_ = (gofs.NodeMkdirer)((*dirNode)(nil))
	_ = (gofs.NodeCreater)((*dirNode)(nil))
	_ = (gofs.NodeMknoder)((*dirNode)(nil))
	_ = (gofs.NodeUnlinker)((*dirNode)(nil))
	_ = (gofs.NodeRmdirer)((*dirNode)(nil))
	_ = (gofs.NodeRenamer)((*dirNode)(nil))
	_ = (gofs.NodeSymlinker)((*dirNode)(nil))
	_ = (gofs.NodeLinker)((*dirNode)(nil))
)

func (d *dirNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = fuse.S_IFDIR | d.attr.DirMode
	out.Uid, out.Gid = d.attr.UID, d.attr.GID
	out.Nlink = 2
	d.mu.Lock()
	mtime := d.mtime
	d.mu.Unlock()
	out.SetTimes(nil, &mtime, &mtime)
	return 0
}

func (d *dirNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (d *dirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (d *dirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (d *dirNode) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (d *dirNode) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (d *dirNode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (d *dirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (d *dirNode) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

// TreeBytesPerKey bounds the memory the tree takes per listed key: its
// entry, file node and inode, and the directory maps that hold them,
// for keys of up to about a hundred bytes (TestTreeMemoryPerKey measures
// it; docs/RELIABILITY.md has the figure). The mount's memory bound
// counts it once per key.
const TreeBytesPerKey = 1 << 10
