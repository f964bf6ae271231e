package reader

import (
	"bytes"
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
// RangeMemory bytes) and stored in the disk cache under a key space of
// its own (the source with rangeSource appended, part size RangeBlock),
// so it is checksummed, crash-safe, evicted and loaded after a restart
// like any part, and a remount opens the index with no GET. A read
// consults the tier after the part tiers (decide.go): a cached part
// supersedes the blocks it holds.

// RangeBlock is the range tier's unit. RangeMemory bounds the blocks
// kept in memory.
const (
	RangeBlock  = 64 << 10
	RangeMemory = 16 << 20
)

// rangeSource is appended to the cache source of range-tier blocks.
const rangeSource = "\x00range-tier"

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
	// 0 before. Atomic: every read of an index's file looks at it.
	first atomic.Int64

	mu       sync.Mutex
	lru      list.List                 // of *rangeBlock, most recently used first
	blocks   map[partKey]*list.Element // by object and block index
	bytes    int64                     // INVARIANT: the sum of the blocks' lengths, at most RangeMemory
	fetching map[partKey]bool          // blocks a range fetch is getting now
	// pending counts the range fetches of Seen plans (an open's bytes)
	// not yet ended; while it is above 0, fills wait in deferred, so that
	// the bodies of opened files do not compete with the open.
	pending  int
	deferred []prefetch.Fill
}

type rangeBlock struct {
	key  partKey
	data []byte
}

func newRangeTier(r *Reader) *rangeTier {
	return &rangeTier{
		r: r, store: r.store, cache: r.cache, sched: r.sched, cfg: r.cfg, stats: &r.stats, stop: r.stop,
		blocks: make(map[partKey]*list.Element), fetching: make(map[partKey]bool),
	}
}

// rangeCacheKey returns the disk cache's key of a range-tier block.
func (c Config) rangeCacheKey(k partKey) cache.Key {
	return cache.Key{Source: c.Source + rangeSource, Object: k.obj.key, ETag: k.obj.etag, PartSize: RangeBlock, Index: k.idx}
}

// keepBlock adds a block to the memory LRU, evicting to stay in bounds.
func (t *rangeTier) keepBlock(k partKey, data []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.blocks[k]; ok {
		return
	}
	for t.bytes+int64(len(data)) > RangeMemory && t.lru.Len() > 0 {
		old := t.lru.Remove(t.lru.Back()).(*rangeBlock)
		delete(t.blocks, old.key)
		t.bytes -= int64(len(old.data))
	}
	t.blocks[k] = t.lru.PushFront(&rangeBlock{key: k, data: data})
	t.bytes += int64(len(data))
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
	copy(p, el.Value.(*rangeBlock).data[off:])
	return true
}

// hasBlock reports whether block k is in memory or on disk.
func (rt *rangeTier) hasBlock(k partKey) bool {
	rt.mu.Lock()
	_, ok := rt.blocks[k]
	rt.mu.Unlock()
	return ok || rt.cache.Contains(rt.cfg.rangeCacheKey(k))
}

// fetchRange fetches rg's blocks that no tier holds, with one GET of the
// span they cover, at rg's priority in the object's group. A range whose
// parts are cached, or whose blocks are all held or being fetched, costs
// nothing. An open range (of a Seen plan) holds back the fills until it
// ends.
func (rt *rangeTier) fetchRange(rg prefetch.Range, open bool) {
	obj := rg.Obj
	if open && rg.Len < obj.Size && rg.Len > max(prefetch.LuceneHead, prefetch.LuceneTail) {
		rt.stats.ProfileRanges.Add(1) // widened by a learned profile
	}
	end := min(rg.Off+rg.Len, obj.Size)
	if rg.Off < 0 || rg.Off >= end {
		return
	}
	ps := rt.cfg.PartSize
	if rt.cache.Contains(rt.cfg.cacheKey(keyOfPart(obj, rg.Off/ps))) && rt.cache.Contains(rt.cfg.cacheKey(keyOfPart(obj, (end-1)/ps))) {
		return
	}
	b0, b1 := rg.Off/RangeBlock, (end-1)/RangeBlock
	for b0 <= b1 && rt.hasBlock(keyOfPart(obj, b0)) {
		b0++
	}
	for b1 >= b0 && rt.hasBlock(keyOfPart(obj, b1)) {
		b1--
	}
	if b0 > b1 {
		return
	}
	rt.mu.Lock()
	for b := b0; b <= b1; b++ {
		if rt.fetching[keyOfPart(obj, b)] {
			rt.mu.Unlock()
			return // another fetch covers it
		}
	}
	for b := b0; b <= b1; b++ {
		rt.fetching[keyOfPart(obj, b)] = true
	}
	if open {
		rt.pending++
	}
	rt.mu.Unlock()
	rt.stats.RangesPrefetched.Add(1)
	rt.sched.Submit(obj.Key, rg.Prio, func(ctx context.Context) { rt.fetchBlocks(ctx, obj, b0, b1, open) })
}

