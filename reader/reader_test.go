package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// memStore is an in-memory fetcher.Store with real ETag semantics. A test
// may hold every ReadRange at a gate and inject errors.
type memStore struct {
	counters fetcher.Counters

	mu      sync.Mutex
	objects map[string][]byte
	etags   map[string]string
	gate    chan struct{}                     // if non-nil, ReadRange waits for it to close
	gateKey string                            // if set, only reads of this key wait at gate
	fetched []string                          // keys in the order ReadRange was called
	ranges  []readRange                       // every ReadRange call, in order
	fail    error                             // if non-nil, ReadRange returns it
	failAt  func(key string, off int64) error // if non-nil, ReadRange returns its error
	latency time.Duration                     // each ReadRange takes at least this long

	calls    atomic.Int64
	inflight atomic.Int64
	peak     atomic.Int64
}

func newMemStore() *memStore {
	return &memStore{objects: map[string][]byte{}, etags: map[string]string{}}
}

func (s *memStore) put(key string, data []byte) fetcher.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = data
	s.etags[key] = fmt.Sprintf("%q", fmt.Sprint(len(s.etags), "-", len(data)))
	return fetcher.Object{Key: key, Size: int64(len(data)), ETag: s.etags[key]}
}

func (s *memStore) List(ctx context.Context) ([]fetcher.Object, error) { return nil, nil }

func (s *memStore) Stat(ctx context.Context, key string) (fetcher.Object, error) {
	return fetcher.Object{}, fetcher.ErrNotFound
}

func (s *memStore) ReadRange(ctx context.Context, obj fetcher.Object, off int64, p []byte) error {
	s.calls.Add(1)
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		peak := s.peak.Load()
		if n <= peak || s.peak.CompareAndSwap(peak, n) {
			break
		}
	}
	s.mu.Lock()
	gate, fail := s.gate, s.fail
	if s.gateKey != "" && s.gateKey != obj.Key {
		gate = nil
	}
	s.fetched = append(s.fetched, obj.Key)
	s.ranges = append(s.ranges, readRange{obj.Key, off, int64(len(p))})
	data, etag := s.objects[obj.Key], s.etags[obj.Key]
	if s.failAt != nil && fail == nil {
		fail = s.failAt(obj.Key, off)
	}
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.latency > 0 {
		select {
		case <-time.After(s.latency):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	switch {
	case fail != nil:
		return fail
	case etag != obj.ETag:
		return fmt.Errorf("get %s: %w", obj.Key, fetcher.ErrChanged)
	}
	copy(p, data[off:off+int64(len(p))])
	s.counters.Gets.Add(1)
	return nil
}

// readRange is one ReadRange call of a memStore.
type readRange struct {
	key    string
	off, n int64
}

func (s *memStore) rangesOf(key string) []readRange {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []readRange
	for _, rr := range s.ranges {
		if rr.key == key {
			out = append(out, rr)
		}
	}
	return out
}

func (s *memStore) order() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fetched)
}

func (s *memStore) Counters() *fetcher.Counters { return &s.counters }
func (s *memStore) String() string              { return "mem://" }

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// fakeCache is an in-memory Cache; full makes every Put fail with
// cache.ErrNoSpace.
type fakeCache struct {
	mu    sync.Mutex
	parts map[cache.Key][]byte
	full  bool
	puts  int
}

func newFakeCache() *fakeCache { return &fakeCache{parts: map[cache.Key][]byte{}} }

func (c *fakeCache) ReadAt(ctx context.Context, k cache.Key, p []byte, off int64) (int, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, ok := c.parts[k]
	if !ok {
		return 0, false, nil
	}
	return copy(p, data[off:]), true, nil
}

func (c *fakeCache) Put(ctx context.Context, k cache.Key, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.full {
		return fmt.Errorf("put: %w", cache.ErrNoSpace)
	}
	c.puts++
	c.parts[k] = bytes.Clone(data)
	return nil
}

func (c *fakeCache) NewSums([]byte) *cache.Sums { return nil }

