package reader

import (
	"sync"

	"github.com/segfs/segfs/prefetch"
)

// cursors are the Reader's cursors over objects: the sequential readers
// it follows (stream.go) and the background fills (fill.go), with the
// Once set of the prefetch policies, under a lock of their own. They
// reach parts only through the part table, and start calls through the
// Reader (newCall).
//
// Invariants (invariantsLocked; race builds check them after every
// change of state): each stream and fill is filed under its object; a
// fill's active count is its calls in the part table; each stream has
// its window in the part table at its position, and no window is
// without a stream.
//
// Lock order: cursors.mu before partTable.mu (and promoter.mu, which
// arriveLocked takes), before the scheduler's lock.
type cursors struct {
	// Constant after newCursors.
	r     *Reader // for newCall and promote
	parts *partTable
	sched *prefetch.Scheduler
	stats *Stats
	cfg   Config
	stop  chan struct{} // closed by Reader.Close: ends sweepStreams

	mu         sync.Mutex
	prefetched map[objKey]bool    // objects a Once fill reached (fill.go)
	fills      map[objKey]*fill   // the fill whose cursor is on each object (fill.go)
	streams    map[objKey]*stream // sequential readers followed (stream.go)
}

func newCursors(r *Reader) *cursors {
	return &cursors{
		r:          r,
		parts:      r.parts,
		sched:      r.sched,
		stats:      &r.stats,
		cfg:        r.cfg,
		stop:       r.stop,
		prefetched: make(map[objKey]bool),
		fills:      make(map[objKey]*fill),
		streams:    make(map[objKey]*stream),
	}
}

// clear forgets every stream and fill: the Reader is closed.
func (c *cursors) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.streams)
	clear(c.fills)
}
