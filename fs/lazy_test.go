package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/entry"
)

// fakeLazy is a tree of directories of one level, counting its listings;
// viewFree records whether every listing ran with the view free.
type fakeLazy struct {
	root *Root

	mu     sync.Mutex
	names  []string
	hidden []string
	fail   error

	lists    atomic.Int64
	viewHeld atomic.Bool
	// hold, when set, makes Dirs say it began (entered) and wait for it.
	hold, entered chan struct{}
}

func (f *fakeLazy) Depth() int { return 1 }

func (f *fakeLazy) Dirs(ctx context.Context, dir string) ([]string, error) {
	f.lists.Add(1)
	if f.root.view.TryLock() {
		f.root.view.Unlock()
	} else {
		f.viewHeld.Store(true)
	}
	f.mu.Lock()
	names, fail, hold := slices.Clone(f.names), f.fail, f.hold
	f.mu.Unlock()
	if hold != nil {
		f.entered <- struct{}{}
		<-hold
	}
	return names, fail
}

func (f *fakeLazy) Has(dir, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return dir == "" && slices.Contains(f.hidden, name)
}

func (f *fakeLazy) Files(ctx context.Context, dir string) ([]entry.Entry, error) {
	return []entry.Entry{ent(dir+"f", `"1"`, 1)}, nil
}

func newLazyRoot(t *testing.T, lim LazyLimits, names ...string) (*Root, *fakeLazy) {
	t.Helper()
	root := NewRoot(nil, nil, DefaultAttr(), slog.New(slog.DiscardHandler))
	gofs.NewNodeFS(root, &gofs.Options{RootStableAttr: &gofs.StableAttr{Ino: RootIno}})
	f := &fakeLazy{root: root, names: names}
	root.SetLazy(f, lim)
	return root, f
}

// lookup is a LOOKUP as the kernel sends it: under the view's read lock,
// which viewGuard holds for it.
func lookup(r *Root, name string) syscall.Errno {
	r.view.RLock()
	defer r.view.RUnlock()
	_, errno := r.Lookup(context.Background(), name, &fuse.EntryOut{})
	return errno
}

// Lookups of names a directory does not hold are answered from its
// listing: any number of them cost one listing an interval, made with
// the view free, so that a refresh never waits on the store behind
// them; a listed name and a hidden one (Has) are found.
func TestLazyAbsentNamesCostOneListing(t *testing.T) {
	root, f := newLazyRoot(t, LazyLimits{}, "a", "b")
	f.hidden = []string{"h"}
	for i := range 100 {
		if errno := lookup(root, fmt.Sprintf("absent-%d", i)); errno != syscall.ENOENT {
			t.Fatalf("absent name %d: %v, want ENOENT", i, errno)
		}
	}
	if n := f.lists.Load(); n != 1 {
		t.Errorf("100 absent names listed the directory %d times, want once", n)
	}
	for _, name := range []string{"a", "b", "h"} {
		if errno := lookup(root, name); errno != 0 {
			t.Errorf("%s: %v", name, errno)
		}
	}
	if f.viewHeld.Load() {
		t.Errorf("a listing ran with the view held")
	}
	// A name made since shows once the interval has passed.
	f.mu.Lock()
	f.names = append(f.names, "late")
	f.mu.Unlock()
	if errno := lookup(root, "late"); errno != syscall.ENOENT {
		t.Errorf("a name made since, within the interval: %v, want ENOENT from the listing", errno)
	}
	root.lazySt.Relisted() // the interval has passed
	if errno := lookup(root, "late"); errno != 0 {
		t.Errorf("a name made since, after the interval: %v", errno)
	}
	if n := f.lists.Load(); n != 2 {
		t.Errorf("%d listings, want 2", n)
	}
}

