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
// guarded by partTable.mu, the rest by cursors.mu.
type fill struct {
	group string
	// once marks each object as prefetched when the cursor reaches it
	// and skips it if it was already (prefetch.Fill.Once).
	once bool

	cur    *prefetch.Cursor
	active int // INVARIANT: the calls in the part table whose fill is this one
	// failing counts its calls that failed and whose callEnded has not
	// yet run (guarded by partTable.mu): while any has, the fill queues
	// nothing, so that a window freed by fast failures is not refilled
	// with parts of the object their callEnded is about to abandon.
	failing int
	pumping bool // a pump runs: others only ask it to go round again
	again   bool
}

// fillWindow is how many parts one fill keeps queued or running: enough
// for every worker that background work may take.
func (c *cursors) fillWindow() int { return c.sched.Workers() }

// runPlan carries out what a prefetch policy asked for.
func (r *Reader) runPlan(p prefetch.Plan) { r.runPlanOf(p, false) }

// runPlanOf is runPlan; open marks a Seen plan, whose ranges are an
// open's bytes: fills wait for them (rangetier.go).
func (r *Reader) runPlanOf(p prefetch.Plan, open bool) {
	for _, pt := range p.Parts {
		if pt.Index*r.cfg.PartSize < pt.Obj.Size && !r.cache.Contains(r.cfg.cacheKey(keyOfPart(pt.Obj, pt.Index))) {
			r.fetches.startPart(pt.Obj, pt.Index, pt.Prio)
		}
	}
	for _, rg := range p.Ranges {
		r.rtier.fetchRange(rg, open)
	}
	if len(p.Fills) == 0 || r.rtier.deferFills(p.Fills) {
		return
	}
	for _, f := range p.Fills {
		r.cursors.startFill(f.Group, f.Objects, 0, f.Once)
	}
}

// startFill starts a fill of objs in group, from part next of objs[0].
func (c *cursors) startFill(group string, objs []fetcher.Object, next int64, once bool) {
	if len(objs) == 0 {
		return
	}
	f := &fill{group: group, once: once, cur: prefetch.NewCursor(objs, next)}
	c.mu.Lock()
	if c.parts.isClosed() {
		c.mu.Unlock()
		return
	}
	c.arriveLocked(f)
	c.mu.Unlock()
	c.pump(f)
}

// arriveLocked registers f as the fill on its cursor's object (or ends
// it), marking the object prefetched for a fill that runs once per
// object. c.mu must be held.
func (c *cursors) arriveLocked(f *fill) {
	for {
		obj, ok := f.cur.Object()
		if !ok {
			return
		}
		k := keyOfObject(obj)
		if f.once && f.cur.Part() == 0 {
			if c.prefetched[k] {
				f.cur.Skip()
				continue
			}
			c.prefetched[k] = true
			c.r.whole.request(obj) // built now if every part was cached already
		}
		c.fills[k] = f
		return
	}
}

// leaveLocked moves f's cursor to its next object. c.mu must be held.
func (c *cursors) leaveLocked(f *fill) {
	obj, _ := f.cur.Object()
	if k := keyOfObject(obj); c.fills[k] == f {
		delete(c.fills, k)
	}
	f.cur.Skip()
	c.arriveLocked(f)
}

// pump queues parts of f until its window is full, its scan budget is
// spent or it has no parts left. Any goroutine may call it without
// c.mu; concurrent calls fold into one.
func (c *cursors) pump(f *fill) {
	c.mu.Lock()
	if f.pumping {
		f.again = true
		c.mu.Unlock()
		return
	}
	f.pumping = true
	for {
		f.again = false
		for scanned := 0; scanned < fillScan && c.parts.room(f, c.fillWindow()); {
			obj, ok := f.cur.Object()
			if !ok {
				break
			}
			if f.cur.Part()*c.cfg.PartSize >= obj.Size {
				c.leaveLocked(f)
				continue
			}
			if st := c.streams[keyOfObject(obj)]; st != nil {
				c.yieldToStreamLocked(st, f)
				continue
			}
			idx := f.cur.Take()
			scanned++
			c.mu.Unlock()
			c.r.fetches.newCall(f.group, obj, idx, prefetch.Background, f, false) // unless cached, held or in flight
			c.mu.Lock()
		}
		if !f.again {
			break
		}
	}
	f.pumping = false
	_, more := f.cur.Object()
	stalled := more && c.parts.idle(f)
	c.mu.Unlock()
	if stalled {
		// Only cached parts so far: nothing in flight will pump again.
		c.sched.Submit(f.group, prefetch.Background, func(context.Context) { c.pump(f) })
	}
}

// yieldToStreamLocked leaves the rest of st's object, from f's cursor,
// to the stream, and moves f on. c.mu must be held.
func (c *cursors) yieldToStreamLocked(st *stream, f *fill) {
	obj, _ := f.cur.Object()
	if parts, next := (obj.Size+c.cfg.PartSize-1)/c.cfg.PartSize, f.cur.Part(); next < parts {
		st.resumeAt(next)
		c.stats.FillPaused.Add(parts - next)
	}
	c.leaveLocked(f)
}

// callEnded is told that call, queued by its fill, is out of the
// in-flight map; it pumps the fill on. A fetch that failed (after its
// retries) ends the fill of its object: the object's other parts would
// most likely fail alike, and an object whose listed size is a lie would
// otherwise cost a GET for every part it claims. Reads still fetch what
// they need. c.mu must not be held.
func (c *cursors) callEnded(call *partCall) {
	f := call.fill
	if f == nil {
		return
	}
	if call.err != nil && !errors.Is(call.err, errFillPaused) {
		c.mu.Lock()
		if obj, ok := f.cur.Object(); ok && keyOfObject(obj) == call.key.obj {
			c.stats.FillsAbandoned.Add(1)
			c.leaveLocked(f)
		}
		c.mu.Unlock()
	}
	c.parts.failureHandled(call)
	c.pump(f)
}

// refill starts a fill of obj's parts from idx, the first part a stream
// took back or left to its reads, in the object's own group; idx < 0
// means none.
func (c *cursors) refill(obj fetcher.Object, idx int64) {
	if idx >= 0 {
		c.startFill(obj.Key, []fetcher.Object{obj}, idx, false)
	}
}
