package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/tests/leakcheck"
)

const splitPart = 512 << 10 // eight ranges of 64 KiB

// checkRanges fails unless rs are n ranges that tile [0, size) of the
// object, in any order.
func checkRanges(t *testing.T, rs []readRange, n int, size int64) {
	t.Helper()
	slices.SortFunc(rs, func(a, b readRange) int { return int(a.off - b.off) })
	if len(rs) != n {
		t.Fatalf("%d GETs %v, want %d", len(rs), rs, n)
	}
	var at int64
	for _, rr := range rs {
		if rr.off != at || rr.n <= 0 {
			t.Fatalf("GETs %v do not tile [0,%d)", rs, size)
		}
		at += rr.n
	}
	if at != size {
		t.Fatalf("GETs %v cover [0,%d), want [0,%d)", rs, at, size)
	}
}

func TestIdlePoolSplitsAPartFetch(t *testing.T) {
	store := newMemStore()
	data := randomBytes(11, splitPart+1000) // a whole part and a short one
	obj := store.put("f", data)
	pc := newFakeCache()
	r := newTestReader(t, store, pc, 8, Config{PartSize: splitPart, SplitSize: 64 << 10, Prefetch: prefetch.None})

	got, err := r.ReadAt(context.Background(), obj, make([]byte, splitPart), 0, nil)
	if err != nil || !bytes.Equal(got, data[:splitPart]) {
		t.Fatalf("read of the first part: %v, or bytes differ", err)
	}
	// Eight workers, one of them the fetch itself: seven more GETs.
	checkRanges(t, store.rangesOf("f"), 8, splitPart)
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	st := r.Stats()
	if st.PartsFetched.Load() != 1 || st.PartsSplit.Load() != 1 || st.SplitGets.Load() != 8 || st.FetchedBytes.Load() != splitPart {
		t.Fatalf("stats %+v: want one part fetched, split into 8 GETs, %d bytes", counters(st), splitPart)
	}
	pc.mu.Lock()
	cached := pc.parts[r.cfg.cacheKey(keyOfPart(obj, 0))]
	pc.mu.Unlock()
	if !bytes.Equal(cached, data[:splitPart]) {
		t.Fatalf("the cached part differs from the object's bytes")
	}
	// The last part, 1000 bytes, is below two SplitSizes: one GET.
	got, err = r.ReadAt(context.Background(), obj, make([]byte, 1000), splitPart, nil)
	if err != nil || !bytes.Equal(got, data[splitPart:]) {
		t.Fatalf("read of the last part: %v, or bytes differ", err)
	}
	if n := len(store.rangesOf("f")); n != 9 {
		t.Fatalf("%d GETs after the short part, want 9", n)
	}
}

func TestSplitIsBoundedBySplitSizeAndMaxSplit(t *testing.T) {
	for _, tc := range []struct {
		split int64
		want  int
	}{
		{split: 128 << 10, want: 4}, // a part of four SplitSizes
		{split: 32 << 10, want: MaxSplit},
		{split: 300 << 10, want: 1}, // less than two SplitSizes
	} {
		store := newMemStore()
		data := randomBytes(12, splitPart)
		obj := store.put("f", data)
		r := newTestReader(t, store, newFakeCache(), 16, Config{PartSize: splitPart, SplitSize: tc.split, Prefetch: prefetch.None})
		got, err := r.ReadAt(context.Background(), obj, make([]byte, splitPart), 0, nil)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("split %d: %v, or bytes differ", tc.split, err)
		}
		checkRanges(t, store.rangesOf("f"), tc.want, splitPart)
	}
}

// A pool whose workers are all taken or queued for fetches the part
// cannot take them from: the part is one GET.
func TestBusyPoolFetchesWholeParts(t *testing.T) {
	store := newMemStore()
	big := store.put("big", randomBytes(13, 8*splitPart))
	data := randomBytes(14, splitPart)
	obj := store.put("f", data)
	store.gate, store.gateKey = make(chan struct{}), "big"
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: splitPart, SplitSize: 64 << 10, Prefetch: prefetch.Open})
	// The big file's fill holds the three workers background work may
	// use (a quarter, one, is kept for the rest) and queues five more.
	prefetchOpen(r, big)
	waitFor(t, func() bool { return store.inflight.Load() == 3 })
	got, err := r.ReadAt(context.Background(), obj, make([]byte, splitPart), 0, nil)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %v, or bytes differ", err)
	}
	checkRanges(t, store.rangesOf("f"), 1, splitPart)
	close(store.gate)
}

