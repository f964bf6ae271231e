package reader

import (
	"errors"
	"time"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// Following a sequential reader.
//
// A part fetched before its reader arrives is stored and its buffer
// recycled, and the reader then reads it back from the disk cache. For a
// sequential reader slower than the remote (a copy on a busy machine)
// that is every part: the background fill of an opened file runs ahead
// of it, each read waits for the disk and checks its blocks again, and
// the fill's writes compete for the same disk (docs/BENCH.md has the
// figures). So while a handle reads an object sequentially (its stream),
// the Reader follows it:
//
//   - The object's background fill, queued at open, is taken back: its
//     queued fetches past the readahead's reach are cancelled and its
//     cursor leaves the object (fill.go); the stream's readahead fetches
//     what it needs, and a fill from the first part taken back starts
//     when the stream ends (the handle is released, or it reads anywhere
//     else), so every part still gets fetched.
//   - A part fetched for the stream, from the one it reads to the end of
//     its readahead's reach (MaxReadahead parts after it), is kept in
//     memory (held: the stream takes a ref of its buffer) after it is
//     stored, until the stream reads past it. The held parts and the part
//     fetches receiving, together, stay within MaxReadahead+1 parts: what
//     the readahead of one stream has in flight at most. A held part
//     takes no more memory than its fetch did, and other files' fetches
//     leave less room to hold.
//
// One stream per object: a second handle reading the same object
// sequentially is served as before. A stream that goes StreamIdle without
// a read is no longer followed (sweepStreams): a handle left open after a
// partial sequential read would otherwise keep its object's fill paused,
// and its held parts in memory, until it is closed.

// errFillPaused ends a background fetch taken back for a stream before it
// started. No reader waits on such a call (a reader that joins a call
// marks it demand, and demand calls are not taken back).
var errFillPaused = errors.New("background fill paused for a sequential reader")

// stream is the sequential reader of one object that the Reader follows.
// Guarded by cursors.mu.
//
// INVARIANT: while the stream is in cursors.streams, the part table has
// its window (held.go) at pos, which holds the parts fetched for it from
// pos on until it reads past them.
type stream struct {
	owner *prefetch.Sequence
	obj   fetcher.Object
	pos   int64     // the part of the owner's last read
	last  time.Time // when the owner last read
	// resume is the first part whose background fetch was taken back or
	// left to the stream, -1 if none: the fill starts again from there.
	resume int64
}

// resumeAt records that the background fetches of the stream's object
// from part idx on were left to it.
func (st *stream) resumeAt(idx int64) {
	if st.resume < 0 || idx < st.resume {
		st.resume = idx
	}
}

// follow records a read by seq of obj whose first part is first. A
// streaming read starts or moves seq's stream of obj; any other read ends
// it. It returns the part from which the object's background fill must
// start again, -1 if none, and the fills to pump on.
func (c *cursors) follow(obj fetcher.Object, seq *prefetch.Sequence, first int64, streaming bool) (refill int64, pump []*fill) {
	k := keyOfObject(obj)
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.checkLocked()
	st := c.streams[k]
	switch {
	case c.parts.isClosed():
		return -1, nil
	case !streaming:
		if st != nil && st.owner == seq {
			return c.endStreamLocked(st), nil
		}
		return -1, nil
	case st == nil:
		st = &stream{owner: seq, obj: obj, pos: first, resume: -1}
		c.streams[k] = st
		pump = c.pauseFillLocked(st)
	case st.owner != seq:
		return -1, nil
	}
	st.pos, st.last = first, time.Now()
	c.parts.follow(k, first) // lets go of the parts held behind it
	return -1, pump
}

// pauseFillLocked takes back the queued background fetches of st's object
// past the reach of its readahead, and raises those within it to
// readahead: the stream will read them next, and readahead may use the
// workers that background work leaves free. The fill positioned on the
// object leaves it to the stream. It returns the fills whose window it
// freed, to be pumped once c.mu is released. c.mu must be held.
func (c *cursors) pauseFillLocked(st *stream) (pump []*fill) {
	ok := keyOfObject(st.obj)
	if f := c.fills[ok]; f != nil {
		c.yieldToStreamLocked(st, f)
		pump = append(pump, f)
	}
	taken, first := c.parts.takeBack(ok, st.pos)
	if first >= 0 {
		st.resumeAt(first)
	}
	return append(pump, taken...)
}

// endStreamLocked stops following st and drops its held parts (they are
// in the disk cache). It returns the part from which the object's fill
// must start again, -1 if none. c.mu must be held.
func (c *cursors) endStreamLocked(st *stream) int64 {
	c.parts.unfollow(keyOfObject(st.obj))
	delete(c.streams, keyOfObject(st.obj))
	return st.resume
}

// endStream stops following seq's stream of obj, if it has one: the
// handle that owns seq is released. The background fetches taken back for
// the stream are queued again.
func (c *cursors) endStream(obj fetcher.Object, seq *prefetch.Sequence) {
	c.mu.Lock()
	refill := int64(-1)
	if st := c.streams[keyOfObject(obj)]; st != nil && st.owner == seq {
		refill = c.endStreamLocked(st)
	}
	c.mu.Unlock()
	c.refill(obj, refill)
}

// sweepStreams ends the streams that have gone StreamIdle without a read,
// until Close.
func (c *cursors) sweepStreams() {
	tick := time.NewTicker(c.cfg.StreamIdle / 2)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-tick.C:
			c.endIdleStreams(now)
		}
	}
}

// endIdleStreams stops following every stream whose last read is
// StreamIdle or more before now, and queues their objects' fill again.
func (c *cursors) endIdleStreams(now time.Time) {
	type ended struct {
		obj    fetcher.Object
		resume int64
	}
	var idle []ended
	c.mu.Lock()
	for _, st := range c.streams {
		if now.Sub(st.last) >= c.cfg.StreamIdle {
			idle = append(idle, ended{st.obj, c.endStreamLocked(st)})
			c.stats.IdleStreams.Add(1)
		}
	}
	c.mu.Unlock()
	for _, e := range idle {
		c.refill(e.obj, e.resume)
	}
}
