package fs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// partCall is one fetch of a whole part, shared by every reader that wants
// it. data and err are set once, before done is closed. The call stays in
// Reader.inflight until the part is in the disk cache (or was refused), so
// that readers arriving meanwhile copy from data instead of fetching again.
type partCall struct {
	key   partKey
	obj   fetcher.Object
	group string // the scheduler group it was queued in
	done  chan struct{}

	// Guarded by Reader.mu.
	task    *prefetch.Task // nil until submitted
	data    []byte         // valid after done, until refs drops to 0
	sums    *cache.Sums    // data's block checksums, if the cache takes them
	err     error
	refs    int               // the fetch itself until it ends, plus each reader copying
	kept    bool              // data moved to the memory tier or held for a stream; not returned to the pool
	fetched bool              // done is closed and data or err is set
	prio    prefetch.Priority // the highest priority asked for it; Demand: a reader waits on it
	ranges  []*prefetch.Task  // the other ranges' tasks while a split fetch runs (split.go)
	fill    *fill             // the background fill that queued it, if one did (fill.go)
}

// startPart makes sure part idx of obj is in flight at prio or higher,
// unless it is cached.
func (r *Reader) startPart(obj fetcher.Object, idx int64, prio prefetch.Priority) {
	r.startCall(obj.Key, obj, idx, prio, nil)
}

// startCall is startPart with the scheduler group the fetch is queued
// in (within a priority, groups take turns and each group's fetches run
// in the order they were queued) and the fill it is for, if any: a call
// it creates counts in that fill's window until it leaves the in-flight
// map.
func (r *Reader) startCall(group string, obj fetcher.Object, idx int64, prio prefetch.Priority, f *fill) {
	r.newCall(group, obj, idx, prio, f, false)
}

// startDemand starts part idx of obj for a reader that waits on it, if
// nothing holds, caches or fetches it yet, and returns the call with a
// ref of the reader's, to wait on with waitCall; else it returns nil. A
// reader waits on the fetch it started even if that fails at once: it
// then has its own attempt's error, not a second attempt.
func (r *Reader) startDemand(obj fetcher.Object, idx int64) *partCall {
	return r.newCall(obj.Key, obj, idx, prefetch.Demand, nil, true)
}

