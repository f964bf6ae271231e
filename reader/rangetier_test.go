package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// rangeTierTest stores a Lucene-named big file and a small one, and
// returns the store, their data, a Dir of them and a cache directory.
func rangeTierTest(t *testing.T) (*memStore, map[string][]byte, *prefetch.Dir, string) {
	t.Helper()
	store := newMemStore()
	files := map[string][]byte{"_0.fdt": randomBytes(40, 3<<20+12345), "_0.si": randomBytes(41, 400)}
	dir := &prefetch.Dir{}
	for _, n := range []string{"_0.fdt", "_0.si"} {
		dir.Add(n, store.put(n, files[n]))
	}
	return store, files, dir, filepath.Join(t.TempDir(), "cache")
}

func openCacheAt(t *testing.T, dir string) *cache.Cache {
	t.Helper()
	pc, err := cache.Open(cache.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// headTailReads are the reads an open makes of the big file: its header
// and its footer, at the sizes the kernel may send.
func headTailReads(size int64) [][2]int64 {
	return [][2]int64{{0, 100}, {0, 4096}, {4096, 60 << 10}, {size - 16, 16}, {size - 68<<10, 68 << 10}}
}

// Once a directory is seen, the head and tail of its large file and its
// small file whole are served with no further GET; the blocks survive in
// the disk cache, so a new Reader on it serves them with no GET at all;
// the body is not fetched.
func TestRangeTierServesAnOpenAndSurvives(t *testing.T) {
	store, files, dir, cdir := rangeTierTest(t)
	big := dir.Files[0]
	pc := openCacheAt(t, cdir)
	r := newTestReader(t, store, pc, 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None, SegmentPrefetch: true})
	r.SeenDir(Dir{dir})
	waitFor(t, func() bool {
		return r.Stats().RangesPrefetched.Load() == 3 && store.inflight.Load() == 0 && r.Stats().InflightParts.Load() == 0
	})
	waitFor(t, func() bool {
		return r.rtier.diskLevel(keyOfPart(big, 0)) >= 0 && r.rtier.diskLevel(keyOfPart(big, (big.Size-1)/RangeBlock)) >= 0
	})
	gets := store.counters.Gets.Load()
	for _, rd := range headTailReads(big.Size) {
		got, err := r.ReadAt(context.Background(), big, make([]byte, rd[1]), rd[0], nil)
		if err != nil || !bytes.Equal(got, files["_0.fdt"][rd[0]:rd[0]+rd[1]]) {
			t.Fatalf("read %v: %v, or wrong bytes", rd, err)
		}
	}
	if n := store.counters.Gets.Load() - gets; n != 0 {
		t.Errorf("%d GETs for the reads of an open after the directory was seen; want 0", n)
	}
	if hits := r.Stats().RangeTierHits.Load(); hits < int64(len(headTailReads(big.Size))) {
		t.Errorf("%d range-tier hits, want %d", hits, len(headTailReads(big.Size)))
	}
	if fetched := r.Stats().FetchedBytes.Load(); fetched > 4*RangeBlock+(1<<20) {
		t.Errorf("%d bytes fetched; want only heads, tails and the small file", fetched)
	}
	r.Close()
	pc.Close()

	// A new Reader on the same cache: everything from disk.
	store.counters.Gets.Store(0)
	r2 := newTestReader(t, store, openCacheAt(t, cdir), 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None})
	for _, rd := range headTailReads(big.Size) {
		got, err := r2.ReadAt(context.Background(), big, make([]byte, rd[1]), rd[0], nil)
		if err != nil || !bytes.Equal(got, files["_0.fdt"][rd[0]:rd[0]+rd[1]]) {
			t.Fatalf("remount read %v: %v, or wrong bytes", rd, err)
		}
	}
	if n := store.counters.Gets.Load(); n != 0 {
		t.Errorf("%d GETs after a restart; want 0: the range tier is persisted", n)
	}
}

