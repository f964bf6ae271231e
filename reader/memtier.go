package reader

import "container/list"

// memTier keeps whole parts in memory, least recently used evicted first,
// within a byte bound. The Reader uses it for parts the disk cache
// refused, so that a full disk costs no refetch per read. It holds one
// ref of each part's buffer while it keeps the part. Not safe for
// concurrent use: partTable.mu guards it.
type memTier struct {
	limit int64
	bytes int64     // INVARIANT: the sum of cap(data) of the parts kept, at most limit
	lru   list.List // of *memPart, most recently used first
	parts map[partKey]*list.Element
}

type memPart struct {
	key partKey
	buf *partBuf
}

func newMemTier(limit int64) memTier {
	return memTier{limit: limit, parts: make(map[partKey]*list.Element)}
}

func (m *memTier) has(k partKey) bool {
	_, ok := m.parts[k]
	return ok
}

// copyOut copies the part's bytes at off into p and reports whether the
// part was there.
func (m *memTier) copyOut(k partKey, p []byte, off int64) bool {
	el, ok := m.parts[k]
	if !ok {
		return false
	}
	m.lru.MoveToFront(el)
	copy(p, el.Value.(*memPart).buf.data[off:])
	return true
}

// keepLocked adds a part to the memory tier, evicting the least
// recently used to stay in bounds, and takes a ref of its buffer. A part
// larger than the bound is not kept. It reports whether it kept the
// part. t.mu must be held.
func (t *partTable) keepLocked(k partKey, b *partBuf) bool {
	m := &t.mem
	size := int64(cap(b.data))
	if size > m.limit || m.has(k) {
		return false
	}
	for m.bytes+size > m.limit {
		old := m.lru.Remove(m.lru.Back()).(*memPart)
		delete(m.parts, old.key)
		m.bytes -= int64(cap(old.buf.data))
		t.releaseLocked(old.buf)
	}
	t.retainLocked(b)
	m.parts[k] = m.lru.PushFront(&memPart{key: k, buf: b})
	m.bytes += size
	t.stats.MemoryBytes.Store(m.bytes)
	return true
}

// clear forgets every part, without recycling their buffers: the Reader
// is closed.
func (m *memTier) clear() {
	m.lru.Init()
	clear(m.parts)
	m.bytes = 0
}
