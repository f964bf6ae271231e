package reader

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/prefetch"
)

// partTable owns the engine's shared state of parts, under a lock of its
// own: the calls in flight (calls.go), the refs of their buffers
// (buffer.go), the parts held for the streams (held.go) and the memory
// tier (memtier.go). Everything else reaches parts through its methods:
// start or join a call, publish it, finish it, release a ref, hold a
// part. Its methods may be called concurrently.
//
// Invariants (invariantsLocked; race builds check them after every
// change of state):
//   - A call is in calls under its own key from its creation until it
//     is finished or fails; while there, it has the fetch's ref of its
//     buffer, no error, and data exactly when it is fetched.
//   - A fill's active count is the number of its calls in calls.
//   - No held part is behind its stream's window, and heldBytes is the
//     sum of the held parts' capacities.
//   - The memory tier keeps at most its limit, and counts it exactly.
//   - The InflightParts gauge is len(calls).
//
// After close the invariants are not checked: clear drops the memory
// tier and the held parts without recycling their buffers.
//
// Lock order: cursors.mu before partTable.mu before the scheduler's lock
// (the scheduler never calls back while holding its own). The disk cache
// is never called with mu held.
type partTable struct {
	// Constant after newPartTable.
	sched     *prefetch.Scheduler
	stats     *Stats
	partSize  int64
	reach     int64       // MaxReadahead: the parts held after the one a stream reads
	holdParts int64       // how many whole parts the streams may hold in all
	pool      chan []byte // free part buffers, at most one per worker

	// receiving counts part fetches filling their buffers now.
	receiving atomic.Int64

	mu        sync.Mutex
	closed    bool
	calls     map[partKey]*partCall // part fetches from start until stored (calls.go)
	mem       memTier               // parts the disk refused (memtier.go)
	held      map[objKey]*holding   // the streams' windows and held parts (held.go)
	heldBytes int64                 // capacity of the held parts
}

func newPartTable(sched *prefetch.Scheduler, stats *Stats, cfg Config) *partTable {
	return &partTable{
		sched:     sched,
		stats:     stats,
		partSize:  cfg.PartSize,
		reach:     int64(cfg.MaxReadahead),
		holdParts: int64(cfg.MaxReadahead) + 1, // one stream's part and its readahead's reach
		pool:      make(chan []byte, sched.Workers()),
		calls:     make(map[partKey]*partCall),
		mem:       newMemTier(cfg.MemoryLimit),
		held:      make(map[objKey]*holding),
	}
}

// close refuses new calls from now on, and reports whether it was
// closed already.
func (t *partTable) close() (already bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	already, t.closed = t.closed, true
	return already
}

// isClosed reports whether close has been called.
func (t *partTable) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// whileOpen runs fn under t.mu unless t is closed, and reports whether
// it ran: what fn does (a WaitGroup.Add) then happens before close.
func (t *partTable) whileOpen(fn func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	fn()
	return true
}

// clear forgets the memory tier and the held parts, without recycling
// their buffers: the Reader is closed.
func (t *partTable) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mem.clear()
	clear(t.held)
	t.heldBytes = 0
}

// present reports whether part k needs no new call: it is held, kept in
// memory or in flight (then raised to prio), or t is closed.
func (t *partTable) present(k partKey, prio prefetch.Priority) bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return true
	}
	if call := t.calls[k]; call != nil {
		call.prio = max(call.prio, prio)
		task, ranges := call.task, call.ranges
		t.mu.Unlock()
		if task != nil { // else its creator raises it once submitted
			t.sched.Raise(task, prio)
		}
		for _, rt := range ranges {
			t.sched.Raise(rt, prio)
		}
		return true
	}
	in := t.hasLocked(k)
	t.mu.Unlock()
	return in
}

// has reports whether part k is held or in the memory tier.
func (t *partTable) has(k partKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hasLocked(k)
}

