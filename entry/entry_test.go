package entry

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/tests/localstore"
)

// TestEntriesBothForms: when KEY and KEY.zst are both stored, the newer
// is shown under KEY and the other is left out; on a tie, or when the
// compressed one has no seek table, the raw one is. The result does not
// depend on the parallelism.
func TestEntriesBothForms(t *testing.T) {
	logical := bytes.Repeat([]byte("stored fields "), 3000)
	zst := localstore.Seekable(t, logical)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := t0.Add(time.Hour)
	store, objs := localstore.Dir(t, map[string]localstore.File{
		"a.fdt": {Data: logical, MTime: t0}, "a.fdt.zst": {Data: zst, MTime: later}, // compressed newer: it is shown
		"b.fdt": {Data: logical, MTime: later}, "b.fdt.zst": {Data: zst, MTime: t0}, // raw newer
		"c.fdt": {Data: logical, MTime: t0}, "c.fdt.zst": {Data: zst, MTime: t0}, // tie: raw
		"d.fdt": {Data: logical, MTime: t0}, "d.fdt.zst": {Data: []byte("not zstd"), MTime: later}, // not seekable: both, as they are
		"e.fdt.zst": {Data: zst, MTime: t0}, // alone
	})
	type shown struct {
		name, key  string
		compressed bool
	}
	want := []shown{
		{"a.fdt", "a.fdt.zst", true},
		{"b.fdt", "b.fdt", false},
		{"c.fdt", "c.fdt", false},
		{"d.fdt", "d.fdt", false},
		{"d.fdt.zst", "d.fdt.zst", false},
		{"e.fdt", "e.fdt.zst", true},
	}
	for _, parallel := range []int{1, 8} {
		entries, err := FromObjects(context.Background(), store, objs, parallel, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		var got []shown
		for _, e := range entries {
			got = append(got, shown{e.Name, e.Obj.Key, e.Table != nil})
			if e.Table != nil && e.Size() != int64(len(logical)) {
				t.Errorf("%s: size %d, want %d", e.Name, e.Size(), len(logical))
			}
		}
		slices.SortFunc(got, func(a, b shown) int { return strings.Compare(a.name, b.name) })
		if !slices.Equal(got, want) {
			t.Errorf("parallel %d: entries\n%v\nwant\n%v", parallel, got, want)
		}
	}
}

// hugeStore lists an object far larger than it holds, as a broken or
// hostile listing may: every ReadRange fails as for a vanished object,
// after recording how many bytes it was asked for.
type hugeStore struct {
	fetcher.Store // nil: only ReadRange is called
	asked         atomic.Int64
}

func (s *hugeStore) ReadRange(ctx context.Context, obj fetcher.Object, off int64, p []byte) error {
	s.asked.Store(max(s.asked.Load(), int64(len(p))))
	return fmt.Errorf("get %s: %w", obj.Key, fetcher.ErrNotFound)
}

// TestEntriesHugeListing: a .zst listed at 2^62 bytes is read with a
// tail of at most the largest seek table, and is shown as it is.
func TestEntriesHugeListing(t *testing.T) {
	store := &hugeStore{}
	objs := []fetcher.Object{{Key: "big.fdt.zst", Size: 1 << 62, ETag: `"1"`}}
	entries, err := FromObjects(context.Background(), store, objs, 1, slog.New(slog.DiscardHandler))
	if err != nil || len(entries) != 1 || entries[0].Table != nil || entries[0].Name != "big.fdt.zst" {
		t.Fatalf("entries %+v, %v; want the object shown as it is", entries, err)
	}
	if a := store.asked.Load(); a == 0 || a > compress.MaxTableSize {
		t.Errorf("tail read of %d bytes, want at most %d", a, int64(compress.MaxTableSize))
	}
}

func TestValidName(t *testing.T) {
	for key, want := range map[string]bool{
		"a":            true,
		"a/b/c.fdt":    true,
		"with space/ü": true,
		"":             false,
		"/abs":         false,
		"a/../b":       false,
		"..":           false,
		"a//b":         false,
		"./a":          false,
		"dir/":         false,
	} {
		if got := ValidName(key); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", key, got, want)
		}
	}
}

// countingStore counts the reads of the store it wraps.
type countingStore struct {
	fetcher.Store
	reads atomic.Int64
}

func (s *countingStore) ReadRange(ctx context.Context, obj fetcher.Object, off int64, p []byte) error {
	s.reads.Add(1)
	return s.Store.ReadRange(ctx, obj, off, p)
}

// TestEntriesAfterReuseSeekTables: a new listing of the same versions
// reads no seek table again; an object of another ETag is read anew.
func TestEntriesAfterReuseSeekTables(t *testing.T) {
	zst := localstore.Seekable(t, bytes.Repeat([]byte("stored fields "), 3000))
	store, objs := localstore.Dir(t, map[string]localstore.File{"a.fdt.zst": {Data: zst}, "b.fdt.zst": {Data: zst}, "c": {Data: []byte("raw")}})
	cs := &countingStore{Store: store}
	log := slog.New(slog.DiscardHandler)
	first, err := FromObjects(context.Background(), cs, objs, 4, log)
	if err != nil {
		t.Fatal(err)
	}
	if n := cs.reads.Swap(0); n != 2 {
		t.Fatalf("the first listing read %d seek tables, want 2", n)
	}
	again, err := FromObjectsAfter(context.Background(), cs, objs, first, 4, log)
	if err != nil {
		t.Fatal(err)
	}
	if n := cs.reads.Swap(0); n != 0 {
		t.Errorf("a listing of the same versions read %d seek tables, want none", n)
	}
	for i := range again {
		if again[i].Name != first[i].Name || (again[i].Table == nil) != (first[i].Table == nil) {
			t.Errorf("entry %d: %s (table %t), want %s (table %t)", i, again[i].Name, again[i].Table != nil, first[i].Name, first[i].Table != nil)
		}
	}
	changed := slices.Clone(objs)
	for i := range changed {
		if changed[i].Key == "b.fdt.zst" {
			changed[i].ETag += "x" // another version: its table is read again
		}
	}
	if _, err := FromObjectsAfter(context.Background(), cs, changed, first, 4, log); err != nil {
		t.Fatal(err)
	}
	if n := cs.reads.Load(); n != 1 {
		t.Errorf("a listing with one new version read %d seek tables, want 1", n)
	}
}
