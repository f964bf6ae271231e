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
// it (single-flight). The call stays in the part table from its creation
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

	// Guarded by partTable.mu.
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
	if r.parts.present(k, prio) {
		return nil
	}
	if ck := r.cacheKey(k); r.cache.Contains(ck) {
		if prio == prefetch.Readahead {
			r.cache.WillNeed(ck) // a hint; direct cache I/O reads part files past the page cache
		}
		return nil
	}
	call := &partCall{key: k, obj: obj, group: group, done: make(chan struct{}), gone: make(chan struct{}),
		buf: &partBuf{refs: 1}, prio: prio, fill: f}
	if !r.parts.insert(call, join) {
		return nil // closed, or lost a race to another reader, who started it
	}
	r.stats.started(prio).Add(1)
	r.hooks.submitting(call)
	// Submit outside the table's lock: after the scheduler is closed it
	// runs the task at once, on this goroutine.
	// The part's length is its cost under the background cap
	// (prefetch.Config.BackgroundRate).
	task := r.sched.SubmitCost(group, prio, r.partLen(obj, idx), func(ctx context.Context) { r.runFetch(ctx, call) })
	r.parts.submitted(call, task, prio)
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
	buf := r.parts.getBuf(n)
	sums := r.cache.NewSums(buf)
	var progress func(int)
	if sums != nil {
		progress = sums.Filled
	}
	start := time.Now()
	r.parts.receiving.Add(1)
	err := guard(fmt.Sprintf("fetch %s part %d", call.obj.Key, call.key.idx), func() error {
		return r.fetchPart(ctx, call, buf, sums, progress)
	})
	r.parts.receiving.Add(-1)
	r.stats.FetchNanos.Add(int64(time.Since(start)))
	if err != nil {
		r.stats.FetchErrors.Add(1)
	} else {
		r.stats.PartsFetched.Add(1)
		r.stats.FetchedBytes.Add(n)
	}
	r.parts.publish(call, buf, sums, err)
	r.hooks.published(call)

	if err != nil {
		r.parts.putBuf(buf) // never published: no reader has it
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
	if !r.parts.whileOpen(func() { r.senders.Add(1) }) {
		return false
	}
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

// finishCall ends a part's call in the part table (keep: its bytes go
// to the memory tier) and tells its fill.
func (r *Reader) finishCall(call *partCall, keep bool) {
	r.parts.finish(call, keep)
	r.cursors.callEnded(call)
}
