package fs

import (
	"context"
	"errors"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// Background fills, queued a window at a time.
//
// A fill fetches, at background priority, every part of a run of objects
// that is not cached: the rest of an opened file (PrefetchObject), the
// small files after it, the --prefetch all sweep of the whole tree
// (PrefetchAll), and the parts a sequential reader took back (refill). It
// is a cursor over its objects' parts, not a queue of them: at most
// fillWindow of its parts are queued or in flight at once, and each one
// that ends moves the cursor on (pump). So an open costs the same
// whatever size the object's listing claims, and the records a fill
// holds are bounded by --max-fetches, not by the object.
//
// A cursor that meets cached parts skips them, at most fillScan per pump;
// if that leaves nothing of the fill in flight to pump it again, a task
// of the fill's own group continues the scan on the pool (it does no
// I/O), so a fill over a large cached object neither holds the open nor
// stops halfway.
//
// While a sequential reader's stream follows an object (follow.go), the
// fill positioned on that object leaves the rest of it to the stream: it
// records where it stopped in the stream (stream.resume) and moves to
// its next object. When the stream ends, a new fill of that object starts
// from there.

// fillScan bounds the parts one pump looks at, cached or not, before it
// returns.
const fillScan = 256

// fill is one background fill. Its group and objects are immutable;
// the rest is guarded by Reader.mu.
type fill struct {
	group string
	objs  []fetcher.Object
	// once marks each object as prefetched when the cursor reaches it
	// and skips it if it was already (the --prefetch all sweep: a file
	// opened before the sweep reaches it has its own fill).
	once bool

	oi      int   // the object the cursor is on
	next    int64 // the next part of objs[oi] to look at
	active  int   // parts this fill queued that are queued or running now
	pumping bool  // a pump runs: others only ask it to go round again
	again   bool
}

// fillWindow is how many parts one fill keeps queued or running: enough
// for every worker that background work may take.
func (r *Reader) fillWindow() int { return r.sched.Workers() }

// startFill starts a fill of objs in group, from part next of objs[0].
func (r *Reader) startFill(group string, objs []fetcher.Object, next int64, once bool) {
	if len(objs) == 0 {
		return
	}
	f := &fill{group: group, objs: objs, next: next, once: once}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.arriveLocked(f)
	r.mu.Unlock()
	r.pump(f)
}

// arriveLocked registers f as the fill on its current object (or ends
// it), marking the object prefetched for a fill that runs once per
// object. r.mu must be held.
func (r *Reader) arriveLocked(f *fill) {
	for f.oi < len(f.objs) {
		k := objectKey(f.objs[f.oi])
		if f.once && f.next == 0 {
			if r.prefetched[k] {
				f.oi++
				continue
			}
			r.prefetched[k] = true
			r.promote(f.objs[f.oi]) // built now if every part was cached already
		}
		r.fills[k] = f
		return
	}
}

// leaveLocked moves f's cursor to its next object. r.mu must be held.
func (r *Reader) leaveLocked(f *fill) {
	k := objectKey(f.objs[f.oi])
	if r.fills[k] == f {
		delete(r.fills, k)
	}
	f.oi++
	f.next = 0
	r.arriveLocked(f)
}

// pump queues parts of f until its window is full, its scan budget is
// spent or it has no parts left. Any goroutine may call it without
// r.mu; concurrent calls fold into one.
func (r *Reader) pump(f *fill) {
	r.mu.Lock()
	if f.pumping {
		f.again = true
		r.mu.Unlock()
		return
	}
	f.pumping = true
	for {
		f.again = false
		for scanned := 0; !r.closed && f.active < r.fillWindow() && f.oi < len(f.objs) && scanned < fillScan; {
			obj := f.objs[f.oi]
			if f.next*r.cfg.PartSize >= obj.Size {
				r.leaveLocked(f)
				continue
			}
			if st := r.streams[objectKey(obj)]; st != nil {
				r.yieldToStreamLocked(st, f)
				continue
			}
			idx := f.next
			f.next++
			scanned++
			r.mu.Unlock()
			r.startCall(f.group, obj, idx, prefetch.Background, f) // unless cached, held or in flight
			r.mu.Lock()
		}
		if !f.again {
			break
		}
	}
	f.pumping = false
	stalled := !r.closed && f.active == 0 && f.oi < len(f.objs)
	r.mu.Unlock()
	if stalled {
		// Only cached parts so far: nothing in flight will pump again.
		r.sched.Submit(f.group, prefetch.Background, func(context.Context) { r.pump(f) })
	}
}

// yieldToStreamLocked leaves the rest of st's object, from f's cursor,
// to the stream, and moves f on. r.mu must be held.
func (r *Reader) yieldToStreamLocked(st *stream, f *fill) {
	obj := f.objs[f.oi]
	if parts := (obj.Size + r.cfg.PartSize - 1) / r.cfg.PartSize; f.next < parts {
		st.resumeAt(f.next)
		r.stats.fillPaused.Add(parts - f.next)
	}
	r.leaveLocked(f)
}

// callEnded is told that call, queued by its fill, is out of the
// in-flight map; it pumps the fill on. A fetch that failed (after its
// retries) ends the fill of its object: the object's other parts would
// most likely fail alike, and an object whose listed size is a lie would
// otherwise cost a GET for every part it claims. Reads still fetch what
// they need. r.mu must not be held.
func (r *Reader) callEnded(call *partCall) {
	f := call.fill
	if f == nil {
		return
	}
	if call.err != nil && !errors.Is(call.err, errFillPaused) {
		r.mu.Lock()
		if f.oi < len(f.objs) && objectKey(f.objs[f.oi]) == objectKey(call.obj) {
			r.stats.fillsAbandoned.Add(1)
			r.leaveLocked(f)
		}
		r.mu.Unlock()
	}
	r.pump(f)
}

// refill starts a fill of obj's parts from idx, the first part a stream
// took back or left to its reads, in the object's own group; idx < 0
// means none.
func (r *Reader) refill(obj fetcher.Object, idx int64) {
	if idx >= 0 {
		r.startFill(obj.Key, []fetcher.Object{obj}, idx, false)
	}
}