// A damaged range-tier block is found by its checksums, removed, and the
// read is served from the remote.
func TestRangeTierDamagedBlock(t *testing.T) {
	store, files, dir, cdir := rangeTierTest(t)
	big := dir.Files[0]
	pc := openCacheAt(t, cdir)
	r := newTestReader(t, store, pc, 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None, SegmentPrefetch: true})
	r.SeenDir(Dir{dir})
	tail := keyOfPart(big, (big.Size-1)/RangeBlock)
	waitFor(t, func() bool {
		return r.rtier.diskLevel(keyOfPart(big, 0)) >= 0 && r.rtier.diskLevel(tail) >= 0
	})
	r.Close()
	pc.Close()
	// Damage every range-tier file on disk (the part files of the small
	// file are left: they are not the tier's).
	damaged := 0
	filepath.Walk(cdir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || filepath.Ext(p) != ".part" || info.Size() < 8<<10 { // not the small file's part
			return nil
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return nil
		}
		defer f.Close()
		f.WriteAt([]byte{0xff, 0x00, 0xff}, info.Size()-10) // in the last bytes of its block
		damaged++
		return nil
	})
	if damaged == 0 {
		t.Fatal("no range-tier file found to damage")
	}
	pc2 := openCacheAt(t, cdir)
	<-pc2.IndexLoaded() // so the damaged block is known, and read
	r2 := newTestReader(t, store, pc2, 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None})
	got, err := r2.ReadAt(context.Background(), big, make([]byte, 16), big.Size-16, nil)
	if err != nil || !bytes.Equal(got, files["_0.fdt"][big.Size-16:]) {
		t.Fatalf("read of a damaged block: %v, or wrong bytes", err)
	}
	if st := pc2.Stats(); st.CorruptRemoved == 0 {
		t.Errorf("the damaged block was not removed: %+v", st)
	}
}

// The fills of an opened file wait until the open's ranges are in: the
// bodies do not compete with the open.
func TestFillsWaitForTheOpensRanges(t *testing.T) {
	store, _, dir, cdir := rangeTierTest(t)
	store.gate = make(chan struct{})
	r := newTestReader(t, store, openCacheAt(t, cdir), 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.Open, SegmentPrefetch: true})
	h := r.Open(Entry{Name: "_0.fdt", Obj: dir.Files[0]}, Place{dir, 0}, true) // sees the directory, then plans the open's fill
	defer h.Close()
	if n := r.Stats().StartedBack.Load(); n != 0 {
		t.Fatalf("%d background part fetches started while the open's ranges are in flight; want 0", n)
	}
	close(store.gate)
	waitFor(t, func() bool { return r.Stats().StartedBack.Load() > 0 })
	waitFor(t, func() bool { return store.inflight.Load() == 0 && r.Stats().InflightParts.Load() == 0 })
}

// A read of bytes a range fetch is getting waits for that fetch, raised
// to demand, and is answered from it: no GET of its own, no part fetch,
// even with the file opened (whose fill would start a part).
func TestReadJoinsTheRangeFetchInFlight(t *testing.T) {
	store, files, dir, cdir := rangeTierTest(t)
	big := dir.Files[0]
	store.gate = make(chan struct{})
	r := newTestReader(t, store, openCacheAt(t, cdir), 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.Open, SegmentPrefetch: true})
	h := r.Open(Entry{Name: "_0.fdt", Obj: big}, Place{dir, 0}, true) // sees the directory: its ranges are queued
	defer h.Close()
	waitFor(t, func() bool { return store.inflight.Load() == 3 })
	calls := store.calls.Load()
	done := goRead(func() ([]byte, error) { return handleRead(h, 64<<10, big.Size-64<<10) })
	waitFor(t, func() bool { return r.Stats().RangeTierJoins.Load() == 1 })
	close(store.gate)
	res := <-done
	if res.err != nil || !bytes.Equal(res.data, files["_0.fdt"][big.Size-64<<10:]) {
		t.Fatalf("read of the tail: %v, or wrong bytes", res.err)
	}
	if n := store.calls.Load() - calls; n != 0 {
		t.Errorf("%d GETs started after the read came; want 0: it waits for the range fetch", n)
	}
	if r.Stats().StartedDemand.Load() != 0 {
		t.Errorf("%d part fetches at demand; want none", r.Stats().StartedDemand.Load())
	}
}

