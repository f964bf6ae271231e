package fs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/reader"
)

// Lazy resolves the directories of a repository mount as they are first
// used (issue 37), so that a mount of thousands of shards starts in the
// time of a listing and holds only the shards looked up. The tree has
// Depth levels of directories: a directory above that level holds
// directories only (Dirs), one at it holds files (Files). All methods
// may be called concurrently, for different directories.
type Lazy interface {
	Depth() int
	// Dirs returns the names of the directories in dir ("" for the
	// root, else "a/" or "a/b/"), a directory above Depth.
	Dirs(ctx context.Context, dir string) ([]string, error)
	// Has reports whether dir holds the directory name, which its Dirs
	// did not list (made since, or not listable).
	Has(ctx context.Context, dir, name string) (bool, error)
	// Files returns the files of dir, a directory at Depth, each named
	// dir + its name.
	Files(ctx context.Context, dir string) ([]entry.Entry, error)
}

// DirCounters are the reads of one shard's directory of a repository
// mount: a set per shard shown, so at most --max-shards of them.
type DirCounters struct {
	Reads, ReadBytes, ReadErrors atomic.Int64
}

func (c *DirCounters) count(n int, err error) {
	c.Reads.Add(1)
	c.ReadBytes.Add(int64(n))
	if err != nil {
		c.ReadErrors.Add(1)
	}
}

// DirReads returns the read counters of each shard directory a
// repository mount shows, by its path ("uuid/0/").
func (r *Root) DirReads() map[string]*DirCounters {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.dirReads)
}

// Relist makes every lazy directory of directories listed so far list
// again at its next use (a refresh of a repository mount): names new in
// the store show; none goes (a shard's own files follow its commits).
func (r *Root) Relist() {
	if r.lazy == nil {
		return
	}
	var walk func(in *gofs.Inode, st *lazyState, depth int)
	walk = func(in *gofs.Inode, st *lazyState, depth int) {
		if depth >= r.lazy.Depth() {
			return
		}
		st.mu.Lock()
		st.done = false
		st.mu.Unlock()
		for _, child := range in.Children() {
			if ld, ok := child.Operations().(*lazyDir); ok {
				walk(&ld.Inode, &ld.st, ld.depth)
			}
		}
	}
	walk(&r.Inode, &r.lazySt, 0)
}

// lazyRetry is how long a directory that failed to resolve answers EIO
// before its next use tries again; lazyTimeout bounds one resolution,
// which no caller's interrupt cuts short (its result serves every
// caller that waits for it).
const (
	lazyRetry   = 30 * time.Second
	lazyTimeout = 2 * time.Minute
)

// lazyState is one lazy directory's resolution.
type lazyState struct {
	mu   sync.Mutex // held while resolving: other users of the directory wait for the one resolution
	done bool
	err  error
	at   time.Time // when err was found

	// absentAt holds the names a lookup asked the store for and did not
	// find, with when (tools probe names such as .git at every call, and
	// the kernel keeps no negative entry): at most maxAbsent of them.
	absentMu sync.Mutex
	absentAt map[string]time.Time
}

// maxAbsent bounds the names a lazy directory remembers as absent.
const maxAbsent = 1024

// absent reports whether name was asked for and not found within
// lazyRetry.
func (st *lazyState) absent(name string) bool {
	st.absentMu.Lock()
	defer st.absentMu.Unlock()
	at, ok := st.absentAt[name]
	return ok && time.Since(at) < lazyRetry
}

func (st *lazyState) markAbsent(name string) {
	st.absentMu.Lock()
	defer st.absentMu.Unlock()
	if st.absentAt == nil || len(st.absentAt) >= maxAbsent {
		st.absentAt = map[string]time.Time{}
	}
	st.absentAt[name] = time.Now()
}

// lazyDir is a directory of a repository mount that lists or resolves
// its children on first use.
type lazyDir struct {
	dirNode
	root  *Root
	path  string // "a/" or "a/b/"
	depth int    // its level: the root's children are 1
	st    lazyState
}

var (
	_ = (gofs.NodeLookuper)((*lazyDir)(nil))
	_ = (gofs.NodeOpendirer)((*lazyDir)(nil))
)

// SetLazy makes the tree a repository mount's: its root and the
// directories below it are resolved by l as they are used. admit is
// asked before the files of a directory are added, with how many files
// the tree would then show; an error refuses the directory (the mount's
// bound on the shards it holds). Call before mounting, on a tree of no
// entries.
func (r *Root) SetLazy(l Lazy, admit func(files int) error) {
	r.lazy, r.admit = l, admit
}

// Lookup finds a child, resolving the directory first in a repository
// mount.
func (r *Root) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if r.lazy == nil {
		return r.dirNode.Lookup(ctx, name, out)
	}
	return r.lazyLookup(ctx, &r.Inode, &r.dirNode, "", 0, &r.lazySt, name, out)
}

// Opendir lists the root first in a repository mount.
func (r *Root) Opendir(ctx context.Context) syscall.Errno {
	if r.lazy == nil {
		return r.dirNode.Opendir(ctx)
	}
	if err := r.ensure(ctx, &r.Inode, &r.dirNode, "", 0, &r.lazySt); err != nil {
		return syscall.EIO
	}
	return 0
}

