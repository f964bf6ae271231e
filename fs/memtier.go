package fs

import "container/list"

// memTier keeps whole parts in memory, least recently used evicted first,
// within a byte bound. The Reader uses it for parts the disk cache
// refused, so that a full disk costs no refetch per read. Not safe for
// concurrent use: Reader.mu guards it.
type memTier struct {
	limit int64
	bytes int64
	lru   list.List // of *memPart, most recently used first
	parts map[partKey]*list.Element
}

type memPart struct {
	key  partKey
	data []byte
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
	copy(p, el.Value.(*memPart).data[off:])
	return true
}

// keep adds a part, evicting the least recently used to stay in bounds. A
// part larger than the bound is not kept. data is retained, and counted by
// its capacity: the memory it holds.
func (m *memTier) keep(k partKey, data []byte) {
	size := int64(cap(data))
	if size > m.limit || m.has(k) {
		return
	}
	for m.bytes+size > m.limit {
		old := m.lru.Remove(m.lru.Back()).(*memPart)
		delete(m.parts, old.key)
		m.bytes -= int64(cap(old.data))
	}
	m.parts[k] = m.lru.PushFront(&memPart{key: k, data: data})
	m.bytes += size
}

func (m *memTier) clear() {
	m.lru.Init()
	clear(m.parts)
	m.bytes = 0
}