// newCall is startCall, and startDemand when join is set.
func (r *Reader) newCall(group string, obj fetcher.Object, idx int64, prio prefetch.Priority, f *fill, join bool) *partCall {
	k := keyOf(obj, idx)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	if call := r.inflight[k]; call != nil {
		task := call.task
		call.prio = max(call.prio, prio)
		ranges := call.ranges
		r.mu.Unlock()
		if task != nil {
			r.sched.Raise(task, prio)
		}
		for _, t := range ranges {
			r.sched.Raise(t, prio)
		}
		return nil
	}
	if _, held := r.heldLocked(k); held || r.mem.has(k) {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	if ck := r.cacheKey(k); r.cache.Contains(ck) {
		if prio == prefetch.Readahead {
			r.cache.WillNeed(ck) // a hint; direct cache I/O reads part files past the page cache
		}
		return nil
	}

	call := &partCall{key: k, obj: obj, group: group, done: make(chan struct{}), refs: 1, prio: prio, fill: f}
	r.mu.Lock()
	if r.closed || r.inflight[k] != nil {
		r.mu.Unlock()
		return nil // lost a race to another reader, who started it
	}
	r.inflight[k] = call
	if join {
		call.refs++ // the reader's, released by waitCall
	}
	if f != nil {
		f.active++
	}
	r.mu.Unlock()
	r.stats.started[prio].Add(1)
	// Submit outside mu: after the scheduler is closed it runs the task
	// at once, on this goroutine.
	task := r.sched.Submit(group, prio, func(ctx context.Context) { r.runFetch(ctx, call) })
	r.mu.Lock()
	call.task = task
	r.mu.Unlock()
	if !join {
		return nil
	}
	return call
}

// runFetch is the scheduler task of a part: fetch, publish to waiters,
// and hand the part to the writers, which store it in the disk cache (or
// the memory tier if the disk refuses it). The fetch goroutine does not
// wait for the disk: it goes on to the next fetch unless every writer is
// busy.
func (r *Reader) runFetch(ctx context.Context, call *partCall) {
	n := r.partLen(call.obj, call.key.idx)
	buf := r.getBuf(n)
	var sums *cache.Sums
	var progress func(int)
	if sc, ok := r.cache.(summingCache); ok {
		sums = sc.NewSums(buf)
		progress = sums.Filled
	}
	start := time.Now()
	r.receiving.Add(1)
	err := func() (err error) {
		defer catchPanic(&err, fmt.Sprintf("fetch %s part %d", call.obj.Key, call.key.idx))
		return r.fetchPart(ctx, call, buf, sums, progress)
	}()
	r.receiving.Add(-1)
	r.stats.fetchNanos.Add(int64(time.Since(start)))
	if err != nil {
		r.stats.fetchErrors.Add(1)
	} else {
		r.stats.partsFetched.Add(1)
		r.stats.fetchedBytes.Add(n)
	}

	r.mu.Lock()
	if err == nil {
		call.data, call.sums = buf, sums
	} else {
		// A failed call leaves the in-flight map as its error is
		// published: a reader that arrives after it ended starts a new
		// fetch instead of taking an error from an attempt it never
		// waited on.
		call.err = err
		r.removeLocked(call)
	}
	call.fetched = true
	close(call.done)
	r.mu.Unlock()
	if r.afterPublish != nil {
		r.afterPublish(call)
	}

	if err != nil {
		r.finishCall(call, false)
		r.putBuf(buf)
		return
	}
	if !r.queuePut(call) {
		r.finishCall(call, false) // closed: not cached
	}
}

// queuePut hands a fetched part to a writer, waiting while all are busy
// (which bounds the fetched parts held in memory). It returns false if the
// Reader is closed.
func (r *Reader) queuePut(call *partCall) bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.senders.Add(1)
	r.mu.Unlock()
	defer r.senders.Done()
	r.putq <- call // the writers take parts until every sender is done
	return true
}

// writer stores the parts handed over by runFetch until putq is closed.
func (r *Reader) writer() {
	defer r.writers.Done()
	for call := range r.putq {
		r.storePart(call)
	}
}

// storePart stores a fetched part in the disk cache, or keeps it in the
// memory tier if the disk refuses it, and ends its call.
func (r *Reader) storePart(call *partCall) {
	start := time.Now()
	// A write handed over is finished even while the Reader closes (Close
	// waits for it): the bytes were fetched, and there are few writers.
	var err error
	if sc, ok := r.cache.(summingCache); ok && call.sums != nil {
		err = sc.PutSummed(context.Background(), r.cacheKey(call.key), call.data, call.sums)
	} else {
		err = r.cache.Put(context.Background(), r.cacheKey(call.key), call.data)
	}
	r.stats.putNanos.Add(int64(time.Since(start)))
	if err != nil {
		if errors.Is(err, cache.ErrNoSpace) {
			r.stats.noSpace.Add(1)
		} else {
			r.cfg.Logger.Warn("caching part failed; keeping it in memory", "key", call.key.key, "part", call.key.idx, "err", err)
		}
	}
	r.finishCall(call, err != nil)
	if err == nil {
		r.promote(call.obj)
	}
}

// finishCall removes a part's call from the in-flight map, moving its
// bytes to the memory tier if keep is set, and drops the fetch's ref.
func (r *Reader) finishCall(call *partCall, keep bool) {
	defer r.callEnded(call)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(call)
	switch {
	case r.closed || call.data == nil:
	case keep:
		r.mem.keep(call.key, call.data)
		call.kept = true
	default:
		call.kept = r.holdLocked(call) // for a stream behind it (follow.go)
	}
	r.releaseLocked(call)
}

// removeLocked takes call out of the in-flight map, if it is still
// there (a failed call leaves it early, and a new call of the same part
// may have taken its place since), and out of its fill's window. r.mu
// must be held.
func (r *Reader) removeLocked(call *partCall) {
	if r.inflight[call.key] != call {
		return
	}
	delete(r.inflight, call.key)
	if call.fill != nil {
		call.fill.active--
	}
}

