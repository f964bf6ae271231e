package reader

import (
	"context"
	"fmt"
	"sync"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// rangeKey names a byte range of an object version.
type rangeKey struct {
	obj    objKey
	off, n int64
}

// rangeGets are the range GETs in flight, by range. Their lock is their
// own: a range GET shares nothing with parts (it is never cached), so it
// takes no part of partTable.mu. Lock order: rangeGets.mu before the
// scheduler's (a reader that gives up cancels the task under it).
type rangeGets struct {
	// Constant after New.
	store fetcher.Store
	sched *prefetch.Scheduler
	stats *Stats

	mu    sync.Mutex
	calls map[rangeKey]*rangeCall
}

// rangeCall is one GET of a range, shared by the readers of that range.
// data and err are set before done is closed; data is never modified.
type rangeCall struct {
	done chan struct{}
	data []byte
	err  error
	task *prefetch.Task // guarded by rangeGets.mu
	refs int            // readers waiting; guarded by rangeGets.mu
}

// read fetches exactly [off, off+len(p)) of obj at demand priority,
// without caching it: the cold small read's fast path. Readers of the same
// range share one GET.
func (g *rangeGets) read(ctx context.Context, obj fetcher.Object, off int64, p []byte) error {
	markTier(ctx, TierRemote)
	rk := rangeKey{obj: keyOfObject(obj), off: off, n: int64(len(p))}
	g.mu.Lock()
	call := g.calls[rk]
	if call == nil {
		call = &rangeCall{done: make(chan struct{})}
		g.calls[rk] = call
		g.mu.Unlock()
		g.stats.RangeReads.Add(1)
		task := g.sched.Submit(obj.Key, prefetch.Demand, func(ctx context.Context) {
			buf := make([]byte, len(p)) // the task may outlive its readers
			err := guard(fmt.Sprintf("fetch %s [%d,%d)", obj.Key, off, off+int64(len(buf))), func() error {
				return g.store.ReadRange(ctx, obj, off, buf)
			})
			if err == nil {
				g.stats.FetchedBytes.Add(int64(len(buf)))
			}
			g.mu.Lock()
			delete(g.calls, rk)
			call.data, call.err = buf, err
			close(call.done)
			g.mu.Unlock()
		})
		g.mu.Lock()
		call.task = task
	} else {
		g.stats.Joins.Add(1)
	}
	call.refs++
	g.mu.Unlock()

	select {
	case <-call.done:
		if call.err != nil {
			return call.err
		}
		copy(p, call.data)
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		call.refs--
		// Nobody else wants it and it never ran: drop it. (The scheduler
		// never calls back into the Reader while holding its own lock.)
		if call.refs == 0 && call.task != nil && g.sched.Cancel(call.task) {
			delete(g.calls, rk)
			call.err = ctx.Err()
			close(call.done)
		}
		g.mu.Unlock()
		return ctx.Err()
	}
}
