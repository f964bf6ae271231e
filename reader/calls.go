package reader

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	// failCounted: its failure holds its fill (fill.failing) until
	// callEnded.
	failCounted bool
	prio        prefetch.Priority // the highest priority asked for it; Demand: a reader waits on it
	ranges      []*prefetch.Task  // the other ranges' tasks while a split fetch runs (split.go)
}

// partFetches run the part calls: each fetch is a scheduler task that
// fills the part's buffer, publishes it to its readers through the part
// table, and hands it to the writers, which store it in the disk cache
// (or the memory tier, if the disk refuses it) and finish the call. The
// fetch goroutine does not wait for the disk: it goes on to the next
// fetch unless every writer is busy, which bounds the fetched parts held
// in memory.
type partFetches struct {
	// Constant after newPartFetches.
	r     *Reader // for its hooks, cursors and promoter
	store fetcher.Store
	cache Cache
	sched *prefetch.Scheduler
	cfg   Config
	stats *Stats
	parts *partTable
	putq  chan *partCall // hands fetched parts to the writers; closed by close

	senders sync.WaitGroup // fetches sending to putq; Add only while the part table is open
	writers sync.WaitGroup
}

func newPartFetches(r *Reader) *partFetches {
	return &partFetches{
		r: r, store: r.store, cache: r.cache, sched: r.sched, cfg: r.cfg, stats: &r.stats, parts: r.parts,
		putq: make(chan *partCall), // a hand-off: no parts queued beyond the writers
	}
}

// startWriters starts cfg.Writers writers, which run until close.
func (pf *partFetches) startWriters() {
	pf.writers.Add(pf.cfg.Writers)
	for range pf.cfg.Writers {
		go pf.writer()
	}
}

// close waits for the writers to store the parts handed over. With
// first (the part table has just been closed, so no fetch starts
// sending any more) it ends the hand-off once the fetches sending to it
// have sent.
func (pf *partFetches) close(first bool) {
	if first {
		pf.senders.Wait()
		close(pf.putq)
	}
	pf.writers.Wait()
}

// startPart makes sure part idx of obj is in flight at prio or higher,
// unless it is cached.
func (pf *partFetches) startPart(obj fetcher.Object, idx int64, prio prefetch.Priority) {
	pf.newCall(obj.Key, obj, idx, prio, nil, false)
}

// startDemand starts part idx of obj for a reader that waits on it, if
// nothing holds, caches or fetches it yet, and returns the call with a
// ref of the reader's, to wait on with partTable.wait; else it returns nil. A
// reader waits on the fetch it started even if that fails at once: it
// then has its own attempt's error, not a second attempt.
func (pf *partFetches) startDemand(obj fetcher.Object, idx int64) *partCall {
	return pf.newCall(obj.Key, obj, idx, prefetch.Demand, nil, true)
}

// newCall starts a fetch of part idx of obj in the scheduler group
// group (within a priority, groups take turns and each group's fetches
// run in the order they were queued), for the fill f if not nil: the
// call counts in that fill's window until it leaves the in-flight map.
// A part in flight already is raised to prio instead; a part held,
// kept in memory or cached is left alone. With join, the caller becomes
// a reader of the call it creates, which it returns.
func (pf *partFetches) newCall(group string, obj fetcher.Object, idx int64, prio prefetch.Priority, f *fill, join bool) *partCall {
	k := keyOfPart(obj, idx)
	if pf.parts.present(k, prio) {
		return nil
	}
	if ck := pf.cfg.cacheKey(k); pf.cache.Contains(ck) {
		if prio == prefetch.Readahead {
			pf.cache.WillNeed(ck) // a hint; direct cache I/O reads part files past the page cache
		}
		return nil
	}
	call := &partCall{key: k, obj: obj, group: group, done: make(chan struct{}), gone: make(chan struct{}),
		buf: &partBuf{refs: 1}, prio: prio, fill: f}
	if !pf.parts.insert(call, join) {
		return nil // closed, or lost a race to another reader, who started it
	}
	pf.stats.started(prio).Add(1)
	pf.r.hooks.submitting(call)
	// Submit outside the table's lock: after the scheduler is closed it
	// runs the task at once, on this goroutine.
	// The part's length is its cost under the background cap
	// (prefetch.Config.BackgroundRate).
	task := pf.sched.SubmitCost(group, prio, pf.cfg.partLen(obj, idx), func(ctx context.Context) { pf.runFetch(ctx, call) })
	pf.parts.submitted(call, task, prio)
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
func (pf *partFetches) runFetch(ctx context.Context, call *partCall) {
	n := pf.cfg.partLen(call.obj, call.key.idx)
	buf := pf.parts.getBuf(n)
	sums := pf.cache.NewSums(buf)
	var progress func(int)
	if sums != nil {
		progress = sums.Filled
	}
	start := time.Now()
	pf.parts.receiving.Add(1)
	err := guard(fmt.Sprintf("fetch %s part %d", call.obj.Key, call.key.idx), func() error {
		return pf.fetchPart(ctx, call, buf, sums, progress)
	})
	pf.parts.receiving.Add(-1)
	pf.stats.FetchNanos.Add(int64(time.Since(start)))
	if err != nil {
		pf.stats.FetchErrors.Add(1)
	} else {
		pf.stats.PartsFetched.Add(1)
		pf.stats.FetchedBytes.Add(n)
	}
	pf.parts.publish(call, buf, sums, err)
	pf.r.hooks.published(call)

	if err != nil {
		pf.parts.putBuf(buf) // never published: no reader has it
		pf.finishCall(call, false)
		return
	}
	if !pf.queuePut(call) {
		pf.finishCall(call, false) // closed: not cached
	}
}

// queuePut hands a fetched part to a writer, waiting while all are busy
// (which bounds the fetched parts held in memory). It returns false if the
// Reader is closed.
func (pf *partFetches) queuePut(call *partCall) bool {
	if !pf.parts.whileOpen(func() { pf.senders.Add(1) }) {
		return false
	}
	defer pf.senders.Done()
	pf.putq <- call // the writers take parts until every sender is done
	return true
}

// writer stores the parts handed over by runFetch until putq is closed.
func (pf *partFetches) writer() {
	defer pf.writers.Done()
	for call := range pf.putq {
		pf.storePart(call)
	}
}

// storePart stores a fetched part in the disk cache, or keeps it in the
// memory tier if the disk refuses it, and ends its call.
func (pf *partFetches) storePart(call *partCall) {
	start := time.Now()
	// A write handed over is finished even while the Reader closes (Close
	// waits for it): the bytes were fetched, and there are few writers.
	err := pf.cache.PutSummed(context.Background(), pf.cfg.cacheKey(call.key), call.buf.data, call.sums)
	pf.stats.PutNanos.Add(int64(time.Since(start)))
	if err != nil {
		if errors.Is(err, cache.ErrNoSpace) {
			pf.stats.NoSpace.Add(1)
		} else {
			pf.cfg.Logger.Warn("caching part failed; keeping it in memory", "key", call.obj.Key, "part", call.key.idx, "err", err)
		}
	}
	pf.finishCall(call, err != nil)
	if err == nil {
		pf.r.whole.request(call.obj)
	}
}

// finishCall ends a part's call in the part table (keep: its bytes go
// to the memory tier) and tells its fill.
func (pf *partFetches) finishCall(call *partCall, keep bool) {
	pf.parts.finish(call, keep)
	pf.r.cursors.callEnded(call)
}