func (c *fakeCache) PutSummed(ctx context.Context, k cache.Key, data []byte, _ *cache.Sums) error {
	return c.Put(ctx, k, data)
}

func (c *fakeCache) Promote(context.Context, cache.ObjectKey, int64) error {
	return cache.ErrIncomplete
}
func (c *fakeCache) OpenObject(cache.ObjectKey) (*os.File, bool) { return nil, false }

func (c *fakeCache) WillNeed(k cache.Key)      {}
func (c *fakeCache) Pin(object, etag string)   {}
func (c *fakeCache) Unpin(object, etag string) {}

func (c *fakeCache) putCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.puts
}

func (c *fakeCache) Contains(k cache.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.parts[k]
	return ok
}

// newTestReader returns a Reader and its scheduler, both closed at the
// end of the test.
func newTestReader(t *testing.T, store fetcher.Store, pc Cache, workers int, cfg Config) *Reader {
	t.Helper()
	sched := prefetch.New(prefetch.Config{Workers: workers})
	r := mustNew(t, store, pc, sched, cfg)
	t.Cleanup(func() {
		r.Close()
		sched.Close()
	})
	return r
}

func TestReadAtByteExact(t *testing.T) {
	const ps = 1000
	for _, mode := range []prefetch.Mode{prefetch.None, prefetch.Open} {
		t.Run(string(mode), func(t *testing.T) {
			store := newMemStore()
			data := randomBytes(1, 10*ps+123)
			obj := store.put("f", data)
			r := newTestReader(t, store, newFakeCache(), 3, Config{PartSize: ps, SmallRead: 100, Prefetch: mode})
			if mode == prefetch.Open {
				prefetchOpen(r, obj)
			}
			cases := []struct {
				name     string
				off, len int64
				want     int64 // bytes expected back
			}{
				{"first byte", 0, 1, 1},
				{"small inside one part", 10, 50, 50},
				{"inside one part", 10, 300, 300},
				{"whole part", ps, ps, ps},
				{"across one border", ps - 7, 14, 14},
				{"across several borders", 2*ps - 1, 3*ps + 2, 3*ps + 2},
				{"last byte", int64(len(data)) - 1, 10, 1},
				{"short last part", 10 * ps, 500, 123},
				{"at EOF", int64(len(data)), 10, 0},
				{"past EOF", int64(len(data)) + 5000, 10, 0},
				{"empty dest", 5, 0, 0},
			}
			for _, c := range cases {
				got, err := r.ReadAt(context.Background(), obj, make([]byte, c.len), c.off, nil)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if int64(len(got)) != c.want {
					t.Fatalf("%s: got %d bytes, want %d", c.name, len(got), c.want)
				}
				if c.want > 0 && !bytes.Equal(got, data[c.off:c.off+c.want]) {
					t.Fatalf("%s: bytes differ at [%d,%d)", c.name, c.off, c.off+c.want)
				}
			}
			// Randomized: reads of random sizes and offsets, some through
			// a sequential handle, compared to the source.
			rng := rand.New(rand.NewPCG(7, 7))
			var seq prefetch.Sequence
			for i := 0; i < 2000; i++ {
				off := rng.Int64N(int64(len(data)) + 10)
				n := rng.Int64N(3*ps) + 1
				var s *prefetch.Sequence
				if i%2 == 0 {
					s = &seq
				}
				got, err := r.ReadAt(context.Background(), obj, make([]byte, n), off, s)
				if err != nil {
					t.Fatal(err)
				}
				end := min(off+n, int64(len(data)))
				if off >= end {
					if len(got) != 0 {
						t.Fatalf("read at %d past end returned %d bytes", off, len(got))
					}
					continue
				}
				if !bytes.Equal(got, data[off:end]) {
					t.Fatalf("read [%d,%d) differs", off, end)
				}
			}
		})
	}
}

