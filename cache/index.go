package cache

// The index: which part files exist, their sizes, their recency, and
// which of them belong to pinned (open) objects. Every method here
// requires Cache.mu.

// entry is one part file on disk.
type entry struct {
	id         partID
	size       int64     // the file's size, header included
	whole      bool      // a whole-object file and its seal (object.go), not a part
	obj        *objState // nil until the part is read or written under its Key
	prev, next *entry    // LRU links; front is most recently used
}

func (e *entry) pinned() bool { return e.obj != nil && e.obj.pins > 0 }

// lruList is an intrusive doubly linked list with a sentinel.
type lruList struct{ root entry }

func (l *lruList) init()        { l.root.next, l.root.prev = &l.root, &l.root }
func (l *lruList) back() *entry { return l.ptr(l.root.prev) }
func (l *lruList) ptr(e *entry) *entry {
	if e == &l.root {
		return nil
	}
	return e
}

func (l *lruList) insertAfter(e, at *entry) {
	e.prev, e.next = at, at.next
	at.next.prev = e
	at.next = e
}

func (l *lruList) remove(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (l *lruList) pushFront(e *entry)   { l.insertAfter(e, &l.root) }
func (l *lruList) pushBack(e *entry)    { l.insertAfter(e, l.root.prev) }
func (l *lruList) moveToFront(e *entry) { l.remove(e); l.pushFront(e) }

// objID names an object version, the unit of pinning.
type objID struct{ object, etag string }

type objState struct {
	id      objID
	pins    int // Pin calls not yet undone
	entries int // index entries that point here
}

// index is guarded by Cache.mu.
type index struct {
	entries  map[partID]*entry
	lru      lruList
	used     int64 // sum of entries' sizes
	reserved int64 // bytes reserved by Puts in progress

	// busy holds parts being written or removed: nobody else writes,
	// removes or indexes them until the owner clears the mark.
	busy map[partID]struct{}
	// tomb holds parts removed while the index loads, so that the loader
	// does not index a file it saw before the removal. Nil once loaded.
	tomb   map[partID]struct{}
	loaded bool

	wholes int // entries that are whole-object files

	objs          map[objID]*objState
	pinnedEntries int // entries whose object is pinned
}

func newIndex() *index {
	x := &index{
		entries: make(map[partID]*entry),
		busy:    make(map[partID]struct{}),
		tomb:    make(map[partID]struct{}),
		objs:    make(map[objID]*objState),
	}
	x.lru.init()
	return x
}

// mayIndex reports whether a part found on disk by someone other than its
// writer may be indexed now.
func (x *index) mayIndex(id partID) bool {
	_, present := x.entries[id]
	_, busy := x.busy[id]
	_, dead := x.tomb[id]
	return !present && !busy && !dead
}

// insert indexes a part file of size bytes at the front (most recent) or
// the back of the LRU. k may be nil when the part's Key is unknown.
func (x *index) insert(id partID, size int64, k *Key, front bool) *entry {
	e := &entry{id: id, size: size}
	x.entries[id] = e
	x.used += size
	if front {
		x.lru.pushFront(e)
	} else {
		x.lru.pushBack(e)
	}
	if k != nil {
		x.attach(e, k)
	}
	return e
}

// attach records which object e belongs to, for pinning.
func (x *index) attach(e *entry, k *Key) {
	if e.obj != nil {
		return
	}
	o := x.obj(objID{k.Object, k.ETag})
	o.entries++
	e.obj = o
	if o.pins > 0 {
		x.pinnedEntries++
	}
}

// insertWhole indexes a whole-object file and its seal, size bytes in all.
func (x *index) insertWhole(id partID, size int64, k *Key, front bool) *entry {
	e := x.insert(id, size, k, front)
	e.whole = true
	x.wholes++
	return e
}

func (x *index) remove(e *entry) {
	if e.whole {
		x.wholes--
	}
	delete(x.entries, e.id)
	x.used -= e.size
	x.lru.remove(e)
	if o := e.obj; o != nil {
		o.entries--
		if o.pins > 0 {
			x.pinnedEntries--
		}
		x.dropObj(o)
	}
	if !x.loaded {
		x.tomb[e.id] = struct{}{}
	}
}

func (x *index) obj(id objID) *objState {
	o := x.objs[id]
	if o == nil {
		o = &objState{id: id}
		x.objs[id] = o
	}
	return o
}

func (x *index) dropObj(o *objState) {
	if o.pins == 0 && o.entries == 0 {
		delete(x.objs, o.id)
	}
}

func (x *index) pin(id objID) {
	o := x.obj(id)
	if o.pins == 0 {
		x.pinnedEntries += o.entries
	}
	o.pins++
}

func (x *index) unpin(id objID) {
	o := x.objs[id]
	if o == nil || o.pins == 0 {
		panic("cache: Unpin without Pin")
	}
	o.pins--
	if o.pins == 0 {
		x.pinnedEntries -= o.entries
	}
	x.dropObj(o)
}

// victim is a part removed from the index whose file is still to be
// removed; it is marked busy until then.
type victim struct {
	id    partID
	size  int64
	whole bool
}

// evict removes least recently used parts from the index, parts of
// unpinned objects first, until enough(freed) holds for the bytes freed
// so far or nothing is left, and returns them marked busy. The caller
// removes their files and then clears the marks (Cache.removeVictims).
func (x *index) evict(enough func(freed int64) bool) []victim {
	var out []victim
	var freed int64
	take := func(e *entry) {
		x.remove(e)
		x.busy[e.id] = struct{}{}
		out = append(out, victim{e.id, e.size, e.whole})
		freed += e.size
	}
	// First pass: unpinned parts, from the back. A pinned part passed over
	// moves to the front (a second chance), so repeated evictions do not
	// rescan the same pinned parts; the scan is bounded by the count.
	for scan := len(x.entries); scan > 0 && !enough(freed) && x.pinnedEntries < len(x.entries); scan-- {
		e := x.lru.back()
		if e.pinned() {
			x.lru.moveToFront(e)
			continue
		}
		take(e)
	}
	// Second pass: pinned parts too, least recently used first.
	for !enough(freed) {
		e := x.lru.back()
		if e == nil {
			break
		}
		take(e)
	}
	return out
}
