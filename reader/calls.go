package reader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// partCall is one fetch of a whole part, shared by every reader that wants
// it (single-flight). The call stays in Reader.inflight from its creation
// until the part is in the disk cache (or was refused), so that readers
// arriving meanwhile copy from its buffer instead of fetching again; a
// failed call leaves as its error is published.
type partCall struct {
	// Constant after creation.
	key   partKey
	obj   fetcher.Object
	group string // the scheduler group it was queued in
	done  chan struct{}
	gone  chan struct{} // closed when it leaves the in-flight map: stored, kept, dropped or failed
	buf   *partBuf      // holds the fetch's ref until finishCall
	fill  *fill         // the background fill that queued it, if one did (fill.go)

	// Guarded by Reader.mu.
	task *prefetch.Task // nil until submitted
	sums *cache.Sums    // the part's block checksums, if the cache takes them
	// err is set, or buf.data published, before done is closed, and
	// fetched then set; neither changes after.
	err     error
	fetched bool
	prio    prefetch.Priority // the highest priority asked for it; Demand: a reader waits on it
	ranges  []*prefetch.Task  // the other ranges' tasks while a split fetch runs (split.go)
}

// startPart makes sure part idx of obj is in flight at prio or higher,
// unless it is cached.
func (r *Reader) startPart(obj fetcher.Object, idx int64, prio prefetch.Priority) {
	r.newCall(obj.Key, obj, idx, prio, nil, false)
}

// startDemand starts part idx of obj for a reader that waits on it, if
// nothing holds, caches or fetches it yet, and returns the call with a
// ref of the reader's, to wait on with waitCall; else it returns nil. A
// reader waits on the fetch it started even if that fails at once: it
// then has its own attempt's error, not a second attempt.
func (r *Reader) startDemand(obj fetcher.Object, idx int64) *partCall {
	return r.newCall(obj.Key, obj, idx, prefetch.Demand, nil, true)
}