func TestSingleFlightPart(t *testing.T) {
	store := newMemStore()
	data := randomBytes(2, 4096)
	obj := store.put("f", data)
	store.gate = make(chan struct{})
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: 4096, SmallRead: 1, Prefetch: prefetch.None})

	const readers = 100
	var wg sync.WaitGroup
	results := make([][]byte, readers)
	errs := make([]error, readers)
	for i := range readers {
		wg.Go(func() {
			results[i], errs[i] = r.ReadAt(context.Background(), obj, make([]byte, 100), int64(i), nil)
		})
	}
	waitFor(t, func() bool { return r.Stats().Reads.Load() == readers })
	close(store.gate)
	wg.Wait()
	for i := range readers {
		if errs[i] != nil {
			t.Fatalf("reader %d: %v", i, errs[i])
		}
		if !bytes.Equal(results[i], data[i:i+100]) {
			t.Fatalf("reader %d got wrong bytes", i)
		}
	}
	if n := store.calls.Load(); n != 1 {
		t.Fatalf("%d remote reads for one part, want 1", n)
	}
}

func TestSmallColdReadsShareOneRangeGet(t *testing.T) {
	store := newMemStore()
	data := randomBytes(9, 64<<10)
	obj := store.put("f", data)
	store.gate = make(chan struct{})
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: 64 << 10, Prefetch: prefetch.None})
	const readers = 50
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			got, err := r.ReadAt(context.Background(), obj, make([]byte, 4096), 8192, nil)
			if err != nil || !bytes.Equal(got, data[8192:8192+4096]) {
				t.Errorf("small read: %v", err)
			}
		})
	}
	// Every reader waits on the one range GET before it is let through.
	waitFor(t, func() bool { return r.Stats().Joins.Load() == readers-1 })
	close(store.gate)
	wg.Wait()
	// One GET of the 4 KiB range for the readers, one of the whole part
	// queued in the background for the reads after them (counted once it
	// has run).
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	st := r.Stats()
	if st.RangeReads.Load() != 1 || st.StartedBack.Load() != 1 || store.calls.Load() != 2 {
		t.Fatalf("range GETs %d, background parts %d, remote reads %d; want 1, 1, 2",
			st.RangeReads.Load(), st.StartedBack.Load(), store.calls.Load())
	}
	// Now that the part is cached, reads of it cost no GET.
	before := store.calls.Load()
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, 4096), 30000, nil); err != nil {
		t.Fatal(err)
	}
	if store.calls.Load() != before {
		t.Fatal("a read of a cached part went to the store")
	}
}

// A small read of a part no larger than SmallRead (a small file) waits
// for that part: one GET, not a range GET and then the part.
func TestSmallReadOfSmallPartFetchesThePart(t *testing.T) {
	store := newMemStore()
	data := randomBytes(10, 6000)
	obj := store.put("small", data)
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: 64 << 10, SmallRead: 8 << 10, Prefetch: prefetch.None})
	for _, off := range []int64{0, 4000, 100} {
		got, err := r.ReadAt(context.Background(), obj, make([]byte, 1000), off, nil)
		if err != nil || !bytes.Equal(got, data[off:off+1000]) {
			t.Fatalf("read at %d: %v", off, err)
		}
	}
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	st := r.Stats()
	if st.RangeReads.Load() != 0 || st.StartedDemand.Load() != 1 || store.calls.Load() != 1 {
		t.Fatalf("range GETs %d, demand parts %d, remote reads %d; want 0, 1, 1", st.RangeReads.Load(), st.StartedDemand.Load(), store.calls.Load())
	}
}

func TestInterruptedReaderDoesNotCancelSharedFetch(t *testing.T) {
	store := newMemStore()
	data := randomBytes(3, 4096)
	obj := store.put("f", data)
	store.gate = make(chan struct{})
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: 4096, SmallRead: 1})

	ctx, cancel := context.WithCancel(context.Background())
	interrupted := make(chan error, 1)
	go func() {
		_, err := r.ReadAt(ctx, obj, make([]byte, 10), 0, nil)
		interrupted <- err
	}()
	patient := make(chan []byte, 1)
	go func() {
		got, err := r.ReadAt(context.Background(), obj, make([]byte, 10), 100, nil)
		if err != nil {
			t.Error(err)
		}
		patient <- got
	}()
	waitFor(t, func() bool { return r.Stats().Reads.Load() == 2 })
	cancel()
	if err := <-interrupted; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted reader got %v, want context.Canceled", err)
	}
	close(store.gate)
	if got := <-patient; !bytes.Equal(got, data[100:110]) {
		t.Fatal("patient reader got wrong bytes")
	}
	if n := store.calls.Load(); n != 1 {
		t.Fatalf("%d remote reads, want 1", n)
	}
}