// The fills of opened files start only once the range tier has served
// no read, and no file of the index was opened, for OpenQuiet: an
// open's opens and reads hold them back after its ranges are in, the
// first open of the index (before any read) included.
func TestFillsWaitForTheOpenToGoQuiet(t *testing.T) {
	store, _, dir, cdir := rangeTierTest(t)
	big := dir.Files[0]
	r := newTestReader(t, store, openCacheAt(t, cdir), 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.Open, SegmentPrefetch: true})
	r.SeenDir(Dir{dir})
	waitFor(t, func() bool { return r.Stats().RangesPrefetched.Load() == 3 && store.inflight.Load() == 0 })
	waitFor(t, func() bool {
		r.rtier.mu.Lock()
		defer r.rtier.mu.Unlock()
		return r.rtier.pending == 0
	})
	time.Sleep(OpenQuiet) // the prefetch's end is not an open
	h := r.Open(Entry{Name: "_0.fdt", Obj: big}, Place{dir, 0}, true)
	defer h.Close()
	if n := r.Stats().StartedBack.Load(); n != 0 {
		t.Fatalf("%d background part fetches started at the first open of the index; want 0", n)
	}
	if _, release, err := h.Read(context.Background(), make([]byte, 100), 0); err != nil {
		t.Fatal(err)
	} else if release != nil {
		release()
	}
	if r.Stats().RangeTierHits.Load() == 0 {
		t.Fatal("the head was not served by the range tier")
	}
	h2 := r.Open(Entry{Name: "_0.si", Obj: dir.Files[1]}, Place{dir, 1}, true)
	defer h2.Close()
	if n := r.Stats().StartedBack.Load(); n != 0 {
		t.Fatalf("%d background part fetches started just after an open's read; want 0", n)
	}
	waitFor(t, func() bool { return r.Stats().StartedBack.Load() > 0 }) // once quiet
	waitFor(t, func() bool { return store.inflight.Load() == 0 && r.Stats().InflightParts.Load() == 0 })
}

// A cold small read of 1 MiB (a page fault's read-around) is fetched as
// four GETs of 256 KiB at once, and its bytes are exact; one of 100 KiB
// is one GET.
func TestLargeColdReadInPieces(t *testing.T) {
	store := newMemStore()
	data := randomBytes(77, 16<<20)
	obj := store.put("big", data)
	r := newTestReader(t, store, openCacheAt(t, t.TempDir()), 8, Config{Source: "test", Prefetch: prefetch.None})
	off := int64(3<<20 + 12345)
	got, err := r.ReadAt(context.Background(), obj, make([]byte, 1<<20), off, nil)
	if err != nil || !bytes.Equal(got, data[off:off+1<<20]) {
		t.Fatalf("read: %v, or wrong bytes", err)
	}
	store.mu.Lock()
	var pieces []readRange
	for _, rg := range store.ranges {
		if rg.n < 1<<20 {
			pieces = append(pieces, rg)
		}
	}
	store.mu.Unlock()
	if len(pieces) != MaxRangePieces {
		t.Fatalf("GETs of the read %+v, want %d pieces", pieces, MaxRangePieces)
	}
	for _, p := range pieces {
		if p.n < RangePieceMin {
			t.Errorf("piece %+v below %d bytes", p, RangePieceMin)
		}
	}
	before := store.calls.Load()
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, 100<<10), 9<<20, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return store.inflight.Load() == 0 })
	store.mu.Lock()
	small := 0
	for _, rg := range store.ranges[before:] {
		if rg.off == 9<<20 {
			small++
		}
	}
	store.mu.Unlock()
	if small != 1 {
		t.Errorf("%d GETs at the 100 KiB read's offset, want 1", small)
	}
}

