package reader

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// The range tier: the heads and tails of files that a Lucene open reads
// (prefetch.LuceneOpen), fetched ahead in blocks of RangeBlock bytes,
// far smaller than a part. Each block is kept in memory (an LRU within
// Config.RangeMemory bytes) and stored in the disk cache under a key
// space of its own (the source with rangeSource appended; pieces, below),
// so it is checksummed, crash-safe, evicted and loaded after a restart
// like any part, and a remount opens the index with no GET. A read asks the tier first (Reader.read, readPart): a read that
// the tier holds or is fetching in whole is answered from it, waiting
// for its fetch if need be, before any part fetch of the file is
// started, joined or borrowed from; the blocks and the parts hold the
// same bytes of the same version.

// RangeBlock is the range tier's unit. DefaultRangeMemory is the
// default of Config.RangeMemory. RangeFetchMax bounds the span of one
// range fetch: a wider range is fetched by several GETs, which run in
// parallel, so that the memory of the fetches in flight stays bounded
// by the workers whatever the kernel's readahead.
const (
	RangeBlock         = 64 << 10
	DefaultRangeMemory = 64 << 20
	RangeFetchMax      = 1 << 20
)

// rangeSource is appended to the cache source of range-tier blocks.
const rangeSource = "\x00range-tier"

// The range tier's disk files are pieces: aligned runs of 2^lvl blocks,
// lvl below pieceLevels, each stored as the cache part of part size
// RangeBlock<<lvl and index b>>lvl (b its first block; a piece at the
// object's end is cut there, as a last part is). A range fetch's run of
// blocks is stored as the fewest such pieces (pieces): a fetch of 16
// aligned blocks is one file, where it was 16, and file creation was
// most of the tier's CPU (docs/BENCH.md). The key of a block's piece
// is not known from the block alone, so a lookup tries each level, the
// largest first (diskLevel): pieceLevels lookups of the cache's index
// at most. Level 0 is the key space of one file per block, which a
// cache directory of an earlier segfs holds.
const pieceLevels = 5

// The largest piece is one range fetch at most.
var _ = [1]struct{}{}[RangeFetchMax-RangeBlock<<(pieceLevels-1)]

// pieceKey returns the disk cache's key of the piece of level lvl that
// holds block k.
func (c Config) pieceKey(k partKey, lvl int) cache.Key {
	return cache.Key{Source: c.Source + rangeSource, Object: k.obj.key, ETag: k.obj.etag, PartSize: RangeBlock << lvl, Index: k.idx >> lvl}
}

// piece is the run of blocks [b, b+1<<lvl) of an object, cut at its end.
type piece struct {
	b   int64
	lvl int
}

// pieces cuts blocks [b0, e) of an object of nb blocks into aligned
// pieces, each the largest that starts where the last ended and holds
// no block outside [b0, e); a piece may reach past the object's end
// when e is nb.
func pieces(b0, e, nb int64) []piece {
	var out []piece
	for b := b0; b < e; {
		lvl := pieceLevels - 1
		for ; lvl > 0; lvl-- {
			if n := int64(1) << lvl; b%n == 0 && (b+n <= e || e == nb) {
				break
			}
		}
		out = append(out, piece{b: b, lvl: lvl})
		b += int64(1) << lvl
	}
	return out
}

// diskLevel returns the level of a piece in the disk cache that holds
// block k, or -1 if none does.
func (rt *rangeTier) diskLevel(k partKey) int {
	for lvl := pieceLevels - 1; lvl >= 0; lvl-- {
		if rt.cache.Contains(rt.cfg.pieceKey(k, lvl)) {
			return lvl
		}
	}
	return -1
}

