package fs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/view"
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
	// did not list (a name a listing knows of but does not show), from
	// what the last Dirs of dir found: it makes no remote call. A name
	// made since is found by the next listing (the tree lists a
	// directory again at most once every view.RelistEvery for such
	// lookups).
	Has(dir, name string) bool
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
// It takes no lock a resolution holds: a refresh never waits on a
// lookup's remote calls.
func (r *Root) Relist() {
	if r.lazy == nil {
		return
	}
	var walk func(in *gofs.Inode, st *view.DirState, depth int)
	walk = func(in *gofs.Inode, st *view.DirState, depth int) {
		if depth >= r.lazy.Depth() {
			return
		}
		st.Invalidate()
		for _, child := range in.Children() {
			if ld, ok := child.Operations().(*lazyDir); ok {
				walk(&ld.Inode, &ld.st, ld.depth)
			}
		}
	}
	walk(&r.Inode, &r.lazySt, 0)
}

// lazyDir is a directory of a repository mount that lists or resolves
// its children on first use.
type lazyDir struct {
	dirNode
	root  *Root
	path  string // "a/" or "a/b/"
	depth int    // its level: the root's children are 1
	st    view.DirState
}

var (
	_ = (gofs.NodeLookuper)((*lazyDir)(nil))
	_ = (gofs.NodeOpendirer)((*lazyDir)(nil))
)

// LazyLimits bound what a repository mount's tree holds.
type LazyLimits struct {
	// AdmitFiles is asked before the files of a directory are added,
	// with how many files the tree would then show; an error refuses the
	// directory (the mount's bound on the shards it holds). Nil admits
	// all.
	AdmitFiles func(files int) error
	// MaxDirs bounds the directories the tree shows in all (each a node
	// that stays for the mount's life): a listing that would pass it is
	// refused whole, and its directory answers EIO. 0 means
	// DefaultMaxDirs.
	MaxDirs int
}

// DefaultMaxDirs is LazyLimits.MaxDirs unless set; DirBytes bounds one
// directory's node (its inode, its go-fuse node and its state), for the
// memory bound.
const (
	DefaultMaxDirs = 1 << 16
	DirBytes       = 2 << 10
)

// SetLazy makes the tree a repository mount's: its root and the
// directories below it are resolved by l as they are used, within lim.
// Call before mounting, on a tree of no entries.
func (r *Root) SetLazy(l Lazy, lim LazyLimits) {
	if lim.MaxDirs <= 0 {
		lim.MaxDirs = DefaultMaxDirs
	}
	r.lazy, r.admit, r.maxDirs = l, lim.AdmitFiles, lim.MaxDirs
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
	if err := r.ensure(ctx, &r.Inode, &r.dirNode, "", 0, &r.lazySt, false); err != nil {
		return syscall.EIO
	}
	return 0
}

func (d *lazyDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return d.root.lazyLookup(ctx, &d.Inode, &d.dirNode, d.path, d.depth, &d.st, name, out)
}

func (d *lazyDir) Opendir(ctx context.Context) syscall.Errno {
	if err := d.root.ensure(ctx, &d.Inode, &d.dirNode, d.path, d.depth, &d.st, false); err != nil {
		return syscall.EIO
	}
	d.seen()
	return 0
}

// lazyLookup is Lookup in a lazy directory: resolved first (EIO if it
// cannot be); a directory name it does not hold is answered from what
// it listed, the directory listed again at most once every
// view.RelistEvery
// (single flight: one listing serves every lookup waiting for it), so
// that absent names cost no remote call each. A child directory is not
// resolved at its own lookup: go-fuse looks up every entry of a
// READDIRPLUS, and a listing of an index must not resolve its shards.
// A shard resolves at the first lookup in it or listing of it.
//
// It runs under the view's read lock (viewGuard holds it for LOOKUP and
// READDIRPLUS, the only requests that look up), and releases it around
// any remote call: a refresh, which takes the view for writing, never
// waits on the store behind a lookup. What it decides after taking the
// view back it reads afresh from the tree.
func (r *Root) lazyLookup(ctx context.Context, in *gofs.Inode, dn *dirNode, dir string, depth int, st *view.DirState, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	child := in.GetChild(name)
	relist := child == nil && depth < r.lazy.Depth() && st.RelistDue(time.Now())
	if !st.Ready() || relist {
		r.view.RUnlock()
		err := r.ensure(ctx, in, dn, dir, depth, st, relist)
		r.view.RLock()
		if err != nil {
			return nil, syscall.EIO
		}
		child = in.GetChild(name)
	}
	if child == nil && depth < r.lazy.Depth() && r.lazy.Has(dir, name) {
		if err := r.addLazyDirs(in, dir, depth+1, []string{name}); err != nil {
			r.log.Error("directory not shown", "dir", dir+name, "err", err)
			return nil, syscall.EIO
		}
		child = in.GetChild(name)
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
// level depth once, by the policy of view.DirState.Resolve: lists its
// directories, or adds its files (and tells the engine the index is
// seen, for its open-time prefetch). Call with no lock of the tree
// held: it makes remote calls.
func (r *Root) ensure(ctx context.Context, in *gofs.Inode, dn *dirNode, dir string, depth int, st *view.DirState, relist bool) error {
	dirs := depth < r.lazy.Depth()
	return st.Resolve(ctx, r.log, dir, dirs, relist, func(ctx context.Context) error {
		if dirs {
			names, err := r.lazy.Dirs(ctx, dir)
			if err != nil {
				return err
			}
			return r.addLazyDirs(in, dir, depth+1, names)
		}
		entries, err := r.lazy.Files(ctx, dir)
		if err == nil {
			err = r.addFiles(dn, dir, entries)
		}
		if err == nil {
			dn.seen()
		}
		return err
	})
}

// addLazyDirs adds the directories names below in (dir, at level
// depth-1) that it does not hold yet, or none if that would pass the
// tree's bound on directories (LazyLimits.MaxDirs).
func (r *Root) addLazyDirs(in *gofs.Inode, dir string, depth int, names []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var add []string
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		if validDirName(name) && !seen[name] && in.GetChild(name) == nil {
			add = append(add, name)
		}
		seen[name] = true
	}
	if r.dirs+len(add) > r.maxDirs {
		return fmt.Errorf("%d more directories would pass the bound of %d the mount shows (%d shown)", len(add), r.maxDirs, r.dirs)
	}
	for _, name := range add {
		ld := &lazyDir{dirNode: dirNode{mtime: r.mountTime, attr: &r.attr}, root: r, path: dir + name + "/", depth: depth}
		in.AddChild(name, in.NewPersistentInode(context.Background(), ld, r.nextAttr(fuse.S_IFDIR)), false)
	}
	r.dirs += len(add)
	return nil
}

// validDirName reports whether name can be a directory's name in the
// tree.
func validDirName(name string) bool {
	return entry.ValidName(name) && !slices.Contains([]byte(name), '/')
}

// addFiles shows entries, the files of dir (its node dn), each named
// below it, and gives the directory its model for the prefetch
// policies. Entries whose names are not below dir, or not usable, are
// skipped (entry.Shown).
func (r *Root) addFiles(dn *dirNode, dir string, entries []entry.Entry) error {
	var ok []entry.Entry
	for _, e := range entry.Shown(entries, r.log) {
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