func TestFetchesStayWithinTheWorkerPool(t *testing.T) {
	store := newMemStore()
	const ps = 512
	var objs []fetcher.Object
	for i := range 8 {
		objs = append(objs, store.put(fmt.Sprint("f", i), randomBytes(uint64(i), 20*ps)))
	}
	r := newTestReader(t, store, newFakeCache(), 3, Config{PartSize: ps})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			obj := objs[i%len(objs)]
			prefetchOpen(r, obj)
			var seq prefetch.Sequence
			for off := int64(0); off < obj.Size; off += 3 * ps / 2 {
				if _, err := r.ReadAt(context.Background(), obj, make([]byte, ps), off, &seq); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := store.peak.Load(); p > 3 {
		t.Fatalf("peak %d remote reads in flight, pool of 3", p)
	}
}

func TestDemandReadNotBehindBackground(t *testing.T) {
	store := newMemStore()
	big := store.put("big", randomBytes(10, 64*1024))
	small := store.put("small", randomBytes(11, 1024))
	store.gate = make(chan struct{}) // holds every fetch of "big"
	store.gateKey = "big"
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: 1024})
	prefetchOpen(r, big) // 64 background parts; 3 run (one worker is reserved), all blocked
	waitFor(t, func() bool { return store.inflight.Load() == 3 })
	got, err := r.ReadAt(context.Background(), small, make([]byte, 1024), 0, nil)
	if err != nil || !bytes.Equal(got, store.objects["small"]) {
		t.Fatalf("demand read: %v", err)
	}
	if st := r.Stats(); st.PartsFetched.Load() != 1 {
		t.Fatalf("%d parts fetched when the demand read returned; want only its own (background all blocked)", st.PartsFetched.Load())
	}
	close(store.gate)
}

func TestFilesProgressFairly(t *testing.T) {
	store := newMemStore()
	a := store.put("a", randomBytes(12, 20*1024))
	b := store.put("b", randomBytes(13, 20*1024))
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: 1024}) // one worker for background
	store.gate = make(chan struct{})
	prefetchOpen(r, a)
	prefetchOpen(r, b)
	close(store.gate)
	waitFor(t, func() bool { return r.Stats().PartsFetched.Load() == 40 })
	// With one background worker, the order of fetches alternates between
	// the files instead of finishing a first.
	order := store.order()
	firstB := slices.Index(order, "b")
	if firstB < 0 || firstB > 2 {
		t.Fatalf("file b first fetched at position %d of %v", firstB, order[:6])
	}
}

// TestPrefetchAllSweepsInOrder checks the order of --prefetch all's
// sweep: objects of one part first, smallest first, then the larger ones
// in the order given, each finished before the next (a copy reads them in
// that order).
func TestPrefetchAllSweepsInOrder(t *testing.T) {
	store := newMemStore()
	objs := []fetcher.Object{
		store.put("a-big", randomBytes(20, 3*1024)),
		store.put("b-part", randomBytes(21, 1024)),
		store.put("c-big", randomBytes(22, 2*1024+1)),
		store.put("d-tiny", randomBytes(23, 10)),
	}
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: 1024}) // one worker for background
	store.gate = make(chan struct{})
	sweep(r, objs)
	close(store.gate)
	waitFor(t, func() bool { return r.Stats().PartsFetched.Load() == 8 })
	want := []string{"d-tiny", "b-part", "a-big", "a-big", "a-big", "c-big", "c-big", "c-big"}
	if got := store.order(); !slices.Equal(got[:len(want)], want) {
		t.Fatalf("fetch order %v, want %v", got, want)
	}
}