// rangeTier holds the blocks in memory and the fetches in flight, under
// a lock of its own: it shares no state with parts. Lock order:
// rangeTier.mu is a leaf.
type rangeTier struct {
	// Constant after newRangeTier.
	r     *Reader // for its cursors: the fills deferred start there
	store fetcher.Store
	cache Cache
	sched *prefetch.Scheduler
	cfg   Config
	stats *Stats
	stop  chan struct{} // closed by Reader.Close: nothing is stored after

	// first is when the first directory was seen, in Unix nanoseconds;
	// 0 before.
	first atomic.Int64

	mu sync.Mutex
	// lru holds the bytes of range fetches, a fetch's GET buffer as one
	// entry, so a block in memory is a slice of its fetch's buffer, not a
	// copy, and an entry's bytes are freed whole. blocks maps each block
	// to the entry holding it.
	lru    list.List                 // of *rangeEntry, most recently used first
	blocks map[partKey]*list.Element // by object and block index
	bytes  int64                     // INVARIANT: the sum of the entries' lengths, at most cfg.RangeMemory
	// fetching holds, for each block a range fetch is getting, that
	// fetch, from its submission until its blocks are stored: a read of
	// those bytes waits for it instead of fetching them again.
	fetching map[partKey]*rangeFetch
	// pending counts the range fetches of Seen plans (an open's bytes)
	// not yet ended. While it is above 0, and until no read has been
	// served by the tier for OpenQuiet, fills wait in deferred, so that
	// the bodies of opened files do not compete with the open: an open
	// is a burst of reads of heads and tails, the searches after it
	// read bodies. release, armed while fills wait with no fetch
	// pending, starts them once the tier is quiet; closed stops it.
	pending  int
	deferred []prefetch.Fill
	// deferredSet holds deferredKey of each fill in deferred, which so
	// holds each at most once: at most one per object of the mount,
	// however many times its file is opened while fills wait.
	deferredSet map[string]bool
	// deferredAt is when deferred last became non-empty, in Unix
	// nanoseconds: fills wait at most OpenQuietMax past it.
	deferredAt int64
	release    *time.Timer
	closed     bool
	// queue holds the fetched blocks not yet stored in the disk cache,
	// oldest first, queuedBytes their bytes (INVARIANT: at most
	// cfg.RangeMemory; a fetch that would pass it stores its own
	// blocks), queuedAt when the oldest was queued, in Unix
	// nanoseconds. writing is set while writeQueued runs; writer
	// counts it, for Close.
	queue       []blockWrite
	queuedBytes int64
	queuedAt    int64
	writing     bool
	writer      sync.WaitGroup
	// lastActive is when the tier last served a read, or a file of an
	// index directory was last opened (an open's first step, before
	// its first read), in Unix nanoseconds.
	lastActive atomic.Int64
}

// OpenQuiet is how long the range tier serves no read, and no file of an
// index directory is opened, before the fills of opened files start: an
// open's opens and reads come a few milliseconds apart.
const OpenQuiet = 100 * time.Millisecond

// OpenQuietMax bounds how long fills wait for the tier to go quiet (an
// open takes less): a node whose searches keep reading heads and tails
// still gets its files filled.
const OpenQuietMax = time.Second

// deferredKey names a deferred fill: its group and its first object.
func deferredKey(f prefetch.Fill) string {
	k := f.Group
	if len(f.Objects) > 0 {
		k += "\x00" + f.Objects[0].Key + "\x00" + f.Objects[0].ETag
	}
	return k
}

// rangeEntry is the bytes of blocks b0 on of an object, as one range
// fetch got them.
type rangeEntry struct {
	obj  objKey
	b0   int64
	data []byte
}

// block returns block b's bytes in e.
func (e *rangeEntry) block(b int64) []byte {
	lo := (b - e.b0) * RangeBlock
	return e.data[lo:min(lo+RangeBlock, int64(len(e.data)))]
}

// nblocks is how many blocks e holds.
func (e *rangeEntry) nblocks() int64 { return (int64(len(e.data)) + RangeBlock - 1) / RangeBlock }

// rangeFetch is one GET of blocks b0 to b1 of an object for the tier.
type rangeFetch struct {
	b0, b1 int64
	done   chan struct{} // closed once blocks is set, or the fetch failed
	blocks [][]byte      // the blocks' bytes, b0 first; nil if it failed
	task   *prefetch.Task

	// arr is the GET's bytes as they come in: a read of the first
	// blocks of a wide fetch is answered before its last ones are in.
	arr arrival
}

func newRangeTier(r *Reader) *rangeTier {
	return &rangeTier{
		r: r, store: r.store, cache: r.cache, sched: r.sched, cfg: r.cfg, stats: &r.stats, stop: r.stop,
		blocks: make(map[partKey]*list.Element), fetching: make(map[partKey]*rangeFetch),
	}
}