// Fills wait for a quiet tier at most OpenQuietMax, however often the
// tier serves reads and the index's files are opened, and each object's
// fill is kept once while they wait.
func TestDeferredFillsAreBounded(t *testing.T) {
	store, _, dir, cdir := rangeTierTest(t)
	big := dir.Files[0]
	r := newTestReader(t, store, openCacheAt(t, cdir), 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.Open, SegmentPrefetch: true})
	r.SeenDir(Dir{dir})
	waitFor(t, func() bool {
		r.rtier.mu.Lock()
		defer r.rtier.mu.Unlock()
		return r.rtier.pending == 0 && store.inflight.Load() == 0
	})
	start := time.Now()
	for time.Since(start) < OpenQuietMax+OpenQuiet && r.Stats().StartedBack.Load() == 0 {
		h := r.Open(Entry{Name: "_0.fdt", Obj: big}, Place{dir, 0}, true)
		if _, release, err := h.Read(context.Background(), make([]byte, 100), 0); err != nil {
			t.Fatal(err)
		} else if release != nil {
			release()
		}
		h.Close()
		r.rtier.mu.Lock()
		n := len(r.rtier.deferred)
		r.rtier.mu.Unlock()
		if n > len(dir.Files) {
			t.Fatalf("%d fills deferred for a directory of %d files", n, len(dir.Files))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.Stats().StartedBack.Load() == 0 {
		t.Fatalf("no fill started within %v of reads and opens every 10 ms", time.Since(start))
	}
}

// pieces cuts a run into aligned pieces that cover it exactly, the
// fewest of them, and reaches past the run only at the object's end.
func TestPieces(t *testing.T) {
	for _, c := range []struct {
		b0, e, nb int64
		want      []piece
	}{
		{0, 16, 100, []piece{{0, 4}}},
		{0, 1, 100, []piece{{0, 0}}},
		{16, 32, 100, []piece{{16, 4}}},
		{3, 16, 100, []piece{{3, 0}, {4, 2}, {8, 3}}},
		{4, 13, 100, []piece{{4, 2}, {8, 2}, {12, 0}}},
		{91, 100, 100, []piece{{91, 0}, {92, 2}, {96, 4}}}, // at the end: one piece, cut there
		{88, 97, 97, []piece{{88, 3}, {96, 4}}},            // the last piece is cut at the object's end
		{80, 83, 83, []piece{{80, 4}}},
	} {
		got := pieces(c.b0, c.e, c.nb)
		if !slices.Equal(got, c.want) {
			t.Errorf("pieces(%d, %d, %d) = %v, want %v", c.b0, c.e, c.nb, got, c.want)
		}
	}
	// Every run of up to a fetch's blocks: covered exactly, in order,
	// each piece aligned and within the run or cut at the object's end.
	const nb = 70
	for b0 := int64(0); b0 < nb; b0++ {
		for e := b0 + 1; e <= min(nb, b0+RangeFetchMax/RangeBlock); e++ {
			next := b0
			for _, pc := range pieces(b0, e, nb) {
				n := int64(1) << pc.lvl
				if pc.b != next || pc.b%n != 0 || pc.lvl >= pieceLevels || (pc.b+n > e && e != nb) {
					t.Fatalf("pieces(%d, %d, %d): bad piece %v", b0, e, nb, pc)
				}
				next = min(pc.b+n, e)
			}
			if next != e {
				t.Fatalf("pieces(%d, %d, %d) ends at %d", b0, e, nb, next)
			}
		}
	}
}

// A fetch's blocks are stored as pieces: a run of 16 aligned blocks is
// one file, and every block reads back from disk, alone and in reads
// that span pieces; a cache written one file per block still serves.
func TestRangeTierStoresPieces(t *testing.T) {
	store, files, dir, cdir := rangeTierTest(t)
	big, data := dir.Files[0], files["_0.fdt"]
	nb := (big.Size + RangeBlock - 1) / RangeBlock
	pc := openCacheAt(t, cdir)
	r := newTestReader(t, store, pc, 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None})
	blocks := func(b0, b1 int64) []byte { return data[b0*RangeBlock : min((b1+1)*RangeBlock, big.Size)] }
	parts := func() int {
		n := 0
		filepath.Walk(cdir, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() && filepath.Ext(p) == ".part" {
				n++
			}
			return nil
		})
		return n
	}
	r.rtier.storeBlocks(blockWrite{obj: big, b0: 0, data: blocks(0, 15)})
	if n := parts(); n != 1 {
		t.Fatalf("16 aligned blocks stored as %d files, want 1", n)
	}
	if lvl := r.rtier.diskLevel(keyOfPart(big, 7)); lvl != pieceLevels-1 {
		t.Errorf("block 7 found at level %d, want %d", lvl, pieceLevels-1)
	}
	// The object's last blocks, from an unaligned start: 3 pieces.
	r.rtier.storeBlocks(blockWrite{obj: big, b0: nb - 7, data: blocks(nb-7, nb-1)})
	if got, want := parts(), 1+len(pieces(nb-7, nb, nb)); got != want {
		t.Errorf("%d files after the tail, want %d", got, want)
	}
	// One file per block, as an earlier segfs stored them.
	for b := int64(20); b < 22; b++ {
		if err := pc.PutSummed(context.Background(), r.cfg.pieceKey(keyOfPart(big, b), 0), blocks(b, b), nil); err != nil {
			t.Fatal(err)
		}
	}
	if lvl := r.rtier.diskLevel(keyOfPart(big, 16)); lvl != -1 {
		t.Errorf("block 16, never stored, found at level %d", lvl)
	}
	for _, rd := range [][2]int64{{0, 100}, {RangeBlock - 10, 20}, {0, 16 * RangeBlock}, {5 * RangeBlock, 3*RangeBlock + 7},
		{20 * RangeBlock, 2 * RangeBlock}, {20*RangeBlock + 1, RangeBlock}, {(nb-7)*RangeBlock + 3, big.Size - (nb-7)*RangeBlock - 3}, {big.Size - 1, 1}} {
		p := make([]byte, rd[1])
		ok, err := r.rtier.readAt(context.Background(), keyOfObject(big), p, rd[0])
		if err != nil || !ok || !bytes.Equal(p, data[rd[0]:rd[0]+rd[1]]) {
			t.Errorf("read [%d, +%d) from the pieces: ok %v, err %v, or wrong bytes", rd[0], rd[1], ok, err)
		}
	}
	// A read that needs a block no piece holds is not the tier's.
	if ok, _ := r.rtier.readAt(context.Background(), keyOfObject(big), make([]byte, 2*RangeBlock), 15*RangeBlock); ok {
		t.Error("a read of blocks 15 and 16 served with block 16 on no tier")
	}
	if gets := store.counters.Gets.Load(); gets != 0 {
		t.Errorf("%d GETs; the reads should come from the disk cache", gets)
	}
}