// TestPrefetchAllLeavesTurnsToOpenedFiles checks that the sweep is one
// group among others: a file opened while it runs has its fill fetched
// beside it, not after the whole tree.
func TestPrefetchAllLeavesTurnsToOpenedFiles(t *testing.T) {
	store := newMemStore()
	big := store.put("big", randomBytes(24, 20*1024))
	opened := store.put("opened", randomBytes(25, 3*1024))
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: 1024})
	store.gate = make(chan struct{})
	sweep(r, []fetcher.Object{big})
	waitFor(t, func() bool { return store.inflight.Load() == 1 })
	prefetchOpen(r, opened)
	close(store.gate)
	waitFor(t, func() bool { return r.Stats().PartsFetched.Load() == 23 })
	order := store.order()
	if i := slices.Index(order, "opened"); i < 0 || i > 2 {
		t.Fatalf("the opened file first fetched at position %d of %v", i, order[:6])
	}
}

func TestReadaheadOnSequentialReads(t *testing.T) {
	store := newMemStore()
	const ps = 1024
	data := randomBytes(14, 32*ps)
	obj := store.put("f", data)
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: ps, Prefetch: prefetch.None, MaxReadahead: 4})
	var seq prefetch.Sequence
	readSequentially(t, r, obj, data, &seq, obj.Size, ps/4, nil)
	st := r.Stats()
	if st.StartedAhead.Load() == 0 {
		t.Fatalf("no readahead for a sequential reader: %+v", counters(st))
	}
	if store.calls.Load() != 32 {
		t.Fatalf("%d remote reads for 32 parts", store.calls.Load())
	}
	// A random reader gets no readahead.
	var rnd prefetch.Sequence
	before := r.Stats().StartedAhead.Load()
	for _, off := range []int64{5000, 100, 20000, 9000} {
		if _, err := r.ReadAt(context.Background(), obj, make([]byte, 10), off, &rnd); err != nil {
			t.Fatal(err)
		}
	}
	if r.Stats().StartedAhead.Load() != before {
		t.Fatal("random reads started readahead")
	}
}

func TestChangedObjectFailsAndIsNotCached(t *testing.T) {
	store := newMemStore()
	obj := store.put("f", randomBytes(4, 8192))
	pc := newFakeCache()
	r := newTestReader(t, store, pc, 2, Config{PartSize: 4096, SmallRead: 1, Prefetch: prefetch.None})
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, 10), 0, nil); err != nil {
		t.Fatal(err)
	}
	store.put("f", randomBytes(5, 8192)) // new ETag
	// The part already cached keeps serving the old version's bytes; an
	// unread part fails as changed and nothing of it is cached.
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, 10), 0, nil); err != nil {
		t.Fatalf("cached part: %v", err)
	}
	for range 2 {
		_, err := r.ReadAt(context.Background(), obj, make([]byte, 10), 5000, nil)
		if !errors.Is(err, fetcher.ErrChanged) {
			t.Fatalf("got %v, want ErrChanged", err)
		}
	}
	// A fetch hands its bytes to readers before it caches them: wait for
	// the fetches to end before counting.
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	if n := pc.putCount(); n != 1 {
		t.Fatalf("%d parts cached, want 1", n)
	}
}

func TestFullCacheServesFromMemory(t *testing.T) {
	store := newMemStore()
	data := randomBytes(15, 8192)
	obj := store.put("f", data)
	pc := newFakeCache()
	pc.full = true
	r := newTestReader(t, store, pc, 2, Config{PartSize: 4096, SmallRead: 1, Prefetch: prefetch.None, MemoryLimit: 8192})
	readAll := func() {
		t.Helper()
		for off := int64(0); off < 8192; off += 512 {
			got, err := r.ReadAt(context.Background(), obj, make([]byte, 512), off, nil)
			if err != nil || !bytes.Equal(got, data[off:off+512]) {
				t.Fatalf("read at %d: %v", off, err)
			}
		}
	}
	readAll()
	// Once the writers have been refused, the parts live in the memory
	// tier: the second pass is served from it.
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	before := r.Stats().MemoryHits.Load()
	readAll()
	st := r.Stats()
	if hits := st.MemoryHits.Load() - before; st.NoSpace.Load() != 2 || store.calls.Load() != 2 || hits != 16 {
		t.Fatalf("no-space %d, remote reads %d, memory hits in the second pass %d; want 2, 2, 16", st.NoSpace.Load(), store.calls.Load(), hits)
	}
}