// A relisting that fails (a refresh's, one 500 from the store) keeps the
// last good listing: the directory never answers EIO for it.
func TestLazyFailedRelistingKeepsTheListing(t *testing.T) {
	root, f := newLazyRoot(t, LazyLimits{}, "a")
	if errno := lookup(root, "a"); errno != 0 {
		t.Fatal(errno)
	}
	f.mu.Lock()
	f.fail = errors.New("injected 500")
	f.mu.Unlock()
	root.Relist()
	if errno := root.Opendir(context.Background()); errno != 0 {
		t.Errorf("opendir after a failed relisting: %v", errno)
	}
	if errno := lookup(root, "a"); errno != 0 {
		t.Errorf("a listed name after a failed relisting: %v", errno)
	}
	if n := f.lists.Load(); n != 2 {
		t.Errorf("%d listings, want 2 (the first, the failed relisting)", n)
	}
	// A first listing that fails does answer EIO.
	root2, f2 := newLazyRoot(t, LazyLimits{}, "a")
	f2.fail = errors.New("injected 500")
	if errno := lookup(root2, "a"); errno != syscall.EIO {
		t.Errorf("a first listing that failed: %v, want EIO", errno)
	}
}

// The directories of a tree are bounded in all: a listing that would
// pass the bound is refused whole.
func TestLazyDirectoriesAreBounded(t *testing.T) {
	var names []string
	for i := range 11 {
		names = append(names, fmt.Sprint(i))
	}
	root, _ := newLazyRoot(t, LazyLimits{MaxDirs: 10}, names...)
	if errno := lookup(root, "0"); errno != syscall.EIO {
		t.Errorf("a listing of 11 directories with a bound of 10: %v, want EIO", errno)
	}
	if n := len(root.Children()); n != 0 {
		t.Errorf("%d directories shown, want none", n)
	}
	root, _ = newLazyRoot(t, LazyLimits{MaxDirs: 10}, names[:10]...)
	if errno := lookup(root, "9"); errno != 0 {
		t.Errorf("a listing of 10 directories with a bound of 10: %v", errno)
	}
}

// A refresh's Relist while a listing is in flight (begun before the
// store changed) is not lost: the next use lists again.
func TestLazyRelistDuringAListing(t *testing.T) {
	root, f := newLazyRoot(t, LazyLimits{}, "a")
	if errno := lookup(root, "a"); errno != 0 {
		t.Fatal(errno)
	}
	root.Relist()
	hold := make(chan struct{})
	f.mu.Lock()
	f.hold, f.entered = hold, make(chan struct{})
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { root.Opendir(context.Background()); close(done) }()
	<-f.entered // the listing of "a" alone is in flight
	f.mu.Lock()
	f.names = append(f.names, "late")
	f.hold = nil
	f.mu.Unlock()
	root.Relist() // the refresh that saw "late"
	close(hold)
	<-done
	if errno := root.Opendir(context.Background()); errno != 0 {
		t.Fatal(errno)
	}
	if root.GetChild("late") == nil {
		t.Errorf("the relisting asked for during a listing in flight was lost: late is not shown (%d listings)", f.lists.Load())
	}
}

// A lazy directory costs at most DirBytes, the memory bound's figure,
// with names of 255 bytes below parents of 255-byte names (a depth-3
// path of about 770 bytes, the longest a repository mount makes).
func TestLazyDirBytes(t *testing.T) {
	const n = 20000
	long := func(prefix string, i int) string {
		s := fmt.Sprintf("%s%06d", prefix, i)
		return s + strings.Repeat("x", 255-len(s))
	}
	names := make([]string, n)
	for i := range names {
		names[i] = long("d", i)
	}
	root, _ := newLazyRoot(t, LazyLimits{MaxDirs: n + 1}, "p")
	if errno := lookup(root, "p"); errno != 0 {
		t.Fatal(errno)
	}
	in := root.GetChild("p")
	ld := in.Operations().(*lazyDir)
	dir := long("p", 0) + "/" + long("q", 0) + "/" // as deep as a shard's parent
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := root.addLazyDirs(&ld.Inode, dir, 3, names); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d B of heap a directory of a 255-byte name at depth 3", per)
	if per > DirBytes {
		t.Errorf("%d B of heap a directory, more than DirBytes (%d)", per, DirBytes)
	}
	runtime.KeepAlive(names)
	if got := len(ld.Children()); got != n {
		t.Errorf("%d directories added, want %d", got, n)
	}
	runtime.KeepAlive(root)
}