// The memory LRU keeps a fetch's buffer as one entry within
// RangeMemory, evicts whole entries, maps a block to the entry that had
// it first, and keeps none larger than the bound.
func TestRangeTierMemoryEntries(t *testing.T) {
	store, files, dir, _ := rangeTierTest(t)
	big, data := dir.Files[0], files["_0.fdt"]
	r := newTestReader(t, store, nil, 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None, RangeMemory: 5 * RangeBlock})
	rt, obj := r.rtier, keyOfObject(big)
	span := func(b0, n int64) []byte { return data[b0*RangeBlock : (b0+n)*RangeBlock] }
	has := func(b int64) bool {
		p := make([]byte, 10)
		ok := rt.memBlock(partKey{obj: obj, idx: b}, p, 5)
		if ok && !bytes.Equal(p, data[b*RangeBlock+5:b*RangeBlock+15]) {
			t.Fatalf("block %d: wrong bytes from memory", b)
		}
		return ok
	}
	rt.keepFetch(obj, 0, span(0, 3))
	rt.keepFetch(obj, 2, span(2, 2)) // block 2 stays with the first entry
	if !has(0) || !has(2) || !has(3) || rt.bytes != 5*RangeBlock {
		t.Fatalf("after two entries: blocks 0, 2, 3 in memory %v %v %v, %d bytes", has(0), has(2), has(3), rt.bytes)
	}
	rt.keepFetch(obj, 10, span(10, 1)) // evicts the oldest entry, blocks 0-2
	if has(0) || has(1) || !has(3) || !has(10) || rt.bytes != 3*RangeBlock {
		t.Fatalf("after eviction: blocks 0, 1 gone %v %v, 3 and 10 kept %v %v, %d bytes", !has(0), !has(1), has(3), has(10), rt.bytes)
	}
	rt.keepFetch(obj, 20, span(20, 6)) // larger than the bound: not kept
	if has(20) || rt.bytes > 5*RangeBlock {
		t.Errorf("an entry over the bound kept: %v, %d bytes", has(20), rt.bytes)
	}
}

