package fs

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// seekableBytes returns data as a seekable zstd object of 4 KiB frames.
func seekableBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if _, _, err := compress.Encode(context.Background(), &out, bytes.NewReader(data), compress.EncoderOptions{FrameSize: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// dirStore writes files (key -> content, modification time) below a new
// directory and opens it as a store with its listing.
func dirStore(t *testing.T, files map[string]fileSpec) (fetcher.Store, []fetcher.Object) {
	t.Helper()
	dir := t.TempDir()
	for key, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, f.mtime, f.mtime); err != nil {
			t.Fatal(err)
		}
	}
	store, err := fetcher.Open(context.Background(), (&url.URL{Scheme: "file", Path: dir}).String(), fetcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return store, objs
}

type fileSpec struct {
	data  []byte
	mtime time.Time
}

// TestEntriesBothForms: when KEY and KEY.zst are both stored, the newer
// is shown under KEY and the other is left out; on a tie, or when the
// compressed one has no seek table, the raw one is. The result does not
// depend on the parallelism.
func TestEntriesBothForms(t *testing.T) {
	logical := bytes.Repeat([]byte("stored fields "), 3000)
	zst := seekableBytes(t, logical)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := t0.Add(time.Hour)
	store, objs := dirStore(t, map[string]fileSpec{
		"a.fdt": {logical, t0}, "a.fdt.zst": {zst, later}, // compressed newer: it is shown
		"b.fdt": {logical, later}, "b.fdt.zst": {zst, t0}, // raw newer
		"c.fdt": {logical, t0}, "c.fdt.zst": {zst, t0}, // tie: raw
		"d.fdt": {logical, t0}, "d.fdt.zst": {[]byte("not zstd"), later}, // not seekable: both, as they are
		"e.fdt.zst": {zst, t0}, // alone
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
		entries, err := Entries(context.Background(), store, objs, parallel, slog.New(slog.DiscardHandler))
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

// TestFrameReaderStats: a read of a cold compressed entry decodes each
// frame it touches once, counting the decode and its time; the same read
// again is served from the decoded frames in memory.
func TestFrameReaderStats(t *testing.T) {
	logical := bytes.Repeat([]byte("0123456789abcdef"), 1<<10) // 16 KiB: 4 frames
	store, objs := dirStore(t, map[string]fileSpec{"x.fdt.zst": {seekableBytes(t, logical), time.Now()}})
	entries, err := Entries(context.Background(), store, objs, 1, slog.New(slog.DiscardHandler))
	if err != nil || len(entries) != 1 || entries[0].Table == nil {
		t.Fatalf("entries %+v, %v", entries, err)
	}
	pc, err := cache.Open(cache.Config{Dir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	sched := prefetch.New(prefetch.Config{Workers: 2})
	r := NewReader(store, pc, sched, ReaderConfig{Source: "test", PartSize: 64 << 10, Prefetch: "none"})
	fr, err := NewFrameReader(r, 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fr.Close()
		r.Close()
		sched.Close()
	})

	// Bytes [3 KiB, 9 KiB) touch frames 0, 1 and 2.
	buf := make([]byte, 6<<10)
	got, err := fr.ReadAt(context.Background(), entries[0], buf, 3<<10, nil)
	if err != nil || !bytes.Equal(got, logical[3<<10:9<<10]) {
		t.Fatalf("read: %v, or bytes differ", err)
	}
	st := fr.Stats()
	if st.Decodes != 3 || st.DecodedBytes != 12<<10 || st.DecodeTime <= 0 || st.Hits != 0 {
		t.Errorf("after a cold read: %+v, want 3 decodes of 12 KiB in a positive time, no hits", st)
	}
	fr.frames.Wait() // ristretto admits asynchronously
	if _, err := fr.ReadAt(context.Background(), entries[0], buf, 3<<10, nil); err != nil {
		t.Fatal(err)
	}
	if st2 := fr.Stats(); st2.Decodes != 3 || st2.Hits != 3 {
		t.Errorf("after the same read again: %+v, want no new decode and 3 hits", st2)
	}
}