// keepFetch adds the bytes of a range fetch, blocks b0 on of obj, to the
// memory LRU, evicting whole entries to stay in bounds. A block another
// entry holds stays with that one.
func (t *rangeTier) keepFetch(obj objKey, b0 int64, data []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int64(len(data)) > t.cfg.RangeMemory {
		return // kept on disk only
	}
	for t.bytes+int64(len(data)) > t.cfg.RangeMemory && t.lru.Len() > 0 {
		el := t.lru.Back()
		old := t.lru.Remove(el).(*rangeEntry)
		for i := range old.nblocks() {
			if k := (partKey{obj: old.obj, idx: old.b0 + i}); t.blocks[k] == el {
				delete(t.blocks, k)
			}
		}
		t.bytes -= int64(len(old.data))
	}
	el := t.lru.PushFront(&rangeEntry{obj: obj, b0: b0, data: data})
	t.bytes += int64(len(data))
	for i := range el.Value.(*rangeEntry).nblocks() {
		if k := (partKey{obj: obj, idx: b0 + i}); t.blocks[k] == nil {
			t.blocks[k] = el
		}
	}
}

// memBlock copies block k's bytes at off into p, if the LRU has it.
func (t *rangeTier) memBlock(k partKey, p []byte, off int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.blocks[k]
	if !ok {
		return false
	}
	t.lru.MoveToFront(el)
	copy(p, el.Value.(*rangeEntry).block(k.idx)[off:])
	return true
}

// holder returns the fetch in flight of block k, if any, and whether
// the LRU holds the block.
func (rt *rangeTier) holder(k partKey) (*rangeFetch, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	_, ok := rt.blocks[k]
	return rt.fetching[k], ok
}

// covered reports whether block k is in memory, on disk or being
// fetched.
func (rt *rangeTier) covered(k partKey) bool {
	if f, ok := rt.holder(k); f != nil || ok {
		return true
	}
	return rt.diskLevel(k) >= 0
}

// fetchRange fetches rg's blocks that no tier holds and no fetch is
// getting, at rg's priority in rg's group (the object's by default):
// each run of such
// blocks by GETs of at most RangeFetchMax bytes. A range whose parts
// are cached, or whose blocks are all held or being fetched, costs
// nothing. An open range (of a Seen plan) holds back the fills until
// it ends.
func (rt *rangeTier) fetchRange(rg prefetch.Range, open bool) {
	obj := rg.Obj
	if open && rg.Learned {
		rt.stats.ProfileRanges.Add(1)
	}
	end := min(rg.Off+rg.Len, obj.Size)
	if rg.Off < 0 || rg.Off >= end {
		return
	}
	ps := rt.cfg.PartSize
	if rt.cache.Contains(rt.cfg.cacheKey(keyOfPart(obj, rg.Off/ps))) && rt.cache.Contains(rt.cfg.cacheKey(keyOfPart(obj, (end-1)/ps))) {
		return
	}
	group := rg.Group
	if group == "" {
		group = obj.Key
	}
	const most = RangeFetchMax / RangeBlock // blocks per fetch
	b0, b1 := rg.Off/RangeBlock, (end-1)/RangeBlock
	for b := b0; b <= b1; {
		if rt.covered(keyOfPart(obj, b)) {
			b++
			continue
		}
		run := b
		for run+1 <= b1 && run+1-b < most {
			if rt.covered(keyOfPart(obj, run+1)) {
				break
			}
			run++
		}
		rt.startFetch(obj, group, b, run, rg.Prio, open)
		b = run + 1
	}
}

// startFetch submits the fetch of blocks b0 to b1 of obj, unless
// another fetch took one of them meanwhile.
func (rt *rangeTier) startFetch(obj fetcher.Object, group string, b0, b1 int64, prio prefetch.Priority, open bool) {
	f := &rangeFetch{b0: b0, b1: b1, done: make(chan struct{})}
	rt.mu.Lock()
	for b := b0; b <= b1; b++ {
		if rt.fetching[keyOfPart(obj, b)] != nil {
			rt.mu.Unlock()
			return
		}
	}
	for b := b0; b <= b1; b++ {
		rt.fetching[keyOfPart(obj, b)] = f
	}
	if open {
		rt.pending++
	}
	rt.mu.Unlock()
	rt.stats.RangesPrefetched.Add(1)
	task := rt.sched.Submit(group, prio, func(ctx context.Context) { rt.fetchBlocks(ctx, obj, f, open) })
	rt.mu.Lock()
	f.task = task
	rt.mu.Unlock()
}

