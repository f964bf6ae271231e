package reader

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/tests/hostile"
	"github.com/segfs/segfs/tests/localstore"
)

// TestFrameReaderStats: a read of a cold compressed entry decodes each
// frame it touches once, counting the decode and its time; the same read
// again is served from the decoded frames in memory.
func TestFrameReaderStats(t *testing.T) {
	logical := bytes.Repeat([]byte("0123456789abcdef"), 1<<10) // 16 KiB: 4 frames
	store, objs := localstore.Dir(t, map[string]localstore.File{"x.fdt.zst": {Data: localstore.Seekable(t, logical), MTime: time.Now()}})
	entries, err := entry.FromObjects(context.Background(), store, objs, 1, slog.New(slog.DiscardHandler))
	if err != nil || len(entries) != 1 || entries[0].Table == nil {
		t.Fatalf("entries %+v, %v", entries, err)
	}
	pc, err := cache.Open(cache.Config{Dir: filepath.Join(t.TempDir(), "cache")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	sched := prefetch.New(prefetch.Config{Workers: 2})
	r := mustNew(t, store, pc, sched, Config{Source: "test", PartSize: 64 << 10, Prefetch: "none"})
	fr, err := newTestFrames(r, FrameConfig{CacheBytes: 1 << 20})
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
	st := fr.r.Stats()
	if st.FrameDecodes.Load() != 3 || st.DecodedBytes.Load() != 12<<10 || st.DecodeNanos.Load() <= 0 || st.FrameHits.Load() != 0 {
		t.Errorf("after a cold read: %+v, want 3 decodes of 12 KiB in a positive time, no hits", counters(st))
	}
	fr.frames.Wait() // ristretto admits asynchronously
	if _, err := fr.ReadAt(context.Background(), entries[0], buf, 3<<10, nil); err != nil {
		t.Fatal(err)
	}
	if st2 := fr.r.Stats(); st2.FrameDecodes.Load() != 3 || st2.FrameHits.Load() != 3 {
		t.Errorf("after the same read again: %+v, want no new decode and 3 hits", counters(st2))
	}
}

// newFrameTest stores obj in a memStore and returns the store, the entry
// of obj (its seek table read as entry.FromObjects does) and a FrameReader with cfg
// over a Reader of 64 KiB parts without prefetch, whose 16 fetch workers
// can fetch the parts of several frames at once.
func newFrameTest(t *testing.T, obj []byte, cfg FrameConfig) (*memStore, Entry, *FrameReader) {
	t.Helper()
	store := newMemStore()
	o := store.put("x.fdt.zst", obj)
	entries, err := entry.FromObjects(context.Background(), store, []fetcher.Object{o}, 1, slog.New(slog.DiscardHandler))
	if err != nil || len(entries) != 1 || entries[0].Table == nil {
		t.Fatalf("entries %+v, %v; want x.fdt with its seek table", entries, err)
	}
	r := newTestReader(t, store, newFakeCache(), 16, Config{PartSize: 64 << 10, Prefetch: prefetch.None})
	fr, err := newTestFrames(r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fr.Close) // before the Reader's cleanup: cleanups run last first
	return store, entries[0], fr
}

// holdReads makes every ReadRange of store wait until the returned
// function is called.
func holdReads(store *memStore) (release func()) {
	gate := make(chan struct{})
	store.mu.Lock()
	store.gate = gate
	store.mu.Unlock()
	return sync.OnceFunc(func() { close(gate) })
}

// fetched reports whether a ReadRange of store touched the compressed
// bytes of frame f of e.
func fetched(store *memStore, e Entry, f compress.Frame) bool {
	for _, rr := range store.rangesOf(e.Obj.Key) {
		if rr.off < f.CompOff+f.CompSize && rr.off+rr.n > f.CompOff {
			return true
		}
	}
	return false
}

// TestFrameReaderHugeFrame: an object of about 32 KiB whose table claims
// one 1 GiB frame is listed at its logical size, but with the default
// limit each of three concurrent one-byte reads fails (EIO at the edge)
// without fetching or allocating anything like the frame.
func TestFrameReaderHugeFrame(t *testing.T) {
	obj := hostile.HugeFrameObject()
	store, e, fr := newFrameTest(t, obj, FrameConfig{CacheBytes: DefaultFrameCache})
	if len(obj) > 40<<10 || e.Size() != compress.MaxFrameSize {
		t.Fatalf("hostile object of %d bytes shows %d", len(obj), e.Size())
	}
	calls := store.calls.Load()
	errs := make([]error, 3)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = fr.ReadAt(context.Background(), e, make([]byte, 1), int64(i)<<20, nil)
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, err := range errs {
		if !errors.Is(err, compress.ErrFrameTooLarge) {
			t.Fatalf("read %d: %v, want ErrFrameTooLarge", i, err)
		}
		if !errors.As(err, new(LoggedError)) {
			t.Errorf("read %d: %v is not marked as logged already", i, err)
		}
	}
	t.Log(errs[0])
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("three refused reads allocated %d bytes", alloc)
	}
	st := fr.r.Stats()
	if st.FrameRejected.Load() != 3 || st.FrameDecodes.Load() != 0 || st.DecodeMemoryPeak.Load() != 0 || store.calls.Load() != calls {
		t.Errorf("stats %+v, %d fetches; want 3 rejected reads, nothing fetched, reserved or decoded", counters(st), store.calls.Load()-calls)
	}
}

// TestFrameReaderSharesDecodes: concurrent reads of one frame larger than
// the frame cache decode it once; the frame is not kept, so a later read
// decodes it again; no budget stays reserved.
func TestFrameReaderSharesDecodes(t *testing.T) {
	const frameSize, readers = 256 << 10, 4
	data := randomBytes(7, frameSize)
	var obj bytes.Buffer
	if _, _, err := compress.Encode(context.Background(), &obj, bytes.NewReader(data), compress.EncoderOptions{FrameSize: frameSize}); err != nil {
		t.Fatal(err)
	}
	store, e, fr := newFrameTest(t, obj.Bytes(), FrameConfig{CacheBytes: frameSize / 4})
	release := holdReads(store)
	defer release()
	got := make([][]byte, readers)
	errs := make([]error, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() {
			got[i], errs[i] = fr.ReadAt(context.Background(), e, make([]byte, 4096), int64(i)*50000, nil)
		})
	}
	// The first read starts the decode, which waits at the store; the
	// others join it.
	waitFor(t, func() bool { return fr.r.Stats().FrameShared.Load() == readers-1 })
	release()
	wg.Wait()
	for i := range readers {
		if off := i * 50000; errs[i] != nil || !bytes.Equal(got[i], data[off:off+4096]) {
			t.Fatalf("read %d: %v, or bytes differ", i, errs[i])
		}
	}
	if st := fr.r.Stats(); st.FrameDecodes.Load() != 1 || st.DecodedBytes.Load() != frameSize || st.DecodeMemory.Load() != 0 {
		t.Errorf("after %d concurrent reads: %+v, want one decode and no budget held", readers, counters(st))
	}
	if _, err := fr.ReadAt(context.Background(), e, make([]byte, 1), 0, nil); err != nil {
		t.Fatal(err)
	}
	if st := fr.r.Stats(); st.FrameDecodes.Load() != 2 || st.FrameHits.Load() != 0 {
		t.Errorf("a later read of a frame larger than the cache: %+v, want a second decode", counters(st))
	}
}