// waitCall waits for call and copies its bytes at off into p. It holds one
// of call's refs, which it releases.
func (r *Reader) waitCall(ctx context.Context, call *partCall, p []byte, off int64) error {
	select {
	case <-call.done:
	case <-ctx.Done():
		r.mu.Lock()
		r.releaseLocked(call)
		r.mu.Unlock()
		return ctx.Err()
	}
	var err error
	if call.err != nil {
		err = call.err
	} else {
		copy(p, call.data[off:])
	}
	r.mu.Lock()
	r.releaseLocked(call)
	r.mu.Unlock()
	return err
}

// releaseLocked drops one ref of call and recycles its buffer after the
// last. r.mu must be held.
func (r *Reader) releaseLocked(call *partCall) {
	call.refs--
	if call.refs == 0 && call.data != nil {
		if !call.kept {
			r.putBuf(call.data)
		}
		call.data = nil
	}
}

// rangeKey names a byte range of an object version.
type rangeKey struct {
	key, etag string
	off, n    int64
}

// rangeCall is one GET of a range, shared by the readers of that range.
// data and err are set before done is closed; data is never modified.
type rangeCall struct {
	done chan struct{}
	data []byte
	err  error
	task *prefetch.Task
	refs int // readers waiting; guarded by Reader.mu
}

// readRange fetches exactly [off, off+len(p)) of obj at demand priority,
// without caching it: the cold small read's fast path. Readers of the same
// range share one GET.
func (r *Reader) readRange(ctx context.Context, obj fetcher.Object, off int64, p []byte) error {
	rk := rangeKey{key: obj.Key, etag: obj.ETag, off: off, n: int64(len(p))}
	r.mu.Lock()
	call := r.ranges[rk]
	if call == nil {
		call = &rangeCall{done: make(chan struct{})}
		r.ranges[rk] = call
		r.mu.Unlock()
		r.stats.rangeReads.Add(1)
		task := r.sched.Submit(obj.Key, prefetch.Demand, func(ctx context.Context) {
			buf := make([]byte, len(p)) // the task may outlive its readers
			err := func() (err error) {
				defer catchPanic(&err, fmt.Sprintf("fetch %s [%d,%d)", obj.Key, off, off+int64(len(buf))))
				return r.store.ReadRange(ctx, obj, off, buf)
			}()
			if err == nil {
				r.stats.fetchedBytes.Add(int64(len(buf)))
			}
			r.mu.Lock()
			delete(r.ranges, rk)
			call.data, call.err = buf, err
			close(call.done)
			r.mu.Unlock()
		})
		r.mu.Lock()
		call.task = task
	} else {
		r.stats.joins.Add(1)
	}
	call.refs++
	r.mu.Unlock()

	select {
	case <-call.done:
		if call.err != nil {
			return call.err
		}
		copy(p, call.data)
		return nil
	case <-ctx.Done():
		r.mu.Lock()
		call.refs--
		// Nobody else wants it and it never ran: drop it. (The scheduler
		// never calls back into the Reader while holding its own lock.)
		if call.refs == 0 && call.task != nil && r.sched.Cancel(call.task) {
			delete(r.ranges, rk)
			call.err = ctx.Err()
			close(call.done)
		}
		r.mu.Unlock()
		return ctx.Err()
	}
}

// getBuf returns a buffer of n bytes. Buffers for more than half a part
// have a whole part's capacity and are recycled, so that the last, shorter
// parts of objects (a copy of a shard meets one per file) reuse them
// instead of leaving 4-8 MiB of garbage each; smaller ones are left to
// the collector.
func (r *Reader) getBuf(n int64) []byte {
	if n > r.cfg.PartSize/2 {
		select {
		case b := <-r.bufs:
			return b[:n]
		default:
		}
		return make([]byte, n, r.cfg.PartSize)
	}
	return make([]byte, n)
}