// fetchBlocks is the task of a range fetch: one GET of blocks b0 to b1
// of obj, kept in memory and stored in the disk cache, then the blocks
// marked fetched; the last open range to end starts the fills deferred
// for it.
func (rt *rangeTier) fetchBlocks(ctx context.Context, obj fetcher.Object, b0, b1 int64, open bool) {
	lo, hi := b0*RangeBlock, min((b1+1)*RangeBlock, obj.Size)
	buf := make([]byte, hi-lo)
	err := guard(fmt.Sprintf("fetch %s [%d,%d) for the range tier", obj.Key, lo, hi), func() error {
		return rt.store.ReadRange(ctx, obj, lo, buf)
	})
	select {
	case <-rt.stop:
		err = ErrClosed // nothing is stored after Close
	default:
	}
	if err == nil {
		rt.stats.RangeTierBytes.Add(int64(len(buf)))
		rt.stats.FetchedBytes.Add(int64(len(buf)))
		for b := b0; b <= b1; b++ {
			k := keyOfPart(obj, b)
			data := bytes.Clone(buf[(b-b0)*RangeBlock : min((b-b0+1)*RangeBlock, int64(len(buf)))]) // exact bytes in the LRU
			rt.keepBlock(k, data)
			if perr := rt.cache.PutSummed(context.Background(), rt.cfg.rangeCacheKey(k), data, nil); perr != nil {
				rt.cfg.Logger.Debug("range-tier block not cached", "key", obj.Key, "block", b, "err", perr)
			}
		}
	} else if ctx.Err() == nil {
		rt.cfg.Logger.Debug("range-tier fetch failed", "key", obj.Key, "err", err)
	}
	rt.mu.Lock()
	for b := b0; b <= b1; b++ {
		delete(rt.fetching, keyOfPart(obj, b))
	}
	var fills []prefetch.Fill
	if open {
		if rt.pending--; rt.pending == 0 {
			fills, rt.deferred = rt.deferred, nil
		}
	}
	rt.mu.Unlock()
	if first := rt.first.Load(); first != 0 {
		rt.stats.OpenPrefetchNanos.Store(time.Now().UnixNano() - first)
	}
	for _, f := range fills {
		rt.r.cursors.startFill(f.Group, f.Objects, 0, f.Once)
	}
}

// read fills p with the bytes at off within part k from the
// range tier, and reports whether every block they span was there.
func (rt *rangeTier) read(ctx context.Context, k partKey, p []byte, off int64) bool {
	a := k.idx*rt.cfg.PartSize + off
	end := a + int64(len(p))
	for b := a / RangeBlock; b*RangeBlock < end; b++ {
		if !rt.hasBlock(partKey{obj: k.obj, idx: b}) {
			return false
		}
	}
	for b := a / RangeBlock; b*RangeBlock < end; b++ {
		bk := partKey{obj: k.obj, idx: b}
		lo, hi := max(a, b*RangeBlock), min(end, (b+1)*RangeBlock)
		dst := p[lo-a : hi-a]
		if rt.memBlock(bk, dst, lo-b*RangeBlock) {
			markTier(ctx, TierMemory)
			continue
		}
		if _, ok, err := rt.cache.ReadAt(ctx, rt.cfg.rangeCacheKey(bk), dst, lo-b*RangeBlock); err != nil || !ok {
			return false // evicted meanwhile, or damaged (the cache removed it)
		}
		markTier(ctx, TierDisk)
	}
	rt.stats.RangeTierHits.Add(1)
	return true
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

// deferFills keeps fills back while an open's ranges are in flight, and
// reports whether it did.
func (rt *rangeTier) deferFills(fills []prefetch.Fill) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.pending == 0 {
		return false
	}
	rt.deferred = append(rt.deferred, fills...)
	return true
}