// TestFrameReaderDecodeBudget: with a budget that holds one decode but not
// two, reads of two frames decode one after the other: the second waits
// for the budget before fetching, and the bytes reserved never exceed it.
func TestFrameReaderDecodeBudget(t *testing.T) {
	const frameSize = 256 << 10
	data := randomBytes(8, 4*frameSize)
	var obj bytes.Buffer
	if _, _, err := compress.Encode(context.Background(), &obj, bytes.NewReader(data), compress.EncoderOptions{FrameSize: frameSize}); err != nil {
		t.Fatal(err)
	}
	budget := MinDecodeMemory(frameSize) * 3 / 2
	store, e, fr := newFrameTest(t, obj.Bytes(), FrameConfig{DecodeBytes: budget, MaxFrameSize: frameSize})
	f0, f2 := e.Table.Frames[0], e.Table.Frames[2]
	if cost := compress.DecodeCost(f0); 2*cost <= budget {
		t.Fatalf("budget %d holds two decodes of %d", budget, cost)
	}
	release := holdReads(store)
	defer release()
	var wg sync.WaitGroup
	for _, f := range []compress.Frame{f0, f2} {
		wg.Go(func() {
			got, err := fr.ReadAt(context.Background(), e, make([]byte, 100), f.Off+7, nil)
			if err != nil || !bytes.Equal(got, data[f.Off+7:f.Off+107]) {
				t.Errorf("%v: %v, or bytes differ", f, err)
			}
		})
	}
	// Either the second decode waits for the budget, or (were there no
	// budget) both fetch at once.
	waitFor(t, func() bool {
		return fr.r.Stats().DecodeWaits.Load() >= 1 || (fetched(store, e, f0) && fetched(store, e, f2))
	})
	release()
	wg.Wait()
	st := fr.r.Stats()
	t.Logf("budget %d: %+v", budget, counters(st))
	if st.DecodeMemoryPeak.Load() > budget || st.DecodeMemoryPeak.Load() < compress.DecodeCost(f0) || st.DecodeMemory.Load() != 0 || st.FrameDecodes.Load() != 2 {
		t.Errorf("stats %+v: want two decodes, at most %d bytes reserved at once, none left", counters(st), budget)
	}
}