// fetchBlocks is the task of a range fetch: one GET of f's blocks of
// obj, handed to the reads waiting on f and kept in memory, the blocks
// marked fetched, and queued to be stored in the disk cache once the
// open is over (kickLocked); the last open range to end starts the
// fills deferred for it. The task ends once the bytes are in memory, so
// a worker does not wait for file creations while an open waits for
// bytes.
func (rt *rangeTier) fetchBlocks(ctx context.Context, obj fetcher.Object, f *rangeFetch, open bool) {
	lo, hi := f.b0*RangeBlock, min((f.b1+1)*RangeBlock, obj.Size)
	start := time.Now()
	buf := make([]byte, hi-lo)
	f.arr.start(buf)
	err := guard(fmt.Sprintf("fetch %s [%d,%d) for the range tier", obj.Key, lo, hi), func() error {
		return fetcher.ReadRangeProgress(ctx, rt.store, obj, lo, buf, f.arr.filled)
	})
	// One line per GET, failed or not: the bench's plain client fetches
	// what these name.
	rt.cfg.Logger.Debug("range fetch", "key", obj.Key, "off", lo, "len", hi-lo, "took", time.Since(start), "ok", err == nil)
	select {
	case <-rt.stop:
		err = ErrClosed // nothing is stored after Close
	default:
	}
	f.arr.end(err == nil) // the tier's buffers are not recycled
	var blocks [][]byte
	if err == nil {
		rt.stats.RangeTierBytes.Add(int64(len(buf)))
		rt.stats.FetchedBytes.Add(int64(len(buf)))
		e := &rangeEntry{obj: keyOfObject(obj), b0: f.b0, data: buf}
		for b := f.b0; b <= f.b1; b++ {
			blocks = append(blocks, e.block(b))
		}
		rt.keepFetch(e.obj, e.b0, buf)
	} else if ctx.Err() == nil {
		rt.cfg.Logger.Debug("range-tier fetch failed", "key", obj.Key, "err", err)
	}
	rt.mu.Lock()
	f.blocks = blocks
	close(f.done)
	for b := f.b0; b <= f.b1; b++ {
		if k := keyOfPart(obj, b); rt.fetching[k] == f {
			delete(rt.fetching, k)
		}
	}
	var fills []prefetch.Fill
	if open {
		rt.pending--
		fills = rt.releaseLocked()
	}
	var n int64
	if blocks != nil {
		n = int64(len(buf))
	}
	// Once the tier is closed the task stores its own blocks: the
	// scheduler's Close waits for it, not for the writer.
	queued := len(blocks) > 0 && !rt.closed && rt.queuedBytes+n <= rt.cfg.RangeMemory
	if queued {
		if len(rt.queue) == 0 {
			rt.queuedAt = time.Now().UnixNano()
		}
		rt.queue = append(rt.queue, blockWrite{obj: obj, b0: f.b0, data: buf})
		rt.queuedBytes += n
	}
	rt.kickLocked()
	rt.mu.Unlock()
	if first := rt.first.Load(); first != 0 {
		rt.stats.OpenPrefetchNanos.Store(time.Now().UnixNano() - first)
	}
	rt.startFills(fills)
	if !queued && blocks != nil {
		rt.storeBlocks(blockWrite{obj: obj, b0: f.b0, data: buf})
	}
}

// blockWrite is a range fetch's blocks, to store in the disk cache.
type blockWrite struct {
	obj  fetcher.Object
	b0   int64
	data []byte // blocks b0 on, as the fetch got them; nil if it failed
}