func (t *partTable) hasLocked(k partKey) bool { return t.heldLocked(k) != nil || t.mem.has(k) }

// insert puts a new call in flight, unless t is closed or the part has a
// call already (another reader started it), and reports whether it did.
// With join, the caller takes a ref of the call's buffer, to be released
// by wait. The call counts in its fill's window until it leaves.
func (t *partTable) insert(call *partCall, join bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.calls[call.key] != nil {
		return false
	}
	t.calls[call.key] = call
	t.stats.InflightParts.Add(1)
	if join {
		t.retainLocked(call.buf)
	}
	if call.fill != nil {
		call.fill.active++
	}
	t.checkLocked()
	return true
}

// submitted records the task of call, submitted at prio, and raises it
// to what readers that joined meanwhile asked for.
func (t *partTable) submitted(call *partCall, task *prefetch.Task, prio prefetch.Priority) {
	t.mu.Lock()
	call.task = task
	now := call.prio
	t.mu.Unlock()
	if now > prio {
		t.sched.Raise(task, now)
	}
}

// callOf returns the call of part k in flight, nil if none, and whether
// t is closed.
func (t *partTable) callOf(k partKey) (call *partCall, closed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[k], t.closed
}

// prio returns the highest priority asked for call so far.
func (t *partTable) prio(call *partCall) prefetch.Priority {
	t.mu.Lock()
	defer t.mu.Unlock()
	return call.prio
}

// setRanges records the tasks of the other ranges of call's split fetch
// (nil once they are done) and returns the call's priority now.
func (t *partTable) setRanges(call *partCall, tasks []*prefetch.Task) prefetch.Priority {
	t.mu.Lock()
	defer t.mu.Unlock()
	call.ranges = tasks
	return call.prio
}

// join makes the caller one more reader of call; see joinLocked.
func (t *partTable) join(call *partCall) []*prefetch.Task {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.joinLocked(call)
}

// joinLocked makes the caller one more reader of call, which is then
// demand work, and returns its tasks (the call's, if it has one yet, and
// those of its ranges while a split fetch runs), to be raised by
// raiseJoined once t.mu is released. t.mu must be held.
func (t *partTable) joinLocked(call *partCall) []*prefetch.Task {
	t.retainLocked(call.buf)
	call.prio = prefetch.Demand
	tasks := make([]*prefetch.Task, 0, 1+len(call.ranges))
	if call.task != nil {
		tasks = append(tasks, call.task)
	}
	return append(tasks, call.ranges...)
}

// raiseJoined counts a join and raises its call's tasks to demand: a
// reader waits on them. t.mu must not be held.
func (t *partTable) raiseJoined(tasks []*prefetch.Task) {
	t.stats.Joins.Add(1)
	for _, task := range tasks {
		t.sched.Raise(task, prefetch.Demand)
	}
}

// wait waits for call and copies its bytes at off into p. The caller
// holds one of the call's buffer refs, which wait releases.
func (t *partTable) wait(ctx context.Context, call *partCall, p []byte, off int64) error {
	if waited(call.done) {
		markTier(ctx, TierRemote)
	} else {
		markTier(ctx, TierHeld) // fetched, not yet stored: in its buffer
	}
	select {
	case <-call.done:
	case <-ctx.Done():
		t.release(call.buf)
		return ctx.Err()
	}
	err := call.err
	if err == nil {
		copy(p, call.buf.data[off:])
	}
	t.release(call.buf)
	return err
}

// publish ends call's fetch with its bytes in data, or its error, and
// wakes its readers. A failed call leaves the in-flight map as its error
// is published: a reader that arrives after it ended starts a new fetch
// instead of taking an error from an attempt it never waited on.
func (t *partTable) publish(call *partCall, data []byte, sums *cache.Sums, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		call.buf.data, call.sums = data, sums
	} else {
		call.err = err
		if call.fill != nil {
			call.fill.failing++ // until its callEnded has moved the fill on
			call.failCounted = true
		}
		t.removeLocked(call)
	}
	call.fetched = true
	close(call.done)
}