// TestFrameReaderInterrupted: a reader interrupted while it waits for a
// shared decode fails alone; when every reader of a decode is gone, the
// decode stops and releases its budget, and a later read starts afresh.
func TestFrameReaderInterrupted(t *testing.T) {
	data := randomBytes(9, 3*(64<<10))
	var obj bytes.Buffer
	if _, _, err := compress.Encode(context.Background(), &obj, bytes.NewReader(data), compress.EncoderOptions{FrameSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	store, e, fr := newFrameTest(t, obj.Bytes(), FrameConfig{CacheBytes: 1 << 20})
	release := holdReads(store)
	ctx, cancel := context.WithCancel(context.Background())
	interrupted := make(chan error, 1)
	go func() {
		_, err := fr.ReadAt(ctx, e, make([]byte, 10), 0, nil)
		interrupted <- err
	}()
	waitFor(t, func() bool { return fr.r.Stats().DecodeMemory.Load() > 0 }) // the decode waits at the store
	var wg sync.WaitGroup
	wg.Go(func() {
		got, err := fr.ReadAt(context.Background(), e, make([]byte, 10), 5, nil)
		if err != nil || !bytes.Equal(got, data[5:15]) {
			t.Errorf("the other reader: %v, or bytes differ", err)
		}
	})
	waitFor(t, func() bool { return fr.r.Stats().FrameShared.Load() == 1 })
	cancel()
	if err := <-interrupted; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted reader: %v, want context.Canceled", err)
	}
	release()
	wg.Wait()

	// Frame 1: its only reader leaves while the fetch waits.
	release = holdReads(store)
	defer release()
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		_, err := fr.ReadAt(ctx, e, make([]byte, 10), 64<<10, nil)
		interrupted <- err
	}()
	waitFor(t, func() bool { return fr.r.Stats().DecodeMemory.Load() > 0 })
	cancel()
	if err := <-interrupted; !errors.Is(err, context.Canceled) {
		t.Fatalf("lone interrupted reader: %v", err)
	}
	waitFor(t, func() bool { return fr.r.Stats().DecodeMemory.Load() == 0 })
	release()
	got, err := fr.ReadAt(context.Background(), e, make([]byte, 10), 64<<10, nil)
	if err != nil || !bytes.Equal(got, data[64<<10:64<<10+10]) {
		t.Fatalf("read after the abandoned decode: %v", err)
	}
	if st := fr.r.Stats(); st.FrameDecodes.Load() != 2 {
		t.Errorf("stats %+v: want the shared decode and the fresh one (the abandoned one never decoded)", counters(st))
	}
}

// TestFrameReaderClose: Close stops a decode that waits at the store and
// returns once its goroutine is done; its reader and later ones get
// errors wrapping ErrClosed.
func TestFrameReaderClose(t *testing.T) {
	data := randomBytes(10, 64<<10)
	store, e, fr := newFrameTest(t, localstore.Seekable(t, data), FrameConfig{})
	release := holdReads(store)
	defer release()
	failed := make(chan error, 1)
	go func() {
		_, err := fr.ReadAt(context.Background(), e, make([]byte, 10), 0, nil)
		failed <- err
	}()
	waitFor(t, func() bool { return fr.r.Stats().DecodeMemory.Load() > 0 }) // the decode waits at the store
	fr.Close()
	if err := <-failed; !errors.Is(err, ErrClosed) {
		t.Fatalf("read in progress at Close: %v, want ErrClosed", err)
	}
	if _, err := fr.ReadAt(context.Background(), e, make([]byte, 10), 5<<10, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v, want ErrClosed", err)
	}
	fr.Close() // a second Close is harmless
}

