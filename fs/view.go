package fs

import (
	"context"
	"log/slog"
	"path"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/reader"
)

// Change is what a refresh did to the tree's files (entry.Change), or
// that it did nothing yet.
type Change struct {
	entry.Change

	// Deferred: the change was not made, the tree being held by a
	// lookup that resolves a directory (a repository mount); ask again.
	Deferred bool

	// Hidden counts the listing's entries the tree does not show
	// (entry.Shown): unusable names, names of directories. Warned of at
	// mount; a refresh, which may run every second, only counts them.
	Hidden int
}

// Refresh changes the tree to show entries instead of what it shows, in
// one step under the tree's lock, and returns the change: RefreshKeeping
// with no grace for removed names.
func (r *Root) Refresh(entries []entry.Entry) Change {
	c, _ := r.RefreshKeeping(entries, 0, time.Now())
	return c
}

// RefreshKeeping changes the tree to show entries, keeping each name
// that leaves the listing visible until keep after now (readers of an
// older commit still open its files), and returns the change and when
// the first kept name is due to go (zero if none is kept): call Expire
// then.
//
// A new or changed name gets a new node with a new inode number, so the
// kernel's pages and attributes of the old version are never shown for
// it; a handle open on the old node keeps reading the old version (as
// long as the store or the cache holds it: reads ask for its ETag). The
// order keeps a reader that lists the directory during the change from
// finding a commit before its files: new and changed names first, then
// the segments_N files, then the removals. The kernel is told after the
// tree changed, with no lock held (a notify may wait on the kernel,
// which may wait on a request of this tree): each removed or replaced
// name's entry is invalidated, so the next lookup comes to segfs and
// finds the new node or none. Directories left empty go too. The
// directories whose files changed get a new model for the prefetch
// policies (reader.Dirs), as a new index would.
func (r *Root) RefreshKeeping(entries []entry.Entry, keep time.Duration, now time.Time) (Change, time.Time) {
	shown := entry.Shown(entries, quiet)
	c, next := r.apply(func([]entry.Entry) []entry.Entry { return shown }, keep, now)
	c.Hidden = len(entries) - len(shown)
	r.stats.Refreshes.Add(1)
	r.stats.ViewListed.Store(now.UnixNano())
	return c, next
}

// RefreshWith is RefreshKeeping of the listing update makes of the last
// one applied, which it is given under the tree's locks: a repository
// mount's refresh replaces the files of the shards that have a newer
// commit and keeps the rest as they are, those of a shard resolved
// since it asked the store included.
func (r *Root) RefreshWith(update func(listed []entry.Entry) []entry.Entry, keep time.Duration, now time.Time) (Change, time.Time) {
	var hidden int
	c, next := r.apply(func(listed []entry.Entry) []entry.Entry {
		entries := update(listed)
		shown := entry.Shown(entries, quiet)
		hidden = len(entries) - len(shown)
		return shown
	}, keep, now)
	if c.Deferred {
		return c, next
	}
	c.Hidden = hidden
	r.stats.Refreshes.Add(1)
	r.stats.ViewListed.Store(now.UnixNano())
	return c, next
}

// Listed returns the last listing applied (Entries without the names
// kept for a grace).
func (r *Root) Listed() []entry.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listed
}

// Expire removes the kept names whose time is up at now, and returns
// when the next one is due (zero if none is kept).
func (r *Root) Expire(now time.Time) (Change, time.Time) {
	return r.apply(func(listed []entry.Entry) []entry.Entry { return listed }, 0, now)
}

