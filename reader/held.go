package reader

import "github.com/segfs/segfs/prefetch"

// Held parts: the part table's side of a stream (stream.go). While a
// stream follows an object, the table has a window for it, from the part
// its reader reads (pos) to the end of its readahead's reach (pos+reach);
// a part of the window that is stored while the window is there is kept
// in memory (held, with a ref of its buffer) until the stream reads past
// it or ends. The held parts and the part fetches receiving, together,
// stay within holdParts parts: what the readahead of one stream has in
// flight at most.

// holding is one stream's window and the parts held in it. Guarded by
// partTable.mu.
type holding struct {
	pos int64 // the part the stream's reader reads
	// parts are the held parts, one ref each: none behind pos (a part
	// is held only within the window when it is stored; the window may
	// move back past it after).
	parts map[int64]*partBuf
}

// follow opens or moves obj's window to start at part pos, letting go of
// the parts held behind it.
func (t *partTable) follow(obj objKey, pos int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.held[obj]
	if h == nil {
		h = &holding{parts: make(map[int64]*partBuf)}
		t.held[obj] = h
	}
	h.pos = pos
	for idx := range h.parts {
		if idx < pos {
			t.dropHeldLocked(h, idx)
		}
	}
	t.checkLocked()
}

// unfollow closes obj's window and lets go of its held parts (they are
// in the disk cache).
func (t *partTable) unfollow(obj objKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.held[obj]
	if h == nil {
		return
	}
	for idx := range h.parts {
		t.dropHeldLocked(h, idx)
	}
	delete(t.held, obj)
	t.checkLocked()
}

// dropHeldLocked lets go of a held part: the window's ref of its buffer.
// t.mu must be held.
func (t *partTable) dropHeldLocked(h *holding, idx int64) {
	b := h.parts[idx]
	delete(h.parts, idx)
	t.heldBytes -= int64(cap(b.data))
	t.stats.HeldBytes.Store(t.heldBytes)
	t.releaseLocked(b)
}

// holdLocked keeps the stored part of call in memory, with a ref of its
// buffer, if it is within its object's window and the bound has room.
// t.mu must be held.
func (t *partTable) holdLocked(call *partCall) {
	h := t.held[call.key.obj]
	if h == nil || call.key.idx < h.pos || call.key.idx > h.pos+t.reach {
		return
	}
	size := int64(cap(call.buf.data))
	held := (t.heldBytes + size + t.partSize - 1) / t.partSize // in parts, rounded up
	if held+t.receiving.Load() > t.holdParts {
		return
	}
	if _, ok := h.parts[call.key.idx]; ok {
		return
	}
	t.retainLocked(call.buf)
	h.parts[call.key.idx] = call.buf
	t.heldBytes += size
	t.stats.HeldBytes.Store(t.heldBytes)
}

// heldLocked returns the buffer of a held part, nil if no window holds
// it. t.mu must be held.
func (t *partTable) heldLocked(k partKey) *partBuf {
	if h := t.held[k.obj]; h != nil {
		return h.parts[k.idx]
	}
	return nil
}

// takeBack takes back the queued background calls of obj past the reach
// of a window at pos, and raises those within it to readahead: a stream
// will read them next, and readahead may use the workers that background
// work leaves free. It returns the fills whose window it freed, to be
// pumped once the locks are released, and the first part taken back, -1
// if none.
func (t *partTable) takeBack(obj objKey, pos int64) (pump []*fill, first int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	first = -1
	for k, call := range t.calls {
		if k.obj != obj || call.prio == prefetch.Demand || call.task == nil || call.fetched {
			continue
		}
		if k.idx <= pos+t.reach {
			if k.idx >= pos {
				call.prio = max(call.prio, prefetch.Readahead)
				t.sched.Raise(call.task, prefetch.Readahead)
			}
			continue
		}
		if !t.sched.Cancel(call.task) { // running already
			continue
		}
		t.removeLocked(call)
		if call.fill != nil {
			pump = append(pump, call.fill)
		}
		call.err = errFillPaused
		call.fetched = true
		close(call.done)
		t.releaseLocked(call.buf) // the fetch's: it will never run
		if first < 0 || k.idx < first {
			first = k.idx
		}
		t.stats.FillPaused.Add(1)
	}
	t.checkLocked()
	return pump, first
}