// failureHandled ends the hold on call's fill that its failure put
// (publish), once callEnded has abandoned its object.
func (t *partTable) failureHandled(call *partCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if call.failCounted {
		call.failCounted = false
		call.fill.failing--
	}
}

// finish removes a part's call from the in-flight map, gives its bytes
// to the memory tier if keep is set, or to its object's stream if that
// holds them, and drops the fetch's ref.
func (t *partTable) finish(call *partCall, keep bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(call)
	switch {
	case t.closed || call.buf.data == nil:
	case keep:
		t.keepLocked(call.key, call.buf)
	default:
		t.holdLocked(call) // for a stream behind it (held.go)
	}
	t.releaseLocked(call.buf)
	t.checkLocked()
}

// removeLocked takes call out of the in-flight map, if it is still
// there (a failed call leaves it early, and a new call of the same part
// may have taken its place since), and out of its fill's window. t.mu
// must be held.
func (t *partTable) removeLocked(call *partCall) {
	if t.calls[call.key] != call {
		return
	}
	delete(t.calls, call.key)
	close(call.gone)
	t.stats.InflightParts.Add(-1)
	if call.fill != nil {
		call.fill.active--
	}
}

// room reports whether f may queue one more part: t is open, f has
// fewer than window calls in flight, and none of its failed calls is
// still to be handled (fill.failing).
func (t *partTable) room(f *fill, window int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.closed && f.active < window && f.failing == 0
}

// idle reports whether f has no call in flight while t is open.
func (t *partTable) idle(f *fill) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.closed && f.active == 0
}

// viewLocked returns what t holds of part k; disk is left false. t.mu
// must be held.
func (t *partTable) viewLocked(k partKey) partView {
	v := partView{memory: t.mem.has(k), held: t.heldLocked(k) != nil}
	if call := t.calls[k]; call != nil {
		v.call, v.callReady, v.callWaited = true, call.fetched, call.prio == prefetch.Demand
	}
	return v
}

// read is the part table's tier of a part read: it reads rd's bytes
// from the first tier in memory that has them, in the order choose gives
// (decide.go), or joins the part's call in flight and waits for it. If
// none has the part, it returns done false and what the table knows of
// it (disk left false). retry is choose's. It returns ErrClosed once t
// is closed.
func (t *partTable) read(ctx context.Context, rd partRead, retry bool) (done bool, v partView, err error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false, v, ErrClosed
	}
	v = t.viewLocked(rd.key)
	switch choose(v, rd.small, retry) {
	case fromMemory:
		t.mem.copyOut(rd.key, rd.p, rd.off)
		t.mu.Unlock()
		t.stats.MemoryHits.Add(1)
		markTier(ctx, TierMemory)
		return true, v, nil
	case fromHeld:
		copy(rd.p, t.heldLocked(rd.key).data[rd.off:])
		t.mu.Unlock()
		t.stats.HeldHits.Add(1)
		markTier(ctx, TierHeld)
		return true, v, nil
	case fromCall:
		call := t.calls[rd.key]
		tasks := t.joinLocked(call)
		t.mu.Unlock()
		t.raiseJoined(tasks)
		return true, v, t.wait(ctx, call, rd.p, rd.off)
	}
	t.mu.Unlock()
	return false, v, nil
}

// borrow returns the buffer of part k with a ref of the caller's, if a
// stream holds the part or its call is in flight (then joined, and the
// call and its tasks are returned too); nil if neither, or t is closed.
func (t *partTable) borrow(k partKey) (buf *partBuf, call *partCall, tasks []*prefetch.Task) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return nil, nil, nil
	case t.calls[k] != nil:
		call = t.calls[k]
		return call.buf, call, t.joinLocked(call)
	}
	if buf = t.heldLocked(k); buf != nil {
		t.retainLocked(buf)
	}
	return buf, nil, nil
}