// apply makes the tree show the listing listing gives (as Shown returns
// it; it is given the last one applied) and the names kept from earlier
// listings, dropping those due at now; names leaving the listing are
// kept until keep after now. It holds the view for writing, then mu
// (the order of a repository mount's lookups, which add a shard's files
// under mu inside the view's read lock), for the whole change.
func (r *Root) apply(listing func(listed []entry.Entry) []entry.Entry, keep time.Duration, now time.Time) (Change, time.Time) {
	if !r.lockView() {
		return Change{Deferred: true}, now.Add(viewWait)
	}
	r.mu.Lock()
	shown := listing(r.listed)
	r.changed = now
	old := *r.entries.Load()
	visible, next := r.grace.Apply(old, shown, keep, now)
	r.listed = shown
	r.stats.FilesKept.Store(int64(r.grace.Len()))
	c := Change{Change: entry.Diff(old, visible)}
	if c.Empty() {
		r.entries.Store(&visible) // the same versions; keep the newer listing's times
		r.mu.Unlock()
		r.view.Unlock()
		return c, next
	}
	touched := make(map[string]bool)
	fresh := make(map[string]bool, len(c.Added)+len(c.Changed))
	for _, e := range append(c.Added[:len(c.Added):len(c.Added)], c.Changed...) {
		fresh[e.Name] = true
		touched[dirOf(e.Name)] = true
	}
	for _, name := range c.Removed {
		touched[dirOf(name)] = true
	}
	var notes []func() syscall.Errno
	r.dirtied = make(map[string]bool, len(touched))
	for dir := range touched {
		r.dirtied[dir] = true
	}
	// The prefetch model holds the listing's files: the kept ones are a
	// commit's that readers are leaving, not one to open.
	vdirs, placeAt := r.model(shown)
	// New and changed names, each commit point (segments_N) last.
	add := func(commits bool) {
		for _, e := range visible {
			if fresh[e.Name] && isCommit(e.Name) == commits {
				notes = append(notes, r.putFileLocked(e, placeAt[e.Name])...)
			}
		}
	}
	add(false)
	add(true)
	for _, e := range visible {
		if !fresh[e.Name] && touched[dirOf(e.Name)] {
			if n := r.fileNodeAt(e.Name); n != nil {
				n.setPlace(placeAt[e.Name])
			}
		}
	}
	for _, name := range c.Removed {
		dir, base := path.Split(name)
		parent, _ := r.dirInode(dir, false)
		if parent == nil {
			continue
		}
		child := parent.GetChild(base)
		if child == nil {
			continue
		}
		if _, ok := child.Operations().(*fileNode); !ok {
			continue // a directory of the new listing took the name
		}
		notes = append(notes, removeLocked(parent, base, child))
		notes = append(notes, r.pruneEmpty(parent, dir)...)
	}
	for dir := range touched {
		if in, _ := r.dirInode(dir, false); in != nil {
			if dn := dirNodeOf(in); dn != nil {
				d, ok := vdirs[dir]
				dn.setDir(d, ok, r.reader)
			}
		}
	}
	// Each directory whose entries changed takes now as its time, and the
	// kernel's attributes of it go.
	for dir := range r.dirtied {
		if in, _ := r.dirInode(dir, false); in != nil {
			if dn := dirNodeOf(in); dn != nil {
				dn.mu.Lock()
				dn.mtime = now
				dn.mu.Unlock()
				notes = append(notes, func() syscall.Errno { return in.NotifyContent(0, 0) })
			}
		}
	}
	r.dirtied = nil
	r.entries.Store(&visible)
	if r.duringChange != nil {
		r.duringChange()
	}
	r.mu.Unlock()
	r.view.Unlock()

	r.stats.FilesAdded.Add(int64(len(c.Added)))
	r.stats.FilesChanged.Add(int64(len(c.Changed)))
	r.stats.FilesRemoved.Add(int64(len(c.Removed)))
	r.notify(notes)
	return c, next
}

// viewWait is how long a repository mount's change waits for the view.
// It never waits as a writer: a writer waiting on a sync.RWMutex blocks
// new readers. A lookup holds the view for reading only while it reads
// or changes the tree, never across a call to the store (lazyLookup
// releases it), so the view is free within moments unless lookups keep
// it held without a gap for all of viewWait; then the change is
// deferred to the next refresh.
const viewWait = time.Second