func (d *lazyDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return d.root.lazyLookup(ctx, &d.Inode, &d.dirNode, d.path, d.depth, &d.st, name, out)
}

func (d *lazyDir) Opendir(ctx context.Context) syscall.Errno {
	if err := d.root.ensure(ctx, &d.Inode, &d.dirNode, d.path, d.depth, &d.st); err != nil {
		return syscall.EIO
	}
	d.seen()
	return 0
}

// lazyLookup is Lookup in a lazy directory: resolved first (EIO if it
// cannot be), then a directory name not listed is asked for (a shard or
// an index made after the listing; a name the store did not have is
// answered from memory for lazyRetry). A child directory is not
// resolved at its own lookup: go-fuse looks up every entry of a
// READDIRPLUS, and a listing of an index must not resolve its shards.
// A shard resolves at the first lookup in it or listing of it.
func (r *Root) lazyLookup(ctx context.Context, in *gofs.Inode, dn *dirNode, dir string, depth int, st *lazyState, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if err := r.ensure(ctx, in, dn, dir, depth, st); err != nil {
		return nil, syscall.EIO
	}
	child := in.GetChild(name)
	if child == nil && depth < r.lazy.Depth() && !st.absent(name) {
		ok, err := r.lazy.Has(ctx, dir, name)
		if err != nil {
			r.log.Error("cannot look up a directory", "dir", dir+name, "err", err)
			return nil, syscall.EIO
		}
		if ok {
			r.addLazyDirs(in, dir, depth+1, []string{name})
			child = in.GetChild(name)
		} else {
			st.markAbsent(name)
		}
	}
	if child == nil {
		return nil, syscall.ENOENT
	}
	if ga, ok := child.Operations().(gofs.NodeGetattrer); ok {
		var a fuse.AttrOut
		if errno := ga.Getattr(ctx, nil, &a); errno == 0 {
			out.Attr = a.Attr
		}
	}
	if cd := dirNodeOf(child); cd != nil {
		cd.seen()
	}
	return child, 0
}

// ensure resolves the lazy directory dir (the inode in, its node dn) at
// level depth once: lists its directories, or adds its files. A failure
// is logged once and answered for lazyRetry before it is tried again.
func (r *Root) ensure(ctx context.Context, in *gofs.Inode, dn *dirNode, dir string, depth int, st *lazyState) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return nil
	}
	if st.err != nil && time.Since(st.at) < lazyRetry {
		return st.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lazyTimeout)
	defer cancel()
	var err error
	if depth < r.lazy.Depth() {
		var names []string
		if names, err = r.lazy.Dirs(ctx, dir); err == nil {
			r.addLazyDirs(in, dir, depth+1, names)
		}
	} else {
		var entries []entry.Entry
		if entries, err = r.lazy.Files(ctx, dir); err == nil {
			err = r.addFiles(dn, dir, entries)
		}
	}
	if err != nil {
		st.err, st.at = err, time.Now()
		name := dir
		if name == "" {
			name = "/"
		}
		r.log.Error("directory not shown: its lookups fail with EIO", "dir", name, "retry_after", lazyRetry, "err", err)
		return err
	}
	st.done, st.err = true, nil
	if depth == r.lazy.Depth() {
		dn.seen() // the index's open-time prefetch
	}
	return nil
}

// addLazyDirs adds the directories names below in (dir, at level
// depth-1) that it does not hold yet.
func (r *Root) addLazyDirs(in *gofs.Inode, dir string, depth int, names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		if !validDirName(name) || in.GetChild(name) != nil {
			continue
		}
		ld := &lazyDir{dirNode: dirNode{mtime: r.mountTime, attr: &r.attr}, root: r, path: dir + name + "/", depth: depth}
		in.AddChild(name, in.NewPersistentInode(context.Background(), ld, r.nextAttr(fuse.S_IFDIR)), false)
	}
}

// validDirName reports whether name can be a directory's name in the
// tree.
func validDirName(name string) bool {
	return entry.ValidName(name) && !slices.Contains([]byte(name), '/')
}

// addFiles shows entries, the files of dir (its node dn), each named
// below it, and gives the directory its model for the prefetch
// policies. Entries whose names are not below dir, or not usable, are
// skipped (Shown).
func (r *Root) addFiles(dn *dirNode, dir string, entries []entry.Entry) error {
	var ok []entry.Entry
	for _, e := range Shown(entries, r.log) {
		if len(e.Name) > len(dir) && e.Name[:len(dir)] == dir {
			ok = append(ok, e)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := *r.entries.Load()
	if r.admit != nil {
		if err := r.admit(len(cur) + len(ok)); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	dirs, places := reader.Dirs(ok)
	if r.dirReads[dir] == nil {
		if r.dirReads == nil {
			r.dirReads = map[string]*DirCounters{}
		}
		r.dirReads[dir] = &DirCounters{} // putFileLocked gives it to the files' nodes
	}
	for i, e := range ok {
		r.putFileLocked(e, places[i])
	}
	d, has := dirs[dir]
	dn.setDir(d, has, r.reader)
	// entries holds the names kept for a grace too; listed does not.
	all := slices.Concat(cur, ok)
	r.entries.Store(&all)
	r.listed = slices.Concat(r.listed, ok)
	return nil
}