// readResult is what a read run by goRead returned.
type readResult struct {
	data []byte
	err  error
}

// goRead runs read on a goroutine of its own; its result comes on the
// channel returned.
func goRead(read func() ([]byte, error)) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		b, err := read()
		ch <- readResult{b, err}
	}()
	return ch
}

// handleRead reads n bytes at off through h and returns a copy of them.
func handleRead(h *Handle, n int, off int64) ([]byte, error) {
	data, release, err := h.Read(context.Background(), make([]byte, n), off)
	if release != nil {
		defer release()
	}
	return bytes.Clone(data), err
}

// halfStore delivers every range in two halves: the first at once, as
// progress, the second once gate is closed; then fail, if set, instead,
// for the ranges that waited at the gate (those asked for before it
// opened). ReadRange is memStore's, with no gate.
type halfStore struct {
	*memStore
	gate chan struct{}
	fail error
}

func (s *halfStore) ReadRangeProgress(ctx context.Context, obj fetcher.Object, off int64, p []byte, progress func(int)) error {
	all := make([]byte, len(p))
	if err := s.memStore.ReadRange(ctx, obj, off, all); err != nil {
		return err
	}
	half := len(p) / 2
	copy(p, all[:half])
	progress(half)
	parked := false
	select {
	case <-s.gate:
	default:
		parked = true
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.fail != nil && parked {
		return s.fail
	}
	copy(p[half:], all[half:])
	progress(len(p))
	return nil
}

// A read of bytes a range fetch has already received is answered from
// them while the rest of the fetch is still on its way; a read of bytes
// not yet in waits for them. If the fetch then fails, the bytes served
// were right, and a later read of the rest goes on to the part tiers.
func TestReadServedAsTheRangeArrives(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			mem, files, dir, cdir := rangeTierTest(t)
			big := dir.Files[0]
			store := &halfStore{memStore: mem, gate: make(chan struct{})}
			if fail {
				store.fail = errors.New("connection reset")
			}
			r := newTestReader(t, store, openCacheAt(t, cdir), 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None, SegmentPrefetch: true})
			h := r.Open(Entry{Name: "_0.fdt", Obj: big}, Place{dir, 0}, true) // sees the directory: the head's fetch starts
			defer h.Close()
			head := max(prefetch.DefaultKernel.Readahead, prefetch.LuceneHead)
			waitFor(t, func() bool { return mem.inflight.Load() == 0 && mem.calls.Load() == 3 })
			calls := mem.calls.Load()

			// Bounded only so that a read waiting for the whole fetch fails
			// the test rather than hangs it: the gate is still shut.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			data, release, err := h.Read(ctx, make([]byte, 4096), 100)
			if err != nil || !bytes.Equal(data, files["_0.fdt"][100:4196]) {
				t.Fatalf("read of the head's first bytes: %v, or wrong bytes", err)
			}
			if release != nil {
				release()
			}
			if got := r.Stats().RangeTierEarly.Load(); got != 1 {
				t.Errorf("RangeTierEarly %d, want 1: the read waited for the whole fetch", got)
			}

			done := goRead(func() ([]byte, error) { return handleRead(h, 4096, head-4096) })
			waitFor(t, func() bool { return r.Stats().RangeTierJoins.Load() == 2 })
			select {
			case res := <-done:
				t.Fatalf("a read of bytes not yet received returned: %v", res.err)
			default:
			}
			close(store.gate)
			res := <-done
			if res.err != nil || !bytes.Equal(res.data, files["_0.fdt"][head-4096:head]) {
				t.Fatalf("read of the head's last bytes: %v, or wrong bytes", res.err)
			}
			n := mem.calls.Load() - calls
			if !fail && n != 0 {
				t.Errorf("%d GETs after the fetch; want 0", n)
			}
			if fail && n == 0 {
				t.Error("no GET after the range fetch failed: the read was answered from its unfinished bytes")
			}
		})
	}
}
