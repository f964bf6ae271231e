package follow

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/segfs/segfs/entry"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/restore"
	"github.com/segfs/segfs/tests/leakcheck"
	"github.com/segfs/segfs/view"
)

// plainMount is a plain view of dir, a tree showing its files and the
// Reader behind it, closed with the test.
func plainMount(t *testing.T, dir string) (view.View, *segfs.Root, *reader.Reader) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	v, err := view.Open(ctx, view.Spec{Source: "file://" + dir, Layout: "plain", Shard: -1, Metadata: "newest", Snapshot: "newest"},
		view.Options{Parallel: 2, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := v.Files(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	sched := prefetch.New(prefetch.Config{Workers: 2})
	rd, err := reader.New(v.Store(), restore.DiscardCache{}, sched, reader.Config{PartSize: 64 << 10, Prefetch: prefetch.None, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rd.Close()
		sched.Close()
	})
	root := segfs.NewRoot(entries, rd, segfs.DefaultAttr(), log)
	// The node tree go-fuse builds at a mount (OnAdd), without one: a
	// refresh adds and drops its nodes.
	gofs.NewNodeFS(root, &gofs.Options{RootStableAttr: &gofs.StableAttr{Ino: segfs.RootIno}})
	return v, root, rd
}

// failingView is a view whose Next fails while fail is set, as a store
// that cannot be listed does.
type failingView struct {
	view.View
	fail atomic.Bool
}

func (v *failingView) Next(ctx context.Context, listed []entry.Entry) (*view.Update, error) {
	if v.fail.Load() {
		return nil, errors.New("the store cannot be listed")
	}
	return v.View.Next(ctx, listed)
}

// shown maps the tree's file names to their sizes.
func shown(root *segfs.Root) map[string]int64 {
	m := map[string]int64{}
	for _, e := range root.Entries() {
		m[e.Name] = e.Size()
	}
	return m
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func write(t *testing.T, dir, name string, size int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A refresh asked for at once (SIGHUP) adds, changes and drops files in
// one step; one that cannot list the store keeps the view and is
// counted; the next one that can applies what changed meanwhile. Close
// leaves no goroutine.
func TestRefresherFollowsStore(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { leakcheck.Settle(t, before, 5*time.Second) })
	dir := t.TempDir()
	write(t, dir, "a", 10)
	write(t, dir, "b", 20)
	write(t, dir, "c", 30)
	v, root, rd := plainMount(t, dir)
	fv := &failingView{View: v}
	var keys []int
	r := Start(Config{View: fv, Root: root, Reader: rd, Relisted: func(n int) { keys = append(keys, n) }, Log: slog.New(slog.DiscardHandler)})
	defer r.Close()

	write(t, dir, "b", 25) // another version
	write(t, dir, "d", 40)
	if err := os.Remove(filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	r.Now()
	st := root.Stats()
	waitFor(t, "the first refresh", func() bool { return st.Refreshes.Load() == 1 })
	want := map[string]int64{"a": 10, "b": 25, "d": 40}
	if got := shown(root); !maps.Equal(got, want) {
		t.Errorf("after a refresh the tree shows %v, want %v", got, want)
	}
	if st.FilesAdded.Load() != 1 || st.FilesChanged.Load() != 1 || st.FilesRemoved.Load() != 1 {
		t.Errorf("added %d, changed %d, removed %d; want 1 each", st.FilesAdded.Load(), st.FilesChanged.Load(), st.FilesRemoved.Load())
	}

	// The store cannot be listed: the view stays the last good one.
	fv.fail.Store(true)
	r.Now()
	waitFor(t, "a failed refresh counted", func() bool { return st.RefreshFailures.Load() == 1 })
	if got := shown(root); !maps.Equal(got, want) {
		t.Errorf("after a failed refresh the tree shows %v, want it unchanged, %v", got, want)
	}

	// It can again, with a file fewer: the next refresh applies it.
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	fv.fail.Store(false)
	r.Now()
	waitFor(t, "the refresh after the failure", func() bool { return st.Refreshes.Load() == 2 })
	delete(want, "a")
	if got := shown(root); !maps.Equal(got, want) {
		t.Errorf("after the store came back the tree shows %v, want %v", got, want)
	}
	r.Close()
	if !slices.Equal(keys, []int{3, 2}) {
		t.Errorf("the memory bound was told of %v keys, want the two listings' [3 2]", keys)
	}
}

// A refresher with an interval refreshes by itself.
func TestRefresherInterval(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a", 10)
	v, root, rd := plainMount(t, dir)
	r := Start(Config{View: v, Root: root, Reader: rd, Interval: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	defer r.Close()
	write(t, dir, "b", 5)
	waitFor(t, "b shown without a Now", func() bool { _, ok := shown(root)["b"]; return ok })
}