func TestCloseStopsFetches(t *testing.T) {
	before := runtime.NumGoroutine()
	store := newMemStore()
	obj := store.put("f", randomBytes(6, 64<<10))
	store.gate = make(chan struct{}) // never opens: fetches hang until cancelled
	sched := prefetch.New(prefetch.Config{Workers: 4})
	r := mustNew(t, store, newFakeCache(), sched, Config{PartSize: 4096, SmallRead: 1})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			_, _ = r.ReadAt(context.Background(), obj, make([]byte, 10), int64(i)*4096, nil)
		})
	}
	waitFor(t, func() bool { return r.Stats().Reads.Load() == 16 })
	r.Close()
	sched.Close()
	wg.Wait()
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, 1), 0, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v, want ErrClosed", err)
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
}

// waitFor polls cond until it holds, failing the test after a generous
// bound (a hang guard, not a timing assertion).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// slowCache is a fakeCache whose Puts wait at a gate, like a slow disk.
type slowCache struct {
	*fakeCache
	gate    chan struct{}
	waiting atomic.Int64
}

func (c *slowCache) Put(ctx context.Context, k cache.Key, data []byte) error {
	c.waiting.Add(1)
	defer c.waiting.Add(-1)
	select {
	case <-c.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.fakeCache.Put(ctx, k, data)
}

func (c *slowCache) PutSummed(ctx context.Context, k cache.Key, data []byte, _ *cache.Sums) error {
	return c.Put(ctx, k, data)
}

// TestFetchesDoNotWaitForDiskWrites: with every disk write stuck, the
// fetch pool still fetches as many parts as the writers and the workers
// can hold, and no more (the bound on fetched parts in memory). When the
// disk comes back every part is cached, and a read meanwhile is served
// from the fetched bytes.
func TestFetchesDoNotWaitForDiskWrites(t *testing.T) {
	const ps, workers, writers = 4096, 4, 1
	store := newMemStore()
	data := randomBytes(21, 16*ps)
	obj := store.put("f", data)
	pc := &slowCache{fakeCache: newFakeCache(), gate: make(chan struct{})}
	r := newTestReader(t, store, pc, workers, Config{PartSize: ps, SmallRead: 1, Prefetch: prefetch.Open, Writers: writers})
	var once sync.Once
	openDisk := func() { once.Do(func() { close(pc.gate) }) }
	t.Cleanup(openDisk) // before the Reader's Close, which waits for the writes
	prefetchOpen(r, obj)

	// One part in each writer and one blocked handing over per worker
	// that background work may use (all but one of them): the fetches that
	// can finish before any write does.
	const held = writers + workers - 1
	waitFor(t, func() bool { return store.calls.Load() == held && pc.waiting.Load() == writers })
	time.Sleep(50 * time.Millisecond) // room for a fetch beyond the bound to show up
	if n := store.calls.Load(); n != held {
		t.Fatalf("%d parts fetched while the disk was stuck, want %d", n, held)
	}
	got, err := r.ReadAt(context.Background(), obj, make([]byte, 100), 10, nil)
	if err != nil || !bytes.Equal(got, data[10:110]) {
		t.Fatalf("read of a fetched, unwritten part: %v", err)
	}

	openDisk()
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	if n, calls := pc.putCount(), store.calls.Load(); n != 16 || calls != 16 {
		t.Fatalf("%d parts cached after %d fetches, want 16 and 16", n, calls)
	}
}

// TestCloseFinishesQueuedWrites: parts fetched before Close are stored
// by it, those waiting for a writer included, and no writer outlives it.
func TestCloseFinishesQueuedWrites(t *testing.T) {
	before := runtime.NumGoroutine()
	store := newMemStore()
	obj := store.put("f", randomBytes(22, 8*4096))
	pc := &slowCache{fakeCache: newFakeCache(), gate: make(chan struct{})}
	sched := prefetch.New(prefetch.Config{Workers: 2})
	r := mustNew(t, store, pc, sched, Config{PartSize: 4096, SmallRead: 1, Writers: 2})
	var once sync.Once
	openDisk := func() { once.Do(func() { close(pc.gate) }) }
	t.Cleanup(func() {
		openDisk()
		r.Close()
		sched.Close()
	})
	prefetchOpen(r, obj)
	// Two parts being written, one held by the one worker background
	// work may use.
	waitFor(t, func() bool { return pc.waiting.Load() == 2 && store.calls.Load() == 3 })
	closed := make(chan struct{})
	go func() { r.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned with writes queued")
	case <-time.After(20 * time.Millisecond):
	}
	openDisk()
	<-closed
	if n := pc.putCount(); n != 3 {
		t.Fatalf("%d parts cached by Close, want the 3 fetched", n)
	}
	sched.Close()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
}

// A read that lands next to the one before, once, is not a stream: it is
// served by a GET of its own range like any small cold read (a random
// reader's chance neighbour, or the second read the kernel sends around
// a page fault of a mapped file), and does not wait for a whole part.
// The second read in a row is a stream and waits for its part, as does a
// reader from the start of the file.
func TestNeighbourReadIsNotAStream(t *testing.T) {
	store := newMemStore()
	data := randomBytes(12, 1<<20)
	obj := store.put("f", data)
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: 64 << 10, Prefetch: prefetch.None})
	read := func(seq *prefetch.Sequence, off int64) {
		t.Helper()
		got, err := r.ReadAt(context.Background(), obj, make([]byte, 4096), off, seq)
		if err != nil || !bytes.Equal(got, data[off:off+4096]) {
			t.Fatalf("read at %d: %v", off, err)
		}
	}
	var seq prefetch.Sequence
	read(&seq, 250<<10) // a seek: part 3
	read(&seq, 400<<10) // within seqSlack of the first: part 6
	if st := r.Stats(); st.RangeReads.Load() != 2 || st.StartedDemand.Load() != 0 {
		t.Fatalf("after a read and its neighbour: range GETs %d, demand parts %d; want 2 and 0", st.RangeReads.Load(), st.StartedDemand.Load())
	}
	read(&seq, 404<<10) // the second in a row: a stream
	if st := r.Stats(); st.RangeReads.Load() != 2 {
		t.Fatalf("a stream's read went by a range GET (range GETs %d, want 2)", st.RangeReads.Load())
	}

	var fromStart prefetch.Sequence
	read(&fromStart, 0)
	if st := r.Stats(); st.RangeReads.Load() != 2 || st.StartedDemand.Load() != 1 {
		t.Fatalf("a read from the start: range GETs %d, demand parts %d; want 2 and 1", st.RangeReads.Load(), st.StartedDemand.Load())
	}
}

