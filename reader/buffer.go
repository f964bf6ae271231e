package reader

// partBuf is the buffer of one part's bytes, shared by everything that
// reads it and given back to the pool when the last of them lets go.
//
// Its owners each hold one ref, taken and dropped under partTable.mu:
//   - the part's fetch, from the call's creation until the part is
//     stored (partTable.finish) or the call fails;
//   - each reader waiting on the call or copying from its bytes
//     (joinLocked, then wait or a borrowed reply's release);
//   - the memory tier, while it keeps the part (memtier.go);
//   - a stream's window, while it holds the part (held.go).
//
// INVARIANT: data is nil until a fetch publishes its bytes, and from
// then on is never written; refs > 0 while data is not nil; when refs
// drops to 0 the buffer is recycled and data is nil again.
type partBuf struct {
	data []byte
	refs int
}

// retainLocked takes one more ref of b. t.mu must be held.
func (t *partTable) retainLocked(b *partBuf) { b.refs++ }

// release drops one ref of b; see releaseLocked.
func (t *partTable) release(b *partBuf) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseLocked(b)
}

// releaseLocked drops one ref of b and recycles its bytes after the
// last. t.mu must be held.
func (t *partTable) releaseLocked(b *partBuf) {
	b.refs--
	if b.refs < 0 {
		panic("reader: part buffer released more often than retained")
	}
	if b.refs == 0 && b.data != nil {
		t.putBuf(b.data)
		b.data = nil
	}
}

// getBuf returns a buffer of n bytes. Buffers for more than half a part
// have a whole part's capacity and are recycled, so that the last,
// shorter parts of objects (a copy of a shard meets one per file) reuse
// them instead of leaving a part's worth of garbage each; smaller ones
// are left to the collector.
func (t *partTable) getBuf(n int64) []byte {
	if n > t.partSize/2 {
		select {
		case b := <-t.pool:
			return b[:n]
		default:
		}
		return make([]byte, n, t.partSize)
	}
	return make([]byte, n)
}

// putBuf recycles a buffer from getBuf with a whole part's capacity;
// others are left to the collector. The pool holds at most one buffer
// per worker.
func (t *partTable) putBuf(b []byte) {
	if int64(cap(b)) != t.partSize {
		return
	}
	select {
	case t.pool <- b[:cap(b)]:
	default:
	}
}
