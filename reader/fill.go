package reader

import (
	"context"
	"errors"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// Background fills, queued a window at a time.
//
// A fill carries out a prefetch.Fill: it fetches, at background
// priority, every part of a run of objects that is not cached (the rest
// of an opened file, the small files after it, the --prefetch all sweep,
// the parts a sequential reader took back). It is a prefetch.Cursor over
// its objects' parts, not a queue of them: at most fillWindow of its
// parts are queued or in flight at once, and each one that ends moves the
// cursor on (pump). So a fill costs the same whatever size the object's
// listing claims, and the records it holds are bounded by the pool's
// workers, not by the object.
//
// A cursor that meets cached parts skips them, at most fillScan per pump;
// if that leaves nothing of the fill in flight to pump it again, a task
// of the fill's own group continues the scan on the pool (it does no
// I/O), so a fill over a large cached object neither holds the open nor
// stops halfway.
//
// While a sequential reader's stream follows an object (stream.go), the
// fill positioned on that object leaves the rest of it to the stream: it
// records where it stopped in the stream (stream.resume) and moves to
// its next object. When the stream ends, a new fill of that object starts
// from there.

// fillScan bounds the parts one pump looks at, cached or not, before it
// returns.
const fillScan = 256

// fill is one background fill. group and once are constant; active is
// guarded by partTable.mu, the rest by Reader.mu.
type fill struct {
	group string
	// once marks each object as prefetched when the cursor reaches it
	// and skips it if it was already (prefetch.Fill.Once).
	once bool

	cur     *prefetch.Cursor
	active  int  // INVARIANT: the calls in the part table whose fill is this one
	pumping bool // a pump runs: others only ask it to go round again
	again   bool
}

// fillWindow is how many parts one fill keeps queued or running: enough
// for every worker that background work may take.
func (r *Reader) fillWindow() int { return r.sched.Workers() }

// runPlan carries out what a prefetch policy asked for.
func (r *Reader) runPlan(p prefetch.Plan) { r.runPlanOf(p, false) }

// runPlanOf is runPlan; open marks a Seen plan, whose ranges are an
// open's bytes: fills wait for them (rangetier.go).
func (r *Reader) runPlanOf(p prefetch.Plan, open bool) {
	for _, pt := range p.Parts {
		if pt.Index*r.cfg.PartSize < pt.Obj.Size && !r.cache.Contains(r.cacheKey(keyOfPart(pt.Obj, pt.Index))) {
			r.startPart(pt.Obj, pt.Index, pt.Prio)
		}
	}
	for _, rg := range p.Ranges {
		r.fetchRange(rg, open)
	}
	if len(p.Fills) == 0 || r.deferFills(p.Fills) {
		return
	}
	for _, f := range p.Fills {
		r.startFill(f.Group, f.Objects, 0, f.Once)
	}
}

// startFill starts a fill of objs in group, from part next of objs[0].
func (r *Reader) startFill(group string, objs []fetcher.Object, next int64, once bool) {
	if len(objs) == 0 {
		return
	}
	f := &fill{group: group, once: once, cur: prefetch.NewCursor(objs, next)}
	r.mu.Lock()
	if r.parts.isClosed() {
		r.mu.Unlock()
		return
	}
	r.arriveLocked(f)
	r.mu.Unlock()
	r.pump(f)
}

// arriveLocked registers f as the fill on its cursor's object (or ends
// it), marking the object prefetched for a fill that runs once per
// object. r.mu must be held.
func (r *Reader) arriveLocked(f *fill) {
	for {
		obj, ok := f.cur.Object()
		if !ok {
			return
		}
		k := keyOfObject(obj)
		if f.once && f.cur.Part() == 0 {
			if r.prefetched[k] {
				f.cur.Skip()
				continue
			}
			r.prefetched[k] = true
			r.promote(obj) // built now if every part was cached already
		}
		r.fills[k] = f
		return
	}
}

// leaveLocked moves f's cursor to its next object. r.mu must be held.
func (r *Reader) leaveLocked(f *fill) {
	obj, _ := f.cur.Object()
	if k := keyOfObject(obj); r.fills[k] == f {
		delete(r.fills, k)
	}
	f.cur.Skip()
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
		for scanned := 0; scanned < fillScan && r.parts.room(f, r.fillWindow()); {
			obj, ok := f.cur.Object()
			if !ok {
				break
			}
			if f.cur.Part()*r.cfg.PartSize >= obj.Size {
				r.leaveLocked(f)
				continue
			}
			if st := r.streams[keyOfObject(obj)]; st != nil {
				r.yieldToStreamLocked(st, f)
				continue
			}
			idx := f.cur.Take()
			scanned++
			r.mu.Unlock()
			r.newCall(f.group, obj, idx, prefetch.Background, f, false) // unless cached, held or in flight
			r.mu.Lock()
		}
		if !f.again {
			break
		}
	}
	f.pumping = false
	_, more := f.cur.Object()
	stalled := more && r.parts.idle(f)
	r.mu.Unlock()
	if stalled {
		// Only cached parts so far: nothing in flight will pump again.
		r.sched.Submit(f.group, prefetch.Background, func(context.Context) { r.pump(f) })
	}
}

// yieldToStreamLocked leaves the rest of st's object, from f's cursor,
// to the stream, and moves f on. r.mu must be held.
func (r *Reader) yieldToStreamLocked(st *stream, f *fill) {
	obj, _ := f.cur.Object()
	if parts, next := (obj.Size+r.cfg.PartSize-1)/r.cfg.PartSize, f.cur.Part(); next < parts {
		st.resumeAt(next)
		r.stats.FillPaused.Add(parts - next)
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
		if obj, ok := f.cur.Object(); ok && keyOfObject(obj) == call.key.obj {
			r.stats.FillsAbandoned.Add(1)
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
