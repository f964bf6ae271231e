package fs

import (
	"log/slog"
	"path"
	"slices"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
)

func ent(name, etag string, size int64) entry.Entry {
	return entry.Entry{Name: name, Obj: fetcher.Object{Key: name, ETag: etag, Size: size}}
}

func names(es []entry.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

// treeOf returns every node of the tree by path, with its inode.
func treeOf(root *Root) map[string]*gofs.Inode {
	out := map[string]*gofs.Inode{}
	var walk func(dir string, n *gofs.Inode)
	walk = func(dir string, n *gofs.Inode) {
		out[dir] = n
		for name, child := range n.Children() {
			walk(path.Join(dir, name), child)
		}
	}
	walk("/", &root.Inode)
	return out
}

// A refresh adds, replaces and removes nodes as its change says: a new
// or changed name gets an inode number never given before, a kept name
// keeps its node, a removed name and the directories it leaves empty
// go, and a name may turn from a file into a directory.
func TestRefreshChangesTheTree(t *testing.T) {
	old := []entry.Entry{ent("idx/_0.si", `"1"`, 1), ent("idx/segments_1", `"1"`, 1), ent("gone/deep/x", `"1"`, 1), ent("f", `"1"`, 1)}
	root := NewRoot(old, nil, DefaultAttr(), slog.New(slog.DiscardHandler))
	gofs.NewNodeFS(root, &gofs.Options{RootStableAttr: &gofs.StableAttr{Ino: RootIno}})
	before := treeOf(root)
	var most uint64
	for _, n := range before {
		most = max(most, n.StableAttr().Ino)
	}
	oldNode := before["/idx/segments_1"].Operations().(*fileNode)

	now := []entry.Entry{ent("idx/_0.si", `"1"`, 1), ent("idx/segments_1", `"2"`, 2), ent("idx/_1.si", `"1"`, 1), ent("f/now-a-dir", `"1"`, 1)}
	c := root.Refresh(now)
	if len(c.Added) != 2 || len(c.Changed) != 1 || len(c.Removed) != 2 {
		t.Fatalf("change %+v; want 2 added, 1 changed, 2 removed", c)
	}
	after := treeOf(root)
	for _, p := range []string{"/gone", "/gone/deep", "/gone/deep/x"} {
		if after[p] != nil {
			t.Errorf("%s is still in the tree", p)
		}
	}
	if after["/idx/_0.si"] != before["/idx/_0.si"] {
		t.Errorf("a kept file got a new node")
	}
	for _, p := range []string{"/idx/segments_1", "/idx/_1.si", "/f", "/f/now-a-dir"} {
		n := after[p]
		if n == nil {
			t.Fatalf("%s is not in the tree: %v", p, after)
		}
		if ino := n.StableAttr().Ino; ino <= most {
			t.Errorf("%s has inode %d, given before (the last was %d)", p, ino, most)
		}
	}
	if _, ok := after["/f"].Operations().(*dirNode); !ok {
		t.Errorf("/f is %T, want a directory", after["/f"].Operations())
	}
	if got := after["/idx/segments_1"].Operations().(*fileNode).entry.Obj.ETag; got != `"2"` {
		t.Errorf("segments_1 shows ETag %s, want the new one", got)
	}
	if oldNode.entry.Obj.ETag != `"1"` {
		t.Errorf("the old node of segments_1 changed under its handles")
	}
	if got, want := names(root.Entries()), names(now); !slices.Equal(got, want) {
		t.Errorf("Entries() = %q, want %q", got, want)
	}
	s := &root.stats
	if s.Refreshes.Load() != 1 || s.FilesAdded.Load() != 2 || s.FilesChanged.Load() != 1 || s.FilesRemoved.Load() != 2 || s.ViewListed.Load() == 0 {
		t.Errorf("stats: refreshes %d, added %d, changed %d, removed %d, listed %d",
			s.Refreshes.Load(), s.FilesAdded.Load(), s.FilesChanged.Load(), s.FilesRemoved.Load(), s.ViewListed.Load())
	}

	// The same listing again changes nothing and numbers nothing.
	inos := map[string]uint64{}
	for p, n := range treeOf(root) {
		inos[p] = n.StableAttr().Ino
	}
	if c := root.Refresh(now); !c.Empty() {
		t.Errorf("the same listing again: %+v", c)
	}
	for p, n := range treeOf(root) {
		if n.StableAttr().Ino != inos[p] {
			t.Errorf("%s renumbered by an empty refresh", p)
		}
	}
	if s.Refreshes.Load() != 2 {
		t.Errorf("refreshes = %d, want 2", s.Refreshes.Load())
	}
}

// Names a newer listing drops stay in the tree for the grace, then go;
// a name back in the listing is no longer kept.
func TestRefreshKeepsRemovedNames(t *testing.T) {
	old := []entry.Entry{ent("_0.si", `"1"`, 1), ent("_0.cfs", `"1"`, 1), ent("segments_1", `"1"`, 1)}
	root := NewRoot(old, nil, DefaultAttr(), slog.New(slog.DiscardHandler))
	gofs.NewNodeFS(root, &gofs.Options{RootStableAttr: &gofs.StableAttr{Ino: RootIno}})
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	now := []entry.Entry{ent("_0.si", `"1"`, 1), ent("_1.si", `"1"`, 1), ent("segments_2", `"1"`, 1)}
	c, next := root.RefreshKeeping(now, time.Minute, t0)
	if got := names(c.Added); !slices.Equal(got, []string{"_1.si", "segments_2"}) || len(c.Removed) != 0 {
		t.Fatalf("change %+v; want _1.si and segments_2 added, nothing removed yet", c)
	}
	if !next.Equal(t0.Add(time.Minute)) {
		t.Errorf("next expiry %v, want %v", next, t0.Add(time.Minute))
	}
	tree := treeOf(root)
	for _, p := range []string{"/_0.cfs", "/segments_1", "/segments_2", "/_1.si"} {
		if tree[p] == nil {
			t.Errorf("%s is not in the tree during the grace", p)
		}
	}
	if n := root.stats.FilesKept.Load(); n != 2 {
		t.Errorf("files_kept = %d, want 2", n)
	}
	if c, _ := root.Expire(t0.Add(30 * time.Second)); !c.Empty() {
		t.Errorf("expiry within the grace: %+v", c)
	}
	// _0.cfs comes back with the next listing: kept no longer, shown.
	back := append(slices.Clone(now), ent("_0.cfs", `"1"`, 1))
	if c, _ := root.RefreshKeeping(back, time.Minute, t0.Add(40*time.Second)); !c.Empty() {
		t.Errorf("a kept name back in the listing: %+v, want no change", c)
	}
	c, next = root.Expire(t0.Add(time.Minute))
	if !slices.Equal(c.Removed, []string{"segments_1"}) || !next.IsZero() {
		t.Errorf("expiry at the end of the grace: %+v, next %v; want segments_1 removed and none left", c, next)
	}
	if treeOf(root)["/segments_1"] != nil || treeOf(root)["/_0.cfs"] == nil {
		t.Errorf("after the grace: segments_1 must be gone, _0.cfs shown")
	}
	if n := root.stats.FilesKept.Load(); n != 0 {
		t.Errorf("files_kept = %d after the grace, want 0", n)
	}
}

// blockingRaw is a RawFileSystem whose Lookup and ReadDirPlus wait until
// released, having said they began.
type blockingRaw struct {
	fuse.RawFileSystem
	in, release chan struct{}
}

func (b *blockingRaw) Lookup(<-chan struct{}, *fuse.InHeader, string, *fuse.EntryOut) fuse.Status {
	b.in <- struct{}{}
	<-b.release
	return fuse.OK
}

func (b *blockingRaw) ReadDirPlus(<-chan struct{}, *fuse.ReadIn, *fuse.DirEntryList) fuse.Status {
	b.in <- struct{}{}
	<-b.release
	return fuse.OK
}

// go-fuse records the child a Lookup returned in its parent after the
// handler: a lookup in flight during a refresh could put back a node the
// refresh took out. The guard holds the view for reading for the whole
// of LOOKUP and READDIRPLUS, and a refresh holds it for writing while it
// changes the tree, so they exclude each other.
func TestViewGuardExcludesRefreshes(t *testing.T) {
	root := NewRoot([]entry.Entry{ent("a", `"1"`, 1)}, nil, DefaultAttr(), slog.New(slog.DiscardHandler))
	gofs.NewNodeFS(root, &gofs.Options{RootStableAttr: &gofs.StableAttr{Ino: RootIno}})
	raw := &blockingRaw{in: make(chan struct{}), release: make(chan struct{})}
	g := &viewGuard{RawFileSystem: raw, view: &root.view}
	for _, op := range []func(){
		func() { g.Lookup(nil, &fuse.InHeader{}, "a", &fuse.EntryOut{}) },
		func() { g.ReadDirPlus(nil, &fuse.ReadIn{}, nil) },
	} {
		done := make(chan struct{})
		go func() { op(); close(done) }()
		<-raw.in
		if root.view.TryLock() {
			t.Fatalf("a refresh could change the tree during a guarded request")
		}
		raw.release <- struct{}{}
		<-done
		if !root.view.TryLock() {
			t.Fatalf("the view stays held after the request")
		}
		root.view.Unlock()
	}
	held := false
	root.duringChange = func() { held = !root.view.TryRLock() }
	root.Refresh([]entry.Entry{ent("b", `"1"`, 1)})
	if !held {
		t.Errorf("a refresh changes the tree without holding the view for writing")
	}
}

// A kept name below a name that is now a file goes at once: the tree
// cannot show both.
func TestRefreshDropsKeptNamesUnderANewFile(t *testing.T) {
	root := NewRoot([]entry.Entry{ent("a/b", `"1"`, 1)}, nil, DefaultAttr(), slog.New(slog.DiscardHandler))
	gofs.NewNodeFS(root, &gofs.Options{RootStableAttr: &gofs.StableAttr{Ino: RootIno}})
	root.RefreshKeeping([]entry.Entry{ent("a", `"1"`, 1)}, time.Minute, time.Now())
	if got := names(root.Entries()); !slices.Equal(got, []string{"a"}) || root.stats.FilesKept.Load() != 0 {
		t.Errorf("entries %q, %d kept; want a alone", got, root.stats.FilesKept.Load())
	}
	if _, ok := treeOf(root)["/a"].Operations().(*fileNode); !ok {
		t.Errorf("/a is not the new file")
	}
}

// A refresh gives its time to each directory whose entries it changed:
// the parent of a new directory and of a pruned one included, and to no
// other.
func TestRefreshTimesTheDirectoriesItChanges(t *testing.T) {
	root := NewRoot([]entry.Entry{ent("x/old/f", `"1"`, 1), ent("x/keep", `"1"`, 1), ent("y/z/g", `"1"`, 1)}, nil, DefaultAttr(), slog.New(slog.DiscardHandler))
	gofs.NewNodeFS(root, &gofs.Options{RootStableAttr: &gofs.StableAttr{Ino: RootIno}})
	later := time.Now().Add(time.Hour)
	root.RefreshKeeping([]entry.Entry{ent("x/keep", `"1"`, 1), ent("x/new/f", `"1"`, 1), ent("y/z/g", `"1"`, 1)}, 0, later)
	tree := treeOf(root)
	for p, want := range map[string]bool{"/x": true, "/x/new": true, "/y": false, "/y/z": false, "/": false} {
		dn := dirNodeOf(tree[p])
		dn.mu.Lock()
		got := dn.mtime.Equal(later)
		dn.mu.Unlock()
		if got != want {
			t.Errorf("%s: the refresh's time %v, want %v", p, got, want)
		}
	}
}
