package fs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
)

// newTestReader returns a read engine over a directory store holding
// files (name to bytes) with a real disk cache, and the files' entries in
// listing order; everything is closed at the end of the test.
func newTestReader(t testing.TB, files map[string][]byte, cfg reader.Config) (*reader.Reader, []entry.Entry) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	store, err := fetcher.Open(ctx, "file://"+dir, fetcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := cache.Open(cache.Config{Dir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	sched := prefetch.New(prefetch.Config{Workers: 2})
	r, err := reader.New(store, pc, sched, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		sched.Close()
		pc.Close()
	})
	entries := make([]entry.Entry, len(objs))
	for i, o := range objs {
		entries[i] = entry.Entry{Name: o.Key, Obj: o}
	}
	return r, entries
}