// lockView locks the view for writing and reports whether it did: at
// once as a writer in a mount of one listing (whose lookups are quick),
// by TryLock for viewWait in a repository mount, which defers the
// change (Change.Deferred) when a lookup holds it that long.
func (r *Root) lockView() bool {
	if r.lazy == nil {
		r.view.Lock()
		return true
	}
	deadline := time.Now().Add(viewWait)
	for !r.view.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// notify sends the kernel's notes, with no lock held.
func (r *Root) notify(notes []func() syscall.Errno) {
	for _, note := range notes {
		// ENOENT: the kernel held no entry for the name, nothing to drop;
		// ENOSYS: not mounted.
		if errno := note(); errno != 0 && errno != syscall.ENOENT && errno != syscall.ENOSYS {
			r.log.Warn("the kernel's entry of a changed name was not invalidated: it may show the old one until its timeout", "err", errno)
		}
	}
}

// model builds the prefetch policies' model of the files of a listing:
// the directories, and each file's place by name.
func (r *Root) model(files []entry.Entry) (map[string]reader.Dir, map[string]reader.Place) {
	dirs, places := reader.Dirs(files)
	at := make(map[string]reader.Place, len(files))
	for i, e := range files {
		at[e.Name] = places[i]
	}
	return dirs, at
}

// putFileLocked shows e at its name with a new node, in place of what
// the name held, and returns the kernel's notes. r.mu must be held.
func (r *Root) putFileLocked(e entry.Entry, place reader.Place) []func() syscall.Errno {
	dir, base := path.Split(e.Name)
	parent, notes := r.dirInode(dir, true)
	node := &fileNode{entry: e, reader: r.reader, stats: &r.stats, log: r.log, attr: &r.attr, place: place}
	if dc := r.dirReads[dir]; dc != nil {
		node.dir.Store(dc) // a repository mount's shard: its read counters
	}
	prev := parent.GetChild(base)
	parent.AddChild(base, parent.NewPersistentInode(context.Background(), node, r.nextAttr(fuse.S_IFREG)), true)
	if prev != nil {
		forgetTree(prev) // a directory that a file replaces goes whole
		notes = append(notes, func() syscall.Errno { return parent.NotifyEntry(base) })
	}
	return notes
}

// removeLocked takes child, at name in parent, out of the tree, and
// returns the kernel's note. The node and its subtree are no longer
// persistent: go-fuse drops them once the kernel forgets them, and a
// handle open on one keeps reading its version until it closes.
func removeLocked(parent *gofs.Inode, name string, child *gofs.Inode) func() syscall.Errno {
	parent.RmChild(name)
	forgetTree(child)
	return func() syscall.Errno { return parent.NotifyDelete(name, child) }
}

// forgetTree makes in and every node below it non-persistent.
func forgetTree(in *gofs.Inode) {
	for _, child := range in.Children() {
		forgetTree(child)
	}
	in.ForgetPersistent()
}

// dirty records that the entries of directory dir ("" or "a/b/") change.
// r.mu must be held.
func (r *Root) dirty(dir string) {
	if r.dirtied != nil {
		r.dirtied[dir] = true
	}
}

// quiet is the logger of what a refresh would warn of at every interval.
var quiet = slog.New(slog.DiscardHandler)

// isCommit reports whether name is a Lucene commit point: what a reader
// opens first, so it must not appear before the files it names.
func isCommit(name string) bool {
	return strings.HasPrefix(path.Base(name), "segments_")
}

// dirOf is the directory of name as path.Split gives it ("" for the
// root, else "a/b/").
func dirOf(name string) string {
	dir, _ := path.Split(name)
	return dir
}

// dirInode returns the inode of directory dir ("" or "a/b/"), made
// with its parents when create is set; nil if it does not exist. A file
// in the way of a directory made is removed first (it left the listing:
// a listing never holds a name as both), with the kernel's note for it.
// r.mu must be held.
func (r *Root) dirInode(dir string, create bool) (*gofs.Inode, []func() syscall.Errno) {
	var notes []func() syscall.Errno
	in, at := &r.Inode, ""
	for _, name := range strings.Split(strings.TrimSuffix(dir, "/"), "/") {
		if name == "" {
			continue
		}
		child := in.GetChild(name)
		if child != nil && dirNodeOf(child) == nil {
			if !create {
				return nil, notes
			}
			notes = append(notes, removeLocked(in, name, child))
			child = nil
		}
		if child == nil {
			if !create {
				return nil, notes
			}
			child = in.NewPersistentInode(context.Background(), &dirNode{mtime: r.changed, attr: &r.attr}, r.nextAttr(fuse.S_IFDIR))
			in.AddChild(name, child, false)
			r.dirty(at)
		}
		in, at = child, at+name+"/"
	}
	return in, notes
}

// fileNodeAt returns the file node shown at name, nil if none. r.mu
// must be held.
func (r *Root) fileNodeAt(name string) *fileNode {
	dir, base := path.Split(name)
	parent, _ := r.dirInode(dir, false)
	if parent == nil {
		return nil
	}
	child := parent.GetChild(base)
	if child == nil {
		return nil
	}
	n, _ := child.Operations().(*fileNode)
	return n
}

// pruneEmpty removes dir (the inode in) and each parent of it that the
// removal leaves empty, the root excepted, and returns the kernel's
// notes for them. r.mu must be held.
func (r *Root) pruneEmpty(in *gofs.Inode, dir string) []func() syscall.Errno {
	var notes []func() syscall.Errno
	for dir != "" && len(in.Children()) == 0 {
		parentDir, base := path.Split(strings.TrimSuffix(dir, "/"))
		parent, _ := r.dirInode(parentDir, false)
		if parent == nil {
			break
		}
		notes = append(notes, removeLocked(parent, base, in))
		r.dirty(parentDir)
		in, dir = parent, parentDir
	}
	return notes
}

// nextAttr numbers a new node: one more than the last number given.
// Numbers are never given twice, so a new version is never taken for a
// hard link of the old one (go-fuse matches nodes by number). r.mu must
// be held, or the tree not yet mounted.
func (r *Root) nextAttr(mode uint32) gofs.StableAttr {
	r.ino++
	return gofs.StableAttr{Mode: mode, Ino: r.ino}
}
