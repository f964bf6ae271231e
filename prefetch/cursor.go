package prefetch

import "github.com/segfs/segfs/fetcher"

// Cursor walks the parts of a run of objects in order: every part of
// the first object, then of the next. It holds a position, not a queue
// of parts, so a fill over an object of any claimed size costs the same.
// Not safe for concurrent use: its owner guards it.
type Cursor struct {
	objs []fetcher.Object
	oi   int   // the object the cursor is on
	next int64 // the next part of objs[oi]
}

// NewCursor returns a cursor at part from of objs[0].
func NewCursor(objs []fetcher.Object, from int64) *Cursor {
	return &Cursor{objs: objs, next: from}
}

// Object returns the object the cursor is on; ok is false once it has
// passed the last.
func (c *Cursor) Object() (obj fetcher.Object, ok bool) {
	if c.oi >= len(c.objs) {
		return fetcher.Object{}, false
	}
	return c.objs[c.oi], true
}

// Part returns the next part of the object the cursor is on.
func (c *Cursor) Part() int64 { return c.next }

// Take returns the next part and moves past it.
func (c *Cursor) Take() int64 {
	c.next++
	return c.next - 1
}

// Skip moves the cursor to part 0 of the next object.
func (c *Cursor) Skip() {
	c.oi++
	c.next = 0
}
