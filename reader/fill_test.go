package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// An object whose listing claims a huge size costs an open a window of
// fetch records, not one per part: the fill is a cursor (fill.go).
func TestOpenOfAHugeObjectQueuesAWindow(t *testing.T) {
	for _, mode := range []string{"open", "all"} {
		t.Run(mode, func(t *testing.T) {
			store := newMemStore()
			store.gate = make(chan struct{}) // nothing completes
			const ps = 8 << 20
			huge := fetcher.Object{Key: "huge", ETag: `"1"`, Size: 1 << 40} // 131,072 parts claimed
			r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: ps})
			if mode == "open" {
				prefetchOpen(r, huge)
			} else {
				sweep(r, []fetcher.Object{huge})
			}
			// The first part as readahead plus the fill's window.
			if got, want := r.Stats().InflightParts.Load(), int64(4+1); got > want { // 4 workers
				t.Fatalf("%d part fetches queued or running after the open of a 1 TiB object; want at most %d", got, want)
			}
			close(store.gate)
		})
	}
}

// The sweep of a tree of many objects holds a window of records too, and
// still fetches every part of every object, each once.
func TestSweepOfManyObjectsQueuesAWindow(t *testing.T) {
	store := newMemStore()
	const ps = 256
	var objs []fetcher.Object
	for i := range 300 {
		objs = append(objs, store.put(fmt.Sprint("f", i), randomBytes(uint64(i), 2*ps+1)))
	}
	gate := make(chan struct{})
	store.gate = gate
	pc := newFakeCache()
	r := newTestReader(t, store, pc, 4, Config{PartSize: ps})
	sweep(r, objs)
	if got, want := r.Stats().InflightParts.Load(), int64(4); got > want { // 4 workers
		t.Fatalf("%d part fetches queued or running after queuing a sweep of 300 objects; want at most %d", got, want)
	}
	close(gate)
	for _, obj := range objs {
		waitFor(t, allCached(r, pc, obj, 3))
	}
	if n := store.calls.Load(); n != 900 {
		t.Fatalf("%d remote reads for 900 parts", n)
	}
}

// A fill over an object whose parts are all cached scans on past its
// per-pump budget without a fetch in flight to drive it, and ends.
func TestFillScansPastCachedParts(t *testing.T) {
	store := newMemStore()
	const ps, parts = 64, 5 * fillScan
	data := randomBytes(3, parts*ps+7)
	obj := store.put("f", data)
	pc := newFakeCache()
	r := newTestReader(t, store, pc, 2, Config{PartSize: ps, Prefetch: prefetch.None})
	for i := int64(0); i < parts; i++ { // every part but the short last one
		if err := pc.Put(context.Background(), r.cfg.cacheKey(keyOfPart(obj, i)), data[i*ps:(i+1)*ps]); err != nil {
			t.Fatal(err)
		}
	}
	prefetchOpen(r, obj)
	waitFor(t, allCached(r, pc, obj, parts+1))
	if n := store.calls.Load(); n != 1 {
		t.Fatalf("%d remote reads; want 1, for the one part not cached", n)
	}
	waitFor(t, func() bool {
		r.cursors.mu.Lock()
		defer r.cursors.mu.Unlock()
		return len(r.cursors.fills) == 0
	})
}

// A reader that arrives after a part's fetch has failed starts a new
// fetch: it does not take the error of an attempt it never waited on.
func TestReaderAfterAFailedFetchFetchesAgain(t *testing.T) {
	store := newMemStore()
	const ps = 1024
	data := randomBytes(4, ps)
	obj := store.put("f", data)
	boom := errors.New("connection reset")
	store.fail = boom
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: ps, Prefetch: prefetch.None})
	type result struct {
		data []byte
		err  error
	}
	late := make(chan result, 1)
	r.hooks = &hooks{afterPublish: func(call *partCall) {
		if call.err == nil {
			return
		}
		// The first fetch has failed and its waiters are woken; the
		// remote has recovered. A read arriving now must not see boom.
		store.mu.Lock()
		store.fail = nil
		store.mu.Unlock()
		got, err := r.ReadAt(context.Background(), obj, make([]byte, ps), 0, nil)
		late <- result{got, err}
	}}
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, ps), 0, nil); !errors.Is(err, boom) {
		t.Fatalf("first read: %v, want %v", err, boom)
	}
	res := <-late
	if res.err != nil || !bytes.Equal(res.data, data) {
		t.Fatalf("read after the failed fetch: %v (or wrong bytes)", res.err)
	}
	if n := store.calls.Load(); n != 2 {
		t.Fatalf("%d remote reads; want 2, the failed one and a new one", n)
	}
}