func TestSplitRangeFailureFailsThePart(t *testing.T) {
	store := newMemStore()
	data := randomBytes(15, splitPart)
	obj := store.put("f", data)
	boom := errors.New("connection reset")
	store.failAt = func(key string, off int64) error {
		if off == 3*(64<<10) {
			return boom
		}
		return nil
	}
	pc := newFakeCache()
	r := newTestReader(t, store, pc, 8, Config{PartSize: splitPart, SplitSize: 64 << 10, Prefetch: prefetch.None})
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, splitPart), 0, nil); !errors.Is(err, boom) {
		t.Fatalf("read with one range failing: %v, want %v", err, boom)
	}
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	if n := pc.putCount(); n != 0 {
		t.Fatalf("%d parts cached after a failed range", n)
	}
	if st := r.Stats(); st.FetchErrors.Load() != 1 || st.PartsFetched.Load() != 0 {
		t.Fatalf("stats %+v: want one failed fetch, none fetched", counters(st))
	}
	// The next read fetches the part again, whole and right.
	store.mu.Lock()
	store.failAt = nil
	store.mu.Unlock()
	got, err := r.ReadAt(context.Background(), obj, make([]byte, splitPart), 0, nil)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after the failure: %v, or bytes differ", err)
	}
}

// The checksums of a split part are summed in order after its ranges
// arrive out of order: a real cache must take the part and serve it back
// from disk, checked, with the remote gone.
func TestSplitPartIsCachedWithRightChecksums(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	pc, err := cache.Open(cache.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	store := newMemStore()
	data := randomBytes(16, 2*splitPart)
	obj := store.put("f", data)
	cfg := Config{Source: "test", PartSize: splitPart, SplitSize: 64 << 10, Prefetch: prefetch.None}
	sched := prefetch.New(prefetch.Config{Workers: 8})
	r := mustNew(t, store, pc, sched, cfg)
	for off := int64(0); off < int64(len(data)); off += splitPart {
		if _, err := r.ReadAt(context.Background(), obj, make([]byte, splitPart), off, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := r.Stats(); st.PartsSplit.Load() != 2 {
		t.Fatalf("%d parts split, want 2", st.PartsSplit.Load())
	}
	r.Close()
	sched.Close()

	store.mu.Lock()
	store.fail = errors.New("remote gone")
	store.mu.Unlock()
	sched = prefetch.New(prefetch.Config{Workers: 8})
	defer sched.Close()
	r = mustNew(t, store, pc, sched, cfg)
	defer r.Close()
	got, err := r.ReadAt(context.Background(), obj, make([]byte, len(data)), 0, nil)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read from the disk cache: %v, or bytes differ", err)
	}
	if st := r.Stats(); st.DiskHits.Load() != 2 || st.PartsFetched.Load() != 0 {
		t.Fatalf("stats %+v: want both parts from the disk, nothing fetched", counters(st))
	}
	if cs := pc.Stats(); cs.CorruptRemoved != 0 {
		t.Fatalf("%d parts found damaged", cs.CorruptRemoved)
	}
}

// Close while the ranges of a split part hang on the remote ends them
// all: the reader gets an error, and no goroutine is left.
func TestCloseEndsASplitFetch(t *testing.T) {
	before := runtime.NumGoroutine()
	store := newMemStore()
	obj := store.put("f", randomBytes(17, splitPart))
	store.gate = make(chan struct{}) // never opens
	sched := prefetch.New(prefetch.Config{Workers: 8})
	r := mustNew(t, store, newFakeCache(), sched, Config{PartSize: splitPart, SplitSize: 64 << 10, Prefetch: prefetch.None})
	var wg sync.WaitGroup
	var readErr error
	wg.Go(func() {
		_, readErr = r.ReadAt(context.Background(), obj, make([]byte, splitPart), 0, nil)
	})
	waitFor(t, func() bool { return store.inflight.Load() == 8 })
	done := make(chan struct{})
	go func() {
		r.Close()
		sched.Close()
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatal("Close did not end a split fetch")
	}
	if readErr == nil {
		t.Fatal("a read whose fetch was cancelled returned no error")
	}
	leakcheck.Settle(t, before, 10*time.Second)
}

// Many parts read at once on a small pool: ranges of split fetches queue
// behind other parts' fetches, and a fetch that waits for its ranges must
// not hold the worker they need. Every read ends with the right bytes,
// and every byte is fetched once.
func TestConcurrentSplitsDoNotDeadlock(t *testing.T) {
	const parts = 32
	store := newMemStore()
	data := randomBytes(18, parts*splitPart)
	obj := store.put("f", data)
	store.latency = time.Millisecond
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: splitPart, SplitSize: 64 << 10, Prefetch: prefetch.None})
	var wg sync.WaitGroup
	errs := make(chan error, parts)
	for i := range parts {
		switch {
		case i == 1:
			// The first reader came alone to an idle pool: its fetch
			// splits, and the others arrive while its ranges run.
			waitFor(t, func() bool { return r.Stats().PartsSplit.Load() >= 1 })
		case i%4 == 0:
			time.Sleep(time.Millisecond) // readers arrive in small waves
		}
		wg.Go(func() {
			off := int64(i) * splitPart
			got, err := r.ReadAt(context.Background(), obj, make([]byte, splitPart), off, nil)
			if err == nil && !bytes.Equal(got, data[off:off+splitPart]) {
				err = errors.New("bytes differ")
			}
			if err != nil {
				errs <- fmt.Errorf("part %d: %w", i, err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // hang guard only
		t.Fatal("concurrent split fetches did not finish")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkRanges(t, store.rangesOf("f"), len(store.rangesOf("f")), int64(len(data)))
	st := r.Stats()
	t.Logf("%d parts fetched, %d split into %d GETs", st.PartsFetched.Load(), st.PartsSplit.Load(), st.SplitGets.Load())
	if st.PartsFetched.Load() != parts || st.PartsSplit.Load() == 0 {
		t.Fatalf("stats %+v: want %d parts fetched, some split", counters(st), parts)
	}
}

// A split fetch whose range is still queued when its own range is in
// fetches that range itself: it does not wait for a worker that may
// never come. Here the one other worker is taken, between the decision
// to split and the ranges' submission, by a task that ends only after
// the read.
func TestSplitFetchTakesBackItsQueuedRanges(t *testing.T) {
	store := newMemStore()
	data := randomBytes(19, splitPart)
	obj := store.put("f", data)
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: splitPart, SplitSize: 64 << 10, Prefetch: prefetch.None})
	release, started := make(chan struct{}), make(chan struct{})
	r.hooks = &hooks{beforeSplit: func() {
		r.sched.Submit("other", prefetch.Demand, func(ctx context.Context) {
			close(started)
			select {
			case <-release:
			case <-ctx.Done():
			}
		})
		<-started
	}}
	defer close(release)
	var got []byte
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err = r.ReadAt(context.Background(), obj, make([]byte, splitPart), 0, nil)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatal("the split fetch waits for a range no worker will run")
	}
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %v, or bytes differ", err)
	}
	checkRanges(t, store.rangesOf("f"), 2, splitPart)
	if c := r.sched.Stats().Cancelled; c != 1 {
		t.Fatalf("%d tasks taken back, want the one queued range", c)
	}
}

// A reader that comes to wait on a background part fetch that split
// raises the ranges still queued with it: they may then run on the
// workers background work leaves to demand, instead of waiting behind
// other background work.
func TestJoiningReaderRaisesQueuedRanges(t *testing.T) {
	store := newMemStore()
	data := randomBytes(20, splitPart)
	obj := store.put("f", data)
	store.gate, store.gateKey = make(chan struct{}), "f" // every GET of f waits
	// Four workers, one kept from background work: the part's fetch and
	// its two ranges may use three.
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: splitPart, SplitSize: 64 << 10, Prefetch: prefetch.Open})
	release := make(chan struct{})
	defer close(release)
	r.hooks = &hooks{beforeSplit: func() {
		// Two other background tasks take the background workers
		// before the ranges are submitted, so both ranges queue.
		started := make(chan struct{}, 2)
		for range 2 {
			r.sched.Submit("other", prefetch.Background, func(ctx context.Context) {
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
		}
		<-started
		<-started
	}}
	r.fetches.startPart(obj, 0, prefetch.Background) // as a file's fill does
	waitFor(t, func() bool { return r.sched.Stats().Queued[prefetch.Background] == 2 })

	done := make(chan error, 1)
	go func() {
		got, err := r.ReadAt(context.Background(), obj, make([]byte, splitPart), 0, nil)
		if err == nil && !bytes.Equal(got, data) {
			err = errors.New("bytes differ")
		}
		done <- err
	}()
	// The part's fetch and a raised range run at demand, the other
	// range waits at demand for a worker.
	waitFor(t, func() bool {
		st := r.sched.Stats()
		return st.Running[prefetch.Demand] == 2 && st.Queued[prefetch.Demand] == 1 && st.Queued[prefetch.Background] == 0
	})
	close(store.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkRanges(t, store.rangesOf("f"), 3, splitPart)
}

// A panic in the GET a split fetch makes itself fails the part only once
// its other ranges, which write into the same buffer, have ended: the
// buffer goes back to the pool after that.
func TestSplitFetchPanicWaitsForItsRanges(t *testing.T) {
	store := newMemStore()
	obj := store.put("bad", randomBytes(12, splitPart))
	var running atomic.Int64
	ps := slowRangesStore{memStore: store, running: &running, started: make(chan struct{}, 16)}
	r := newTestReader(t, ps, newFakeCache(), 8, Config{PartSize: splitPart, SplitSize: 64 << 10, Prefetch: prefetch.None})
	var atPublish atomic.Int64
	r.hooks = &hooks{afterPublish: func(*partCall) { atPublish.Store(running.Load()) }}
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, splitPart), 0, nil); !errors.Is(err, ErrInternal) {
		t.Fatalf("read: %v, want ErrInternal", err)
	}
	if st := r.Stats(); st.PartsSplit.Load() != 1 {
		t.Fatalf("the part fetch did not split: %+v", counters(st))
	}
	if n := atPublish.Load(); n != 0 {
		t.Fatalf("%d ranges still writing into the part's buffer when its failure was published", n)
	}
}

