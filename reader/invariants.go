package reader

import "fmt"

// Invariant checks, in builds with the race detector (the unit tests run
// so): after a change of state a violation panics where it happens.
// Other builds skip them: they walk every map.

// checkLocked checks the part table's invariants. t.mu must be held.
func (t *partTable) checkLocked() {
	if checkInvariants {
		if err := t.invariantsLocked(); err != nil {
			panic(err)
		}
	}
}

// invariantsLocked returns the first broken invariant of the part
// table (see partTable), nil if none. t.mu must be held.
func (t *partTable) invariantsLocked() error {
	if t.closed {
		return nil // clear drops the memory tier and held parts without recycling
	}
	active := make(map[*fill]int)
	for k, call := range t.calls {
		switch {
		case call.key != k:
			return fmt.Errorf("reader: call of %v filed under %v", call.key, k)
		case call.buf.refs < 1:
			return fmt.Errorf("reader: call of %v in flight without the fetch's ref", k)
		case call.err != nil:
			return fmt.Errorf("reader: failed call of %v still in flight", k)
		case call.fetched != (call.buf.data != nil):
			return fmt.Errorf("reader: call of %v fetched=%v with data=%v", k, call.fetched, call.buf.data != nil)
		}
		if call.fill != nil {
			active[call.fill]++
		}
	}
	for f, n := range active {
		if f.active != n {
			return fmt.Errorf("reader: fill of group %s counts %d calls, %d in flight", f.group, f.active, n)
		}
	}
	var held int64
	for obj, h := range t.held {
		for idx, b := range h.parts {
			if b.refs < 1 || b.data == nil {
				return fmt.Errorf("reader: held part %d of %s has refs %d, data %v", idx, obj.key, b.refs, b.data != nil)
			}
			if idx < h.pos {
				return fmt.Errorf("reader: part %d of %s held behind its stream at %d", idx, obj.key, h.pos)
			}
			held += int64(cap(b.data))
		}
	}
	if held != t.heldBytes {
		return fmt.Errorf("reader: held parts take %d bytes, counted %d", held, t.heldBytes)
	}
	var mem int64
	for k, el := range t.mem.parts {
		mp := el.Value.(*memPart)
		if mp.key != k || mp.buf.refs < 1 || mp.buf.data == nil {
			return fmt.Errorf("reader: memory tier part %v: key %v, refs %d, data %v", k, mp.key, mp.buf.refs, mp.buf.data != nil)
		}
		mem += int64(cap(mp.buf.data))
	}
	if mem != t.mem.bytes || mem > t.mem.limit {
		return fmt.Errorf("reader: memory tier takes %d bytes, counted %d, limit %d", mem, t.mem.bytes, t.mem.limit)
	}
	if n := t.stats.InflightParts.Load(); n != int64(len(t.calls)) {
		return fmt.Errorf("reader: %d calls in flight, gauge says %d", len(t.calls), n)
	}
	return nil
}

// checkLocked checks the invariants of the Reader's cursors (streams
// and fills) and how they match the part table. c.mu must be held.
func (c *cursors) checkLocked() {
	if checkInvariants {
		if err := c.invariantsLocked(); err != nil {
			panic(err)
		}
	}
}

// invariantsLocked returns the first broken invariant of the streams
// and fills, nil if none: each is filed under its object, a fill counts
// its calls in flight, and each stream has its window in the part table
// at its position, and no window is without a stream. c.mu must be held.
func (c *cursors) invariantsLocked() error {
	t := c.parts
	t.mu.Lock() // cursors.mu before partTable.mu
	defer t.mu.Unlock()
	if t.closed {
		return nil // Close drops the streams and fills
	}
	calls := make(map[*fill]int)
	for _, call := range t.calls {
		if call.fill != nil {
			calls[call.fill]++
		}
	}
	for k, f := range c.fills {
		obj, ok := f.cur.Object()
		if !ok || keyOfObject(obj) != k {
			return fmt.Errorf("reader: fill filed under %v is not on it", k)
		}
		if f.active != calls[f] {
			return fmt.Errorf("reader: fill on %v counts %d calls, %d in flight", k, f.active, calls[f])
		}
	}
	for k, st := range c.streams {
		if keyOfObject(st.obj) != k {
			return fmt.Errorf("reader: stream of %s filed under %v", st.obj.Key, k)
		}
		if h := t.held[k]; h == nil || h.pos != st.pos {
			return fmt.Errorf("reader: stream of %s at part %d has no window there in the part table", st.obj.Key, st.pos)
		}
	}
	for k := range t.held {
		if c.streams[k] == nil {
			return fmt.Errorf("reader: window of %s without a stream", k.key)
		}
	}
	return nil
}
