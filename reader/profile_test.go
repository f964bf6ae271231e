package reader

import (
	"context"
	"testing"

	"github.com/segfs/segfs/prefetch"
)

// Reads of an open that go past the built-in tail are learned, stored at
// Close, and the next Reader on the cache fetches by them, whatever its
// source (one profile per cache directory).
func TestLearnedOpenProfile(t *testing.T) {
	store, _, dir, cdir := rangeTierTest(t)
	big := dir.Files[0]
	pc := openCacheAt(t, cdir)
	cfg := Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None, SegmentPrefetch: true}
	r := newTestReader(t, store, pc, 4, cfg)
	h := r.Open(Entry{Name: "_0.fdt", Obj: big}, Place{dir, 0}, true)
	// An open that reads the last 300 KiB, in 4 KiB reads from the end.
	for off := big.Size - 4096; off > big.Size-300<<10; off -= 4096 {
		if _, release, err := h.Read(context.Background(), make([]byte, 4096), off); err != nil {
			t.Fatal(err)
		} else if release != nil {
			release()
		}
	}
	h.Close()
	waitFor(t, func() bool { return store.inflight.Load() == 0 && r.Stats().InflightParts.Load() == 0 })
	r.Close()
	pc.Close()

	pc = openCacheAt(t, cdir)
	<-pc.IndexLoaded()
	r2 := newTestReader(t, store, pc, 4, cfg)
	if r2.Stats().ProfileLoaded.Load() != 1 {
		t.Fatal("the learned profile was not loaded")
	}
	p := r2.policies[0].(prefetch.LuceneOpen).Profile.Extents()[".fdt"]
	if p.Tail < 300<<10-4096 || p.Tail > 300<<10 {
		t.Errorf("learned tail of .fdt %d, want about 300 KiB", p.Tail)
	}
	plan := r2.policies[0].Seen(dir, cfg.PartSize)
	var tail int64
	for _, rg := range plan.Ranges {
		if rg.Obj.Key == big.Key && rg.Off > 0 {
			tail = rg.Len
		}
	}
	if tail < 296<<10 {
		t.Errorf("the next open's tail range of _0.fdt is %d bytes, want the learned ~300 KiB", tail)
	}
	r2.Close()
	pc.Close()

	// Another source on the same cache directory (another shard of the
	// node) starts from it.
	pc = openCacheAt(t, cdir)
	<-pc.IndexLoaded()
	other := cfg
	other.Source = "other"
	if r3 := newTestReader(t, store, pc, 4, other); r3.Stats().ProfileLoaded.Load() != 1 {
		t.Error("another source's mount on the same cache did not load the profile")
	}
}

// A sequential reader (a copy) teaches the profile nothing.
func TestCopyTeachesNoProfile(t *testing.T) {
	store, _, dir, cdir := rangeTierTest(t)
	big := dir.Files[0]
	r := newTestReader(t, store, openCacheAt(t, cdir), 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None, SegmentPrefetch: true})
	h := r.Open(Entry{Name: "_0.fdt", Obj: big}, Place{dir, 0}, true)
	defer h.Close()
	for off := int64(0); off < big.Size; off += 1 << 20 {
		if _, release, err := h.Read(context.Background(), make([]byte, 1<<20), off); err != nil {
			t.Fatal(err)
		} else if release != nil {
			release()
		}
	}
	if e := r.learned.p.Extents()[".fdt"]; e != (prefetch.Extent{}) {
		t.Errorf("a sequential copy taught %+v", e)
	}
}