// slowRangesStore panics on the GET at offset 0, once another GET is
// running, and makes every other GET take a while, counting those in
// progress.
type slowRangesStore struct {
	*memStore
	running *atomic.Int64
	started chan struct{}
}

func (s slowRangesStore) ReadRange(ctx context.Context, obj fetcher.Object, off int64, p []byte) error {
	if off == 0 {
		<-s.started
		panic("index out of range")
	}
	s.running.Add(1)
	defer s.running.Add(-1)
	s.started <- struct{}{}
	time.Sleep(20 * time.Millisecond) // widens the window a missed wait would leave
	return s.memStore.ReadRange(ctx, obj, off, p)
}

// A reader that joins a call before its task is submitted (the call is
// in flight, the task not yet made) still has the task run at demand.
func TestJoinBeforeSubmitRaisesTheTask(t *testing.T) {
	store := newMemStore()
	store.gate = make(chan struct{})
	defer close(store.gate)
	obj := store.put("f", randomBytes(13, 4096))
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: 4096, Prefetch: prefetch.None})
	r.hooks = &hooks{beforeSubmit: func(call *partCall) {
		r.parts.join(call) // what a reader arriving now does
	}}
	// Both workers busy (Reserved leaves one to demand: fill it too).
	other := store.put("o", randomBytes(14, 2*4096))
	r.fetches.startPart(other, 0, prefetch.Demand)
	r.fetches.startPart(other, 1, prefetch.Demand)
	waitFor(t, func() bool { return store.inflight.Load() == 2 })
	r.fetches.startPart(obj, 0, prefetch.Background)
	if st := r.sched.Stats(); st.Queued[prefetch.Demand] != 1 || st.Queued[prefetch.Background] != 0 {
		t.Fatalf("queued %v: want the joined call's task at demand", st.Queued)
	}
	r.hooks = nil
}