// storeBlocks stores w's blocks in the disk cache as pieces.
func (rt *rangeTier) storeBlocks(w blockWrite) {
	nb := (w.obj.Size + RangeBlock - 1) / RangeBlock
	e := w.b0 + (int64(len(w.data))+RangeBlock-1)/RangeBlock
	for _, pc := range pieces(w.b0, e, nb) {
		lo, hi := (pc.b-w.b0)*RangeBlock, min((pc.b+int64(1)<<pc.lvl-w.b0)*RangeBlock, int64(len(w.data)))
		if err := rt.cache.PutSummed(context.Background(), rt.cfg.pieceKey(keyOfPart(w.obj, pc.b), pc.lvl), w.data[lo:hi], nil); err != nil {
			rt.cfg.Logger.Debug("range-tier piece not cached", "key", w.obj.Key, "block", pc.b, "bytes", hi-lo, "err", err)
		}
	}
}

// kickLocked starts the writer of the queued blocks, unless it runs, the
// queue is empty, or an open's range fetch is pending: the blocks are
// stored once the open is over, not while it waits for its bytes.
// rt.mu must be held.
func (rt *rangeTier) kickLocked() {
	if rt.closed || rt.pending > 0 {
		return // close starts the writer itself
	}
	rt.startWriterLocked()
}

// startWriterLocked starts writeQueued unless it runs or the queue is
// empty. rt.mu must be held.
func (rt *rangeTier) startWriterLocked() {
	if rt.writing || len(rt.queue) == 0 {
		return
	}
	rt.writing = true
	rt.writer.Add(1)
	go rt.writeQueued()
}

// writeQueued is the writer: it stores the queued blocks, one fetch's at
// a time, once the tier is quiet (no read served for OpenQuiet, or
// OpenQuietMax past the oldest queued write), and ends when the queue
// is empty or an open's fetch is pending (whose end kicks it again).
// Once the tier is closed it stores what is queued at once, as the
// part writers finish the parts handed to them: the bytes were fetched.
func (rt *rangeTier) writeQueued() {
	defer rt.writer.Done()
	for {
		rt.mu.Lock()
		if len(rt.queue) == 0 || rt.pending > 0 && !rt.closed {
			rt.writing = false
			rt.mu.Unlock()
			return
		}
		now := time.Now().UnixNano()
		wait := min(time.Duration(rt.lastActive.Load()+int64(OpenQuiet)-now), time.Duration(rt.queuedAt+int64(OpenQuietMax)-now))
		if wait > 0 && !rt.closed {
			rt.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-rt.stop:
				t.Stop()
			}
			continue
		}
		w := rt.queue[0]
		rt.queue[0] = blockWrite{}
		rt.queue = rt.queue[1:]
		rt.mu.Unlock()
		rt.storeBlocks(w)
		n := int64(len(w.data))
		rt.mu.Lock()
		rt.queuedBytes -= n // counted until written: the LRU may have let them go
		if len(rt.queue) > 0 {
			rt.queuedAt = min(rt.queuedAt, now)
		}
		rt.mu.Unlock()
	}
}

// quietLocked returns how long the deferred fills still wait: until the
// tier has been quiet for OpenQuiet, at most until OpenQuietMax after
// they were first deferred; 0 or less once they need not. rt.mu must
// be held.
func (rt *rangeTier) quietLocked(now int64) time.Duration {
	until := rt.lastActive.Load() + int64(OpenQuiet)
	if len(rt.deferred) > 0 {
		until = min(until, rt.deferredAt+int64(OpenQuietMax))
	}
	return time.Duration(until - now)
}

// releaseLocked returns the deferred fills if no open fetch is pending
// and the tier is quiet, and takes them from deferred; else, with no
// fetch pending, it arms the timer that looks again once the tier may
// be quiet. rt.mu must be held.
func (rt *rangeTier) releaseLocked() []prefetch.Fill {
	if rt.pending > 0 || len(rt.deferred) == 0 || rt.closed {
		return nil
	}
	if wait := rt.quietLocked(time.Now().UnixNano()); wait > 0 {
		if rt.release == nil {
			rt.release = time.AfterFunc(wait, rt.releaseLater)
		} else {
			rt.release.Reset(wait)
		}
		return nil
	}
	fills := rt.deferred
	rt.deferred, rt.deferredSet = nil, nil
	return fills
}

// releaseLater is the timer's: the deferred fills start if the tier is
// quiet by now.
func (rt *rangeTier) releaseLater() {
	rt.mu.Lock()
	fills := rt.releaseLocked()
	rt.mu.Unlock()
	rt.startFills(fills)
}