// newCall starts a fetch of part idx of obj in the scheduler group
// group (within a priority, groups take turns and each group's fetches
// run in the order they were queued), for the fill f if not nil: the
// call counts in that fill's window until it leaves the in-flight map.
// A part in flight already is raised to prio instead; a part held,
// kept in memory or cached is left alone. With join, the caller becomes
// a reader of the call it creates, which it returns.
func (r *Reader) newCall(group string, obj fetcher.Object, idx int64, prio prefetch.Priority, f *fill, join bool) *partCall {
	k := keyOfPart(obj, idx)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	if call := r.inflight[k]; call != nil {
		call.prio = max(call.prio, prio)
		task, ranges := call.task, call.ranges
		r.mu.Unlock()
		if task != nil { // else its creator raises it once submitted
			r.sched.Raise(task, prio)
		}
		for _, t := range ranges {
			r.sched.Raise(t, prio)
		}
		return nil
	}
	if r.heldLocked(k) != nil || r.mem.has(k) {
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

	call := &partCall{key: k, obj: obj, group: group, done: make(chan struct{}), gone: make(chan struct{}),
		buf: &partBuf{refs: 1}, prio: prio, fill: f}
	r.mu.Lock()
	if r.closed || r.inflight[k] != nil {
		r.mu.Unlock()
		return nil // lost a race to another reader, who started it
	}
	r.inflight[k] = call
	r.stats.InflightParts.Add(1)
	if join {
		r.retainLocked(call.buf) // the reader's, released by waitCall
	}
	if f != nil {
		f.active++
	}
	r.checkLocked()
	r.mu.Unlock()
	r.stats.started(prio).Add(1)
	if r.beforeSubmit != nil {
		r.beforeSubmit(call)
	}
	// Submit outside mu: after the scheduler is closed it runs the task
	// at once, on this goroutine.
	// The part's length is its cost under the background cap
	// (prefetch.Config.BackgroundRate).
	task := r.sched.SubmitCost(group, prio, r.partLen(obj, idx), func(ctx context.Context) { r.runFetch(ctx, call) })
	r.mu.Lock()
	call.task = task
	now := call.prio // raised by a reader that joined before the task existed
	r.mu.Unlock()
	if now > prio {
		r.sched.Raise(task, now)
	}
	if !join {
		return nil
	}
	return call
}

// joinLocked makes the caller one more reader of call, which is then
// demand work, and returns its tasks (the call's, if it has one yet, and
// those of its ranges while a split fetch runs), to be raised by
// raiseJoined once r.mu is released. r.mu must be held.
func (r *Reader) joinLocked(call *partCall) []*prefetch.Task {
	r.retainLocked(call.buf)
	call.prio = prefetch.Demand
	tasks := make([]*prefetch.Task, 0, 1+len(call.ranges))
	if call.task != nil {
		tasks = append(tasks, call.task)
	}
	return append(tasks, call.ranges...)
}

// raiseJoined counts a join and raises its call's tasks to demand: a
// reader waits on them.
func (r *Reader) raiseJoined(tasks []*prefetch.Task) {
	r.stats.Joins.Add(1)
	for _, t := range tasks {
		r.sched.Raise(t, prefetch.Demand)
	}
}

// waitCall waits for call and copies its bytes at off into p. It holds one
// of the call's buffer refs, which it releases.
func (r *Reader) waitCall(ctx context.Context, call *partCall, p []byte, off int64) error {
	if waited(call.done) {
		markTier(ctx, TierRemote)
	} else {
		markTier(ctx, TierHeld) // fetched, not yet stored: in its buffer
	}
	select {
	case <-call.done:
	case <-ctx.Done():
		r.mu.Lock()
		r.releaseLocked(call.buf)
		r.mu.Unlock()
		return ctx.Err()
	}
	err := call.err
	if err == nil {
		copy(p, call.buf.data[off:])
	}
	r.mu.Lock()
	r.releaseLocked(call.buf)
	r.mu.Unlock()
	return err
}

// runFetch is the scheduler task of a part: fetch, publish to waiters,
// and hand the part to the writers, which store it in the disk cache (or
// the memory tier if the disk refuses it). The fetch goroutine does not
// wait for the disk: it goes on to the next fetch unless every writer is
// busy.
func (r *Reader) runFetch(ctx context.Context, call *partCall) {
	n := r.partLen(call.obj, call.key.idx)
	buf := r.getBuf(n)
	sums := r.cache.NewSums(buf)
	var progress func(int)
	if sums != nil {
		progress = sums.Filled
	}
	start := time.Now()
	r.receiving.Add(1)
	err := guard(fmt.Sprintf("fetch %s part %d", call.obj.Key, call.key.idx), func() error {
		return r.fetchPart(ctx, call, buf, sums, progress)
	})
	r.receiving.Add(-1)
	r.stats.FetchNanos.Add(int64(time.Since(start)))
	if err != nil {
		r.stats.FetchErrors.Add(1)
	} else {
		r.stats.PartsFetched.Add(1)
		r.stats.FetchedBytes.Add(n)
	}

	r.mu.Lock()
	if err == nil {
		call.buf.data, call.sums = buf, sums
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
		r.putBuf(buf) // never published: no reader has it
		r.finishCall(call, false)
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
	err := r.cache.PutSummed(context.Background(), r.cacheKey(call.key), call.buf.data, call.sums)
	r.stats.PutNanos.Add(int64(time.Since(start)))
	if err != nil {
		if errors.Is(err, cache.ErrNoSpace) {
			r.stats.NoSpace.Add(1)
		} else {
			r.cfg.Logger.Warn("caching part failed; keeping it in memory", "key", call.obj.Key, "part", call.key.idx, "err", err)
		}
	}
	r.finishCall(call, err != nil)
	if err == nil {
		r.promote(call.obj)
	}
}

// finishCall removes a part's call from the in-flight map, gives its
// bytes to the memory tier if keep is set, or to its object's stream if
// one wants them, and drops the fetch's ref.
func (r *Reader) finishCall(call *partCall, keep bool) {
	defer r.callEnded(call)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(call)
	switch {
	case r.closed || call.buf.data == nil:
	case keep:
		r.keepLocked(call.key, call.buf)
	default:
		r.holdLocked(call) // for a stream behind it (stream.go)
	}
	r.releaseLocked(call.buf)
	r.checkLocked()
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
	close(call.gone)
	r.stats.InflightParts.Add(-1)
	if call.fill != nil {
		call.fill.active--
	}
}