// A part fetched ahead of a stream (readahead) is one GET, whatever the
// idle workers: the stream keeps its window in flight, and each GET costs
// the client and the server CPU of their own. A reader waiting on a part
// still splits it.
func TestReadaheadDoesNotSplit(t *testing.T) {
	store := newMemStore()
	r := newTestReader(t, store, newFakeCache(), 8, Config{PartSize: splitPart, SplitSize: 64 << 10, Prefetch: prefetch.Open})
	obj := store.put("ahead", randomBytes(30, splitPart))
	r.fetches.startPart(obj, 0, prefetch.Readahead)
	waitFor(t, func() bool {
		st := r.sched.Stats()
		return len(store.rangesOf("ahead")) > 0 && st.Running[prefetch.Readahead] == 0 && st.Queued[prefetch.Readahead] == 0
	})
	checkRanges(t, store.rangesOf("ahead"), 1, splitPart)
	if n := r.stats.PartsSplit.Load(); n != 0 {
		t.Fatalf("%d part fetches split, want none", n)
	}
	data := randomBytes(32, splitPart)
	obj = store.put("demand", data)
	got, err := r.ReadAt(context.Background(), obj, make([]byte, splitPart), 0, nil)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %v, or bytes differ", err)
	}
	if n := len(store.rangesOf("demand")); n < 2 {
		t.Fatalf("a demand read of an idle pool was %d GETs, want it split", n)
	}
}
