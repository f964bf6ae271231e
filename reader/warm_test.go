package reader

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/segfs/segfs/prefetch"
)

// A warm caches every part of the files it is given, reports each
// part's bytes once, and names a file whose fetch fails; what it cached
// then reads with no GET.
func TestWarmCachesFilesAndNamesFailures(t *testing.T) {
	const ps = 1000
	store := newMemStore()
	good := Entry{Name: "a", Obj: store.put("a", randomBytes(1, 3*ps+10))}
	other := Entry{Name: "b", Obj: store.put("b", randomBytes(2, ps/2))}
	bad := Entry{Name: "c", Obj: store.put("c", randomBytes(3, 2*ps))}
	inline := Entry{Name: "segments_1", Inline: []byte("xyz")}
	boom := errors.New("boom")
	store.failAt = func(key string, off int64) error {
		if key == "c" && off >= ps {
			return boom
		}
		return nil
	}
	r := newTestReader(t, store, newFakeCache(), 3, Config{PartSize: ps, Prefetch: prefetch.None})
	entries := []Entry{good, other, bad, inline}
	for _, e := range entries[:3] {
		if c, total := r.Cached(e); c != 0 || total != e.Obj.Size {
			t.Fatalf("%s before: %d of %d cached", e.Name, c, total)
		}
	}
	got := map[string]int64{}
	var errs []string
	err := r.Warm(context.Background(), entries, func(p WarmProgress) {
		if p.Err != nil {
			if !errors.Is(p.Err, boom) {
				t.Errorf("%s: %v, want the store's error", p.File, p.Err)
			}
			errs = append(errs, p.File)
			return
		}
		got[p.File] += p.Bytes
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"a": good.Obj.Size, "b": other.Obj.Size, "c": ps, "segments_1": 3}
	for f, n := range want {
		if got[f] != n {
			t.Errorf("%s: reported %d bytes, want %d", f, got[f], n)
		}
	}
	if len(errs) != 1 || errs[0] != "c" {
		t.Errorf("failures reported: %v, want [c]", errs)
	}
	for _, e := range []Entry{good, other, inline} {
		if c, total := r.Cached(e); c != total {
			t.Errorf("%s after: %d of %d cached", e.Name, c, total)
		}
	}
	if c, _ := r.Cached(bad); c != ps {
		t.Errorf("c after: %d cached, want its first part", c)
	}
	gets := store.calls.Load()
	if _, err := r.ReadAt(context.Background(), good.Obj, make([]byte, good.Obj.Size), 0, nil); err != nil {
		t.Fatal(err)
	}
	if n := store.calls.Load() - gets; n != 0 {
		t.Errorf("a read of a warmed file took %d GETs", n)
	}
	// A second warm finds everything cached and fetches nothing.
	store.failAt = nil
	gets = store.calls.Load()
	if err := r.Warm(context.Background(), []Entry{good, other}, func(WarmProgress) {}); err != nil {
		t.Fatal(err)
	}
	if n := store.calls.Load() - gets; n != 0 {
		t.Errorf("a warm of cached files took %d GETs", n)
	}
}

// A warm ended by its context returns the context's error.
func TestWarmStopsWithItsContext(t *testing.T) {
	const ps = 1000
	store := newMemStore()
	store.gate = make(chan struct{})
	defer close(store.gate)
	e := Entry{Name: "a", Obj: store.put("a", randomBytes(1, 10*ps))}
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: ps, Prefetch: prefetch.None})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() {
		waitFor(t, func() bool { return store.calls.Load() > 0 })
		close(started)
		cancel()
	}()
	err := r.Warm(ctx, []Entry{e}, func(WarmProgress) {})
	<-started
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Warm = %v, want context.Canceled", err)
	}
}

// A warm's fetches are held to the scheduler's background cap (they
// declare their part's length as cost); a demand read is not, and
// without a cap nothing waits.
func TestWarmHeldToTheBackgroundRate(t *testing.T) {
	const ps = 64 << 10
	store := newMemStore()
	e := Entry{Name: "a", Obj: store.put("a", randomBytes(1, 4*ps))}
	newCapped := func(rate int64) (*Reader, *prefetch.Scheduler) {
		sched := prefetch.New(prefetch.Config{Workers: 2, BackgroundRate: rate})
		r := mustNew(t, store, newFakeCache(), sched, Config{PartSize: ps, Prefetch: prefetch.None})
		t.Cleanup(func() { r.Close(); sched.Close() })
		return r, sched
	}
	capped, sched := newCapped(1 << 20)
	if _, err := capped.ReadAt(context.Background(), e.Obj, make([]byte, ps), 0, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return capped.Stats().InflightParts.Load() == 0 })
	if d := sched.Stats().Throttled; d != 0 {
		t.Errorf("a demand read waited %v for the background cap", d)
	}
	if err := capped.Warm(context.Background(), []Entry{e}, func(WarmProgress) {}); err != nil {
		t.Fatal(err)
	}
	// Three parts of 64 KiB at 1 MiB/s: each waits for its own bytes.
	if d := sched.Stats().Throttled; d < 3*ps*time.Second/(1<<20) {
		t.Errorf("a capped warm of three parts waited %v in all", d)
	}
	free, fsched := newCapped(0)
	if err := free.Warm(context.Background(), []Entry{e}, func(WarmProgress) {}); err != nil {
		t.Fatal(err)
	}
	if d := fsched.Stats().Throttled; d != 0 {
		t.Errorf("without a cap a warm waited %v", d)
	}
}