func (rt *rangeTier) startFills(fills []prefetch.Fill) {
	for _, f := range fills {
		rt.r.cursors.startFill(f.Group, f.Objects, 0, f.Once)
	}
}

// waitWriter waits for the writer to store the queued blocks, once
// close has been called.
func (rt *rangeTier) waitWriter() { rt.writer.Wait() }

// close stops the timer of the deferred fills, which are dropped, and
// has the writer store the queued blocks now: the Reader is closing.
func (rt *rangeTier) close() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.closed = true
	if rt.release != nil {
		rt.release.Stop()
	}
	rt.startWriterLocked()
	rt.deferred, rt.deferredSet = nil, nil
}

// read fills p with the bytes at off within part k from the range tier;
// see readAt.
func (rt *rangeTier) read(ctx context.Context, k partKey, p []byte, off int64) (bool, error) {
	return rt.readAt(ctx, k.obj, p, k.idx*rt.cfg.PartSize+off)
}

// readAt fills p with the bytes of the object at a from the range tier,
// and reports whether it did: every block they span is held, or being
// fetched by a range fetch, which the read then waits for (raised to
// demand), not for a part fetch or a GET of its own; only until the
// fetch has the bytes the read needs, not until it ends. It reports
// false when a block is neither, or its fetch failed first; an error
// only when ctx ends while it waits.
func (rt *rangeTier) readAt(ctx context.Context, obj objKey, p []byte, a int64) (bool, error) {
	if len(p) == 0 {
		return false, nil
	}
	end := a + int64(len(p))
	b0, b1 := a/RangeBlock, (end-1)/RangeBlock
	var from []*joined // by block from b0: the fetch it is read from, or nil
	var joins []*joined
	for b := b0; b <= b1; b++ {
		bk := partKey{obj: obj, idx: b}
		f, inMemory := rt.holder(bk)
		if f == nil && !inMemory && rt.diskLevel(bk) < 0 {
			return false, nil
		}
		if f == nil {
			continue
		}
		if from == nil {
			from = make([]*joined, b1-b0+1)
		}
		if len(joins) == 0 || joins[len(joins)-1].f != f {
			joins = append(joins, &joined{f: f})
		}
		j := joins[len(joins)-1]
		j.need = int(min(end, (b+1)*RangeBlock) - f.b0*RangeBlock)
		from[b-b0] = j
	}
	if len(joins) > 0 {
		if ok, err := rt.wait(ctx, joins); !ok || err != nil {
			return false, err // a fetch failed: the read goes on to the part tiers
		}
	}
	fetched := func(b int64) bool { return from != nil && from[b-b0] != nil }
	for b := b0; b <= b1; {
		bk := partKey{obj: obj, idx: b}
		lo, hi := max(a, b*RangeBlock), min(end, (b+1)*RangeBlock)
		dst := p[lo-a : hi-a]
		if fetched(b) {
			j := from[b-b0]
			copy(dst, j.data[lo-j.f.b0*RangeBlock:])
			b++
			continue
		}
		if rt.memBlock(bk, dst, lo-b*RangeBlock) {
			markTier(ctx, TierMemory)
			b++
			continue
		}
		// From the block's piece, with the blocks after it that the same
		// piece holds, in one read.
		lvl := rt.diskLevel(bk)
		if lvl < 0 {
			return false, nil // evicted meanwhile
		}
		start, e := b>>lvl<<lvl, b+1
		for e <= b1 && e < start+int64(1)<<lvl && !fetched(e) {
			e++
		}
		hi = min(end, e*RangeBlock)
		dst = p[lo-a : hi-a]
		if n, ok, err := rt.cache.ReadAt(ctx, rt.cfg.pieceKey(bk, lvl), dst, lo-start*RangeBlock); err != nil || !ok || n != len(dst) {
			return false, nil // evicted meanwhile, or damaged (the cache removed it)
		}
		markTier(ctx, TierDisk)
		b = e
	}
	rt.stats.RangeTierHits.Add(1)
	rt.lastActive.Store(time.Now().UnixNano())
	return true, nil
}

// joined is a range fetch a read takes bytes from: the first need bytes
// of the fetch's buffer, data once they have arrived.
type joined struct {
	f    *rangeFetch
	need int
	data []byte
}

