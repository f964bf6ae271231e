package reader

import "fmt"

// checkLocked checks the Reader's invariants after a change of its
// state, in builds with the race detector (the unit tests run so): a
// violation panics where it happens. Other builds skip it: it walks
// every map. r.mu must be held.
func (r *Reader) checkLocked() {
	if checkInvariants {
		if err := r.checkInvariantsLocked(); err != nil {
			panic(err)
		}
	}
}

// checkInvariantsLocked returns the first broken invariant of the
// Reader's mutable state, nil if none. r.mu must be held.
func (r *Reader) checkInvariantsLocked() error {
	if r.closed {
		return nil // Close drops the memory tier and streams without recycling
	}
	active := make(map[*fill]int)
	for k, call := range r.inflight {
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
	for k, f := range r.fills {
		obj, ok := f.cur.Object()
		if !ok || keyOfObject(obj) != k {
			return fmt.Errorf("reader: fill filed under %v is not on it", k)
		}
		if f.active != active[f] {
			return fmt.Errorf("reader: fill on %v counts %d calls, %d in flight", k, f.active, active[f])
		}
	}
	var held int64
	for k, st := range r.streams {
		if keyOfObject(st.obj) != k {
			return fmt.Errorf("reader: stream of %s filed under %v", st.obj.Key, k)
		}
		for idx, b := range st.held {
			if b.refs < 1 || b.data == nil {
				return fmt.Errorf("reader: held part %d of %s has refs %d, data %v", idx, st.obj.Key, b.refs, b.data != nil)
			}
			if idx < st.pos {
				return fmt.Errorf("reader: part %d of %s held behind its stream at %d", idx, st.obj.Key, st.pos)
			}
			held += int64(cap(b.data))
		}
	}
	if held != r.heldBytes {
		return fmt.Errorf("reader: held parts take %d bytes, counted %d", held, r.heldBytes)
	}
	var mem int64
	for k, el := range r.mem.parts {
		mp := el.Value.(*memPart)
		if mp.key != k || mp.buf.refs < 1 || mp.buf.data == nil {
			return fmt.Errorf("reader: memory tier part %v: key %v, refs %d, data %v", k, mp.key, mp.buf.refs, mp.buf.data != nil)
		}
		mem += int64(cap(mp.buf.data))
	}
	if mem != r.mem.bytes || mem > r.mem.limit {
		return fmt.Errorf("reader: memory tier takes %d bytes, counted %d, limit %d", mem, r.mem.bytes, r.mem.limit)
	}
	if n := r.stats.InflightParts.Load(); n != int64(len(r.inflight)) {
		return fmt.Errorf("reader: %d calls in flight, gauge says %d", len(r.inflight), n)
	}
	return nil
}