// putBuf recycles a buffer from getBuf with a whole part's capacity;
// others are left to the collector.
func (r *Reader) putBuf(b []byte) {
	if int64(cap(b)) != r.cfg.PartSize {
		return
	}
	select {
	case r.bufs <- b[:cap(b)]:
	default:
	}
}

// PrefetchObject is called when obj is opened. It starts the object's
// first part as readahead, unless it is cached, and queues at background
// priority every other part of obj that is not cached, once per object
// version, and with --passthrough the build of its whole-object file. The
// object is its own scheduler group, so the fills of several opened files
// take turns.
//
// The first part goes first because it is what an opened file's reader
// most often reads first: a copy, or any read from the start. Queued with
// the rest, it started as one whole-part GET (the rest of the fill, queued
// behind it, leaves no worker spare to split it). As readahead it splits
// across the workers the fill leaves free (Scheduler.Spare does not count
// queued background work against readahead). Measured on a cold 1 GiB
// read: the first bytes served after about 150 ms instead of 250 ms in
// most runs (docs/BENCH.md).
func (r *Reader) PrefetchObject(obj fetcher.Object) {
	if obj.Size > 0 && !r.cache.Contains(r.cacheKey(keyOf(obj, 0))) {
		r.startPart(obj, 0, prefetch.Readahead)
	}
	r.prefetchObject(obj.Key, obj)
}

func (r *Reader) prefetchObject(group string, obj fetcher.Object) {
	k := keyOf(obj, -1)
	r.mu.Lock()
	seen := r.prefetched[k]
	r.prefetched[k] = true
	r.mu.Unlock()
	if seen {
		return
	}
	r.startFill(group, []fetcher.Object{obj}, 0, false)
	r.promote(obj) // built now if every part was cached already
}

// SmallAhead is how many of the small files (one part or less) that
// follow an opened file in its directory PrefetchSmallAfter queues.
const SmallAhead = 32

// PrefetchSmallAfter queues in the background, once each, the first
// SmallAhead of objs: the small files that follow a file just opened in
// its directory, in listing order, of which --prefetch open fetches
// ahead. A copy of a directory opens its files one after another in
// that order, and each small file is one GET that the copy would
// otherwise wait for in turn, with the pool idle around it (measured on
// the bench: 0-4 GETs in flight for 0.1-0.5 s at a time of a 5 s copy).
// A search engine opening a segment reads its small files too. The
// larger files are left to their own open.
func (r *Reader) PrefetchSmallAfter(objs []fetcher.Object) {
	for _, obj := range objs[:min(len(objs), SmallAhead)] {
		r.prefetchObject(obj.Key, obj)
	}
}

// sweepGroup is the scheduler group of PrefetchAll's fetches. Object
// keys cannot hold a NUL, so no file's own group has this name.
const sweepGroup = "\x00prefetch-all"

// PrefetchAll queues every object's parts in the background as one sweep
// that runs in order: first the objects of one part, smallest first, so
// that a copy of the whole tree never waits on a small file's first byte;
// then the larger objects in the order given (the listing's, which is
// the order of the tree's inode numbers and of its directory entries,
// the order a copy reads them in), each one's parts in parallel, up to
// the workers background work may take.
//
// One order, not files taking turns: a copy reads one file after another,
// so the file it reads next is the one to finish first. Measured on a
// network-bound bench (16 MB/s per connection), the sweep taking turns
// among 12 large files fetched everything in 7.4 s while the copy, at the
// file the turns had left least complete, still had 1.4 s to go, all of
// it read back from the disk cache. The sweep is one group of the
// scheduler, so an opened file's own fill or a reader's readahead still
// takes its turns beside it.
func (r *Reader) PrefetchAll(ctx context.Context, objects []fetcher.Object) error {
	var small, large []fetcher.Object
	for _, obj := range objects {
		if obj.Size <= r.cfg.PartSize {
			small = append(small, obj)
		} else {
			large = append(large, obj)
		}
	}
	slices.SortStableFunc(small, func(a, b fetcher.Object) int { return cmp.Compare(a.Size, b.Size) })
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("prefetch: %w", err)
	}
	r.startFill(sweepGroup, append(small, large...), 0, true)
	return nil
}