// wait raises the fetches a read needs to demand and waits until each
// has the bytes the read needs. It reports false if a fetch ended
// without them.
func (rt *rangeTier) wait(ctx context.Context, joins []*joined) (bool, error) {
	rt.stats.RangeTierJoins.Add(1)
	for _, j := range joins {
		rt.mu.Lock()
		task := j.f.task
		rt.mu.Unlock()
		if task != nil {
			rt.sched.Raise(task, prefetch.Demand)
		}
	}
	waited, early := false, false
	for _, j := range joins {
		got, err := j.f.arr.take(ctx, j.need, j.f.done)
		if err != nil {
			return false, err
		}
		if got.data == nil {
			return false, nil // it failed
		}
		j.data = got.data
		waited = waited || got.waited
		early = early || got.early
	}
	if early {
		rt.stats.RangeTierEarly.Add(1)
	}
	if waited {
		markTier(ctx, TierRemote)
	} else {
		markTier(ctx, TierMemory)
	}
	return true, nil
}

// SeenDir runs the policies' Seen plans for dir the first time it is
// seen: looked up, listed, or a file of it opened; for a shard layout,
// at mount.
func (r *Reader) SeenDir(d Dir) {
	r.seenDir(d.d)
}

// seenDir is SeenDir of the policies' directory.
func (r *Reader) seenDir(dir *prefetch.Dir) {
	if dir == nil || !dir.FirstSeen() {
		return
	}
	r.rtier.first.CompareAndSwap(0, time.Now().UnixNano())
	for _, p := range r.policies {
		r.runPlanOf(p.Seen(dir, r.cfg.PartSize), true)
	}
}

// opened records that a file of an index directory was opened: an open
// is under way, and the fills it asks for wait.
func (rt *rangeTier) opened() { rt.lastActive.Store(time.Now().UnixNano()) }

// deferFills keeps fills back while an open's ranges are in flight or
// the tier still serves an open's reads, and reports whether it did.
func (rt *rangeTier) deferFills(fills []prefetch.Fill) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed || rt.pending == 0 && rt.quietLocked(time.Now().UnixNano()) <= 0 {
		return false
	}
	now := time.Now().UnixNano()
	if len(rt.deferred) == 0 {
		rt.deferredAt = now
	}
	if rt.deferredSet == nil {
		rt.deferredSet = map[string]bool{}
	}
	for _, f := range fills {
		if k := deferredKey(f); !rt.deferredSet[k] {
			rt.deferredSet[k] = true
			rt.deferred = append(rt.deferred, f)
		}
	}
	if rt.pending == 0 {
		rt.releaseLocked() // arms the timer: the tier is not quiet
	}
	return true
}

// PrefetchOpen fetches into the range tier what opening the index of
// entries reads (the Seen plans' ranges, as if its directory were first
// seen, with no fills), and waits until those fetches end or ctx does.
// A refresh calls it before a new commit shows, so that an engine that
// finds the commit's segments_N opens it from memory. Blocks already
// held, cached or in flight cost nothing more. It returns ctx's error
// if ctx ended first; the fetches go on.
func (r *Reader) PrefetchOpen(ctx context.Context, entries []Entry) error {
	if !r.cfg.SegmentPrefetch {
		return nil
	}
	dirs, _ := Dirs(entries)
	var ranges []prefetch.Range
	for _, d := range dirs {
		for _, p := range r.policies {
			plan := p.Seen(d.d, r.cfg.PartSize)
			r.runPlanOf(prefetch.Plan{Ranges: plan.Ranges}, true)
			ranges = append(ranges, plan.Ranges...)
		}
	}
	return r.rtier.waitRanges(ctx, ranges)
}

// waitRanges waits until no block of ranges is being fetched, or ctx ends.
func (rt *rangeTier) waitRanges(ctx context.Context, ranges []prefetch.Range) error {
	for _, rg := range ranges {
		end := min(rg.Off+rg.Len, rg.Obj.Size)
		if rg.Off < 0 || rg.Off >= end {
			continue
		}
		for b := rg.Off / RangeBlock; b <= (end-1)/RangeBlock; b++ {
			rt.mu.Lock()
			f := rt.fetching[keyOfPart(rg.Obj, b)]
			rt.mu.Unlock()
			if f == nil {
				continue
			}
			select {
			case <-f.done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}