// A small cold read across a part border is served by a GET of its own
// range in each part, with both parts queued in the background: it does
// not wait for either whole part.
func TestSmallReadAcrossPartsDoesNotWaitForParts(t *testing.T) {
	store := newMemStore()
	data := randomBytes(13, 256<<10)
	obj := store.put("f", data)
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: 64 << 10, Prefetch: prefetch.None})
	const off = 64<<10 - 2048
	got, err := r.ReadAt(context.Background(), obj, make([]byte, 4096), off, nil)
	if err != nil || !bytes.Equal(got, data[off:off+4096]) {
		t.Fatalf("read across the border: %v", err)
	}
	if st := r.Stats(); st.RangeReads.Load() != 2 || st.StartedDemand.Load() != 0 || st.StartedBack.Load() != 2 {
		t.Fatalf("range GETs %d, demand parts %d, background parts %d; want 2, 0, 2", st.RangeReads.Load(), st.StartedDemand.Load(), st.StartedBack.Load())
	}
}

// The two range GETs of a small cold read across a part border run at
// once: the read waits for the slower of them, not for both in a row.
func TestSmallReadAcrossPartsFetchesBothAtOnce(t *testing.T) {
	store := newMemStore()
	data := randomBytes(14, 256<<10)
	obj := store.put("f", data)
	store.gate = make(chan struct{})
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: 64 << 10, Prefetch: prefetch.None})
	const off = 128<<10 - 1024
	done := make(chan error, 1)
	go func() {
		got, err := r.ReadAt(context.Background(), obj, make([]byte, 4096), off, nil)
		if err == nil && !bytes.Equal(got, data[off:off+4096]) {
			err = errors.New("wrong bytes")
		}
		done <- err
	}()
	// Both range GETs are asked for while the store holds every read.
	waitFor(t, func() bool { return r.Stats().RangeReads.Load() == 2 })
	select {
	case err := <-done:
		t.Fatalf("the read returned while its GETs were held: %v", err)
	default:
	}
	close(store.gate)
	if err := <-done; err != nil {
		t.Fatalf("read across the border: %v", err)
	}
	var ranges []readRange
	for _, rr := range store.rangesOf("f") {
		if rr.n < 64<<10 {
			ranges = append(ranges, rr)
		}
	}
	slices.SortFunc(ranges, func(a, b readRange) int { return int(a.off - b.off) })
	want := []readRange{{"f", off, 1024}, {"f", 128 << 10, 3072}}
	if !slices.Equal(ranges, want) {
		t.Fatalf("range GETs %v, want %v", ranges, want)
	}
}

// Opening a file starts its first part as readahead and queues the rest
// in the background; a reopened file whose first part is cached starts
// nothing for it.
func TestOnOpenStartsTheFirstPartAhead(t *testing.T) {
	store := newMemStore()
	data := randomBytes(15, 4*4096)
	obj := store.put("f", data)
	store.gate = make(chan struct{})
	pc := newFakeCache()
	r := newTestReader(t, store, pc, 8, Config{PartSize: 4096, Prefetch: prefetch.Open})
	prefetchOpen(r, obj)
	st := r.Stats()
	if st.StartedAhead.Load() != 1 || st.StartedBack.Load() != 3 {
		t.Fatalf("readahead parts %d, background parts %d; want 1 (the first) and 3", st.StartedAhead.Load(), st.StartedBack.Load())
	}
	// The first part's fetch is the readahead one.
	waitFor(t, func() bool { return r.sched.Stats().Running[prefetch.Readahead] == 1 })
	close(store.gate)
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	got, err := r.ReadAt(context.Background(), obj, make([]byte, len(data)), 0, nil)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after the fill: %v", err)
	}

	// A new Reader over the same cache: the object's parts are cached.
	r2 := newTestReader(t, store, pc, 8, Config{PartSize: 4096, Prefetch: prefetch.Open})
	prefetchOpen(r2, obj)
	if st := r2.Stats(); st.StartedAhead.Load() != 0 || st.StartedBack.Load() != 0 {
		t.Fatalf("with every part cached: readahead parts %d, background parts %d; want 0 and 0", st.StartedAhead.Load(), st.StartedBack.Load())
	}
}

// SmallAfter queues the first prefetch.SmallAhead small files after an open, each
// once however often it is asked.
func TestSmallAfterIsBounded(t *testing.T) {
	store := newMemStore()
	var objs []fetcher.Object
	for i := range prefetch.SmallAhead + 8 {
		objs = append(objs, store.put(fmt.Sprint("f", i), randomBytes(uint64(100+i), 100)))
	}
	store.gate = make(chan struct{})
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: 4096, Prefetch: prefetch.Open})
	prefetchSmallAfter(r, objs)
	prefetchSmallAfter(r, objs[1:])
	if n := r.Stats().StartedBack.Load(); n != prefetch.SmallAhead+1 {
		t.Fatalf("%d background fetches started, want %d: the first %d, then one more from the second call", n, prefetch.SmallAhead+1, prefetch.SmallAhead)
	}
	close(store.gate)
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	for _, obj := range objs[prefetch.SmallAhead+1:] {
		if slices.Contains(store.order(), obj.Key) {
			t.Errorf("%s was fetched; it is past the bound", obj.Key)
		}
	}
}