// A fetch that panics (a store tripping over bad input) fails the reads
// waiting on it with ErrInternal; the pool and the other objects serve
// on.
func TestPanickingFetchFailsOnlyItsReads(t *testing.T) {
	store := newMemStore()
	const ps = 1024
	bad := store.put("bad", randomBytes(5, 4*ps))
	goodData := randomBytes(6, 4*ps)
	good := store.put("good", goodData)
	r := newTestReader(t, panicStore{store}, newFakeCache(), 2, Config{PartSize: ps, Prefetch: prefetch.None})
	for _, n := range []int{ps, 10} { // a whole part, and a small read's own-range GET
		if _, err := r.ReadAt(context.Background(), bad, make([]byte, n), 0, nil); !errors.Is(err, ErrInternal) {
			t.Fatalf("read of %d bytes of the object whose fetch panics: %v, want ErrInternal", n, err)
		}
	}
	got, err := r.ReadAt(context.Background(), good, make([]byte, 4*ps), 0, nil)
	if err != nil || !bytes.Equal(got, goodData) {
		t.Fatalf("read beside it: %v (or wrong bytes)", err)
	}
}

// panicStore panics on every read of the object "bad".
type panicStore struct{ *memStore }

func (s panicStore) ReadRange(ctx context.Context, obj fetcher.Object, off int64, p []byte) error {
	if obj.Key == "bad" {
		panic("index out of range")
	}
	return s.memStore.ReadRange(ctx, obj, off, p)
}

// A fill stops at its object's first failed part: an object whose
// listed size is a lie (every GET past its real end fails) costs a
// window of GETs, not one per part it claims.
func TestFillStopsAtAFailedPart(t *testing.T) {
	store := newMemStore()
	const ps = 1024
	obj := store.put("f", randomBytes(7, 100*ps))
	store.fail = errors.New("416 range not satisfiable")
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: ps})
	prefetchOpen(r, obj)
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 && r.Stats().FillsAbandoned.Load() == 1 })
	if n := store.calls.Load(); n > 4+1 {
		t.Fatalf("%d GETs of an object whose every part fails; want at most the window and the first part", n)
	}
}

// A reader waits on the fetch it started, even one that fails at once:
// it gets that attempt's error, and the failed read costs one GET, not a
// second attempt through its own range.
func TestFailedReadCostsOneGet(t *testing.T) {
	store := newMemStore()
	const ps = 1024
	boom := errors.New("connection reset")
	store.fail = boom
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: ps, Prefetch: prefetch.None})
	published := make(chan struct{}, 1)
	r.hooks = &hooks{
		afterPublish: func(*partCall) { published <- struct{}{} },
		// The reader goes on only once its fetch has failed and woken
		// its waiters: it must already be one of them.
		afterStart: func() { <-published },
	}
	for i := range 3 {
		obj := store.put(fmt.Sprint("f", i), randomBytes(uint64(i), ps))
		before := store.calls.Load()
		if _, err := r.ReadAt(context.Background(), obj, make([]byte, ps), 0, nil); !errors.Is(err, boom) {
			t.Fatalf("read %d: %v, want %v", i, err, boom)
		}
		if n := store.calls.Load() - before; n != 1 {
			t.Fatalf("read %d: %d GETs for one failed read of one part, want 1", i, n)
		}
	}
}

// The ranges of a split part fetch and the halves of a small read across
// a part border run on goroutines of their own: a panic there fails the
// read too, and the daemon serves on.
func TestPanickingSplitAndSmallReadsFailOnlyTheirReads(t *testing.T) {
	store := newMemStore()
	const ps = 512 << 10
	bad := store.put("bad", randomBytes(8, 2*ps))
	goodData := randomBytes(9, 2*ps)
	good := store.put("good", goodData)
	r := newTestReader(t, panicStore{store}, newFakeCache(), 8, Config{PartSize: ps, SplitSize: 64 << 10, Prefetch: prefetch.None})
	if _, err := r.ReadAt(context.Background(), bad, make([]byte, ps), 0, nil); !errors.Is(err, ErrInternal) {
		t.Fatalf("split part read: %v, want ErrInternal", err)
	}
	if st := r.Stats(); st.PartsSplit.Load() == 0 {
		t.Fatalf("the part fetch did not split: %+v", counters(st))
	}
	if _, err := r.ReadAt(context.Background(), bad, make([]byte, 8<<10), ps-4<<10, nil); !errors.Is(err, ErrInternal) {
		t.Fatalf("small read across the part border: %v, want ErrInternal", err)
	}
	got, err := r.ReadAt(context.Background(), good, make([]byte, 2*ps), 0, nil)
	if err != nil || !bytes.Equal(got, goodData) {
		t.Fatalf("read beside it: %v (or wrong bytes)", err)
	}
}
