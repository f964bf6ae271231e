package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segfs/segfs/fetcher"
)

// memStore is an in-memory fetcher.Store with real ETag semantics. A test
// may hold every ReadRange at a gate and inject errors.
type memStore struct {
	counters fetcher.Counters

	mu      sync.Mutex
	objects map[string][]byte
	etags   map[string]string
	gate    chan struct{} // if non-nil, ReadRange waits for it to close
	fail    error         // if non-nil, ReadRange returns it

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
	data, etag := s.objects[obj.Key], s.etags[obj.Key]
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
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

func TestReadAtByteExact(t *testing.T) {
	store := newMemStore()
	const ps = 1000
	data := randomBytes(1, 10*ps+123)
	obj := store.put("f", data)
	r := NewReader(store, ReaderConfig{PartSize: ps, MaxFetches: 3, MemoryLimit: 4 * ps})
	defer r.Close()

	cases := []struct {
		name     string
		off, len int64
		want     int64 // bytes expected back
	}{
		{"first byte", 0, 1, 1},
		{"inside one part", 10, 100, 100},
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
		t.Run(c.name, func(t *testing.T) {
			got, err := r.ReadAt(context.Background(), obj, make([]byte, c.len), c.off)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(got)) != c.want {
				t.Fatalf("got %d bytes, want %d", len(got), c.want)
			}
			if c.want > 0 && !bytes.Equal(got, data[c.off:c.off+c.want]) {
				t.Fatalf("bytes differ at [%d,%d)", c.off, c.off+c.want)
			}
		})
	}

	// Randomized: many reads of random sizes and offsets, compared to the
	// source, with a memory tier small enough to evict constantly.
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 2000; i++ {
		off := rng.Int64N(int64(len(data)) + 10)
		n := rng.Int64N(3*ps) + 1
		got, err := r.ReadAt(context.Background(), obj, make([]byte, n), off)
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
	if st := r.Stats(); st.MemoryBytes > 4*ps {
		t.Fatalf("memory tier holds %d bytes, limit %d", st.MemoryBytes, 4*ps)
	}
}

func TestSingleFlight(t *testing.T) {
	store := newMemStore()
	data := randomBytes(2, 4096)
	obj := store.put("f", data)
	gate := make(chan struct{})
	store.gate = gate
	r := NewReader(store, ReaderConfig{PartSize: 4096})
	defer r.Close()

	const readers = 100
	var wg sync.WaitGroup
	results := make([][]byte, readers)
	errs := make([]error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = r.ReadAt(context.Background(), obj, make([]byte, 100), int64(i))
		}()
	}
	// Let every reader reach the shared fetch before it completes.
	waitFor(t, func() bool { st := r.Stats(); return st.Reads == readers })
	close(gate)
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

func TestInterruptedReaderDoesNotCancelSharedFetch(t *testing.T) {
	store := newMemStore()
	data := randomBytes(3, 4096)
	obj := store.put("f", data)
	gate := make(chan struct{})
	store.gate = gate
	r := NewReader(store, ReaderConfig{PartSize: 4096})
	defer r.Close()

	ctx, cancel := context.WithCancel(context.Background())
	interrupted := make(chan error, 1)
	go func() {
		_, err := r.ReadAt(ctx, obj, make([]byte, 10), 0)
		interrupted <- err
	}()
	patient := make(chan []byte, 1)
	go func() {
		got, err := r.ReadAt(context.Background(), obj, make([]byte, 10), 100)
		if err != nil {
			t.Error(err)
		}
		patient <- got
	}()
	waitFor(t, func() bool { return r.Stats().Reads == 2 })
	cancel()
	if err := <-interrupted; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted reader got %v, want context.Canceled", err)
	}
	close(gate)
	if got := <-patient; !bytes.Equal(got, data[100:110]) {
		t.Fatal("patient reader got wrong bytes")
	}
	if n := store.calls.Load(); n != 1 {
		t.Fatalf("%d remote reads, want 1", n)
	}
}

func TestMaxFetchesBound(t *testing.T) {
	store := newMemStore()
	const ps = 512
	var objs []fetcher.Object
	for i := range 8 {
		objs = append(objs, store.put(fmt.Sprint("f", i), randomBytes(uint64(i), 20*ps)))
	}
	r := NewReader(store, ReaderConfig{PartSize: ps, MaxFetches: 3})
	defer r.Close()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obj := objs[i%len(objs)]
			for off := int64(0); off < obj.Size; off += 3 * ps / 2 {
				if _, err := r.ReadAt(context.Background(), obj, make([]byte, ps), off); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := store.peak.Load(); p > 3 {
		t.Fatalf("peak %d remote reads in flight, bound 3", p)
	}
}

func TestChangedObjectError(t *testing.T) {
	store := newMemStore()
	obj := store.put("f", randomBytes(4, 8192))
	r := NewReader(store, ReaderConfig{PartSize: 4096})
	defer r.Close()
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	store.put("f", randomBytes(5, 8192)) // new ETag
	// The part already read is served from memory with the old bytes; an
	// unread part fails as changed and is not kept.
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, 10), 0); err != nil {
		t.Fatalf("cached part: %v", err)
	}
	for range 2 {
		_, err := r.ReadAt(context.Background(), obj, make([]byte, 10), 5000)
		if !errors.Is(err, fetcher.ErrChanged) {
			t.Fatalf("got %v, want ErrChanged", err)
		}
	}
	if st := r.Stats(); st.PartFetchErrors != 2 {
		t.Fatalf("%d failed fetches, want 2 (errors are not cached)", st.PartFetchErrors)
	}
}

func TestCloseStopsFetches(t *testing.T) {
	before := runtime.NumGoroutine()
	store := newMemStore()
	obj := store.put("f", randomBytes(6, 64<<10))
	store.gate = make(chan struct{}) // never opens: fetches hang until cancelled
	r := NewReader(store, ReaderConfig{PartSize: 4096, MaxFetches: 4})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = r.ReadAt(ctx, obj, make([]byte, 10), int64(i)*4096)
		}()
	}
	waitFor(t, func() bool { return r.Stats().Reads == 16 })
	r.Close()
	cancel()
	wg.Wait()
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
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