func TestFrameConfig(t *testing.T) {
	r := newTestReader(t, newMemStore(), newFakeCache(), 1, Config{})
	for _, tc := range []struct {
		cfg FrameConfig
		ok  bool
	}{
		{FrameConfig{}, true},
		{FrameConfig{CacheBytes: -1}, false},
		{FrameConfig{MaxFrameSize: compress.MaxFrameSize + 1}, false},
		{FrameConfig{MaxFrameSize: -1}, false},
		{FrameConfig{DecodeBytes: MinDecodeMemory(compress.DefaultFrameLimit) - 1}, false},
		{FrameConfig{DecodeBytes: MinDecodeMemory(compress.DefaultFrameLimit)}, true},
		{FrameConfig{MaxFrameSize: 32 << 20}, false}, // the default budget holds no frame that large
	} {
		fr, err := newTestFrames(r, tc.cfg)
		if (err == nil) != tc.ok {
			t.Errorf("frame reader of %+v = %v, want ok %v", tc.cfg, err, tc.ok)
		}
		if fr != nil {
			fr.Close()
		}
	}
	if DefaultDecodeMemory < MinDecodeMemory(compress.DefaultFrameLimit) {
		t.Errorf("the default decode memory %d cannot decode a frame of the default limit (%d needed)",
			DefaultDecodeMemory, MinDecodeMemory(compress.DefaultFrameLimit))
	}
}

// TestFrameReaderHoldsUntilCopied: a decoded frame stays counted in the
// decode budget until its last reader is done with it, and only the
// frame (not its compressed bytes) stays counted.
func TestFrameReaderHoldsUntilCopied(t *testing.T) {
	data := randomBytes(11, 64<<10)
	_, e, fr := newFrameTest(t, localstore.Seekable(t, data), FrameConfig{})
	got, done, err := fr.frame(context.Background(), e, 1, nil)
	if err != nil || !bytes.Equal(got, data[4<<10:8<<10]) || done == nil {
		t.Fatalf("frame 1: %v, or bytes differ", err)
	}
	if st := fr.r.Stats(); st.DecodeMemory.Load() != e.Table.Frames[1].Size {
		t.Errorf("while the frame is in use: %d bytes reserved, want its size %d", st.DecodeMemory.Load(), e.Table.Frames[1].Size)
	}
	done()
	if st := fr.r.Stats(); st.DecodeMemory.Load() != 0 {
		t.Errorf("once it is done: %d bytes reserved", st.DecodeMemory.Load())
	}
}

// An object refused for a frame past the limit is logged once, however
// many of its reads fail, the edge's log of each failed read included.
func TestRefusedObjectLogsOnce(t *testing.T) {
	var warns warnCounter
	log := slog.New(&warns)
	store := newMemStore()
	o := store.put("x.fdt.zst", hostile.HugeFrameObject())
	entries, err := entry.FromObjects(context.Background(), store, []fetcher.Object{o}, 1, slog.New(slog.DiscardHandler))
	if err != nil || len(entries) != 1 || entries[0].Table == nil {
		t.Fatalf("entries %+v, %v; want x.fdt with its seek table", entries, err)
	}
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: 64 << 10, Prefetch: prefetch.None, Logger: log})
	fr, err := newTestFrames(r, FrameConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fr.Close)
	e := entries[0]
	for i := range 3 {
		_, err := fr.ReadAt(context.Background(), e, make([]byte, 1), int64(i), nil)
		if !errors.Is(err, compress.ErrFrameTooLarge) || !errors.As(err, new(LoggedError)) {
			t.Fatalf("read %d: %v, want ErrFrameTooLarge marked as logged already (the edge logs it at debug)", i, err)
		}
	}
	if n := warns.n.Load(); n != 1 {
		t.Fatalf("%d warnings for three refused reads of one object, want 1", n)
	}
}

// warnCounter is a slog.Handler that counts records at Warn and above.
type warnCounter struct{ n atomic.Int64 }

func (w *warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.n.Add(1)
	}
	return nil
}
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }
