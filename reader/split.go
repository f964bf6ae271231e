package reader

import (
	"context"
	"fmt"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// Splitting a part fetch.
//
// A part is one GET, and a GET's time is its first byte's latency plus
// its bytes at one connection's rate, so a reader waiting on one part
// waits for one connection while idle workers do nothing: the first read
// of a file, each small file that a copy opens in turn, a stream's first
// parts before its readahead window has grown. So a part fetch that
// finds workers nothing else is waiting for (Scheduler.Spare at its
// priority) splits its part into that many more ranges, of at least
// SplitSize bytes, and submits them as tasks of its own group and
// priority; it fetches the first range itself. A part fetched ahead of
// a stream (readahead) is one GET: the stream's window keeps up to
// --max-fetches parts in flight, it has time, and every GET costs the
// client and the server CPU of their own (split, a stream's readahead
// took 4-5 GETs a part on loopback, and the GETs' CPU bound the read;
// BENCH.md). A fill's part (background) still splits on an idle pool:
// a fill keeps few parts in flight. A part fetch never takes a worker
// from queued work, so a pool kept busy fetches whole parts.
//
// A reader that comes to wait on a part whose fetch split raises the
// ranges with the part, so a range still queued at background priority
// does not wait behind other files' background work.
//
// The fetch that split waits for its ranges without holding a worker
// that a range needs: once its own range is in, it takes back each range
// still queued (Scheduler.Cancel) and fetches it itself, and waits only
// for ranges already running, which wait on nothing but the remote.
// After Close the scheduler runs queued ranges at once with its cancelled
// context, so they end. The part is published, cached and counted as one
// part, as an unsplit one.

// subRange is one range of a split part fetch, run as its own task.
type subRange struct {
	lo, hi int64 // within the part
	done   chan struct{}
	err    error // set before done is closed
}

// fetchPart fills buf with the bytes of call's part, with one GET, or
// with several in parallel when the pool has idle workers. sums, if not
// nil, are complete when it returns without error.
func (pf *partFetches) fetchPart(ctx context.Context, call *partCall, buf []byte, sums *cache.Sums, progress func(int)) error {
	base := call.key.idx * pf.cfg.PartSize
	prio := pf.parts.prio(call)
	ranges := pf.splitRanges(int64(len(buf)), prio)
	if len(ranges) == 1 {
		return fetcher.ReadRangeProgress(ctx, pf.store, call.obj, base, buf, progress)
	}
	pf.r.hooks.split()
	pf.stats.PartsSplit.Add(1)
	pf.stats.SplitGets.Add(int64(len(ranges)))
	subs := make([]*subRange, len(ranges)-1)
	tasks := make([]*prefetch.Task, len(subs))
	for i, rg := range ranges[1:] {
		sub := &subRange{lo: rg[0], hi: rg[1], done: make(chan struct{})}
		subs[i] = sub
		tasks[i] = pf.sched.Submit(call.group, prio, func(ctx context.Context) {
			sub.err = guard(fmt.Sprintf("fetch %s [%d,%d)", call.obj.Key, base+sub.lo, base+sub.hi), func() error {
				return pf.store.ReadRange(ctx, call.obj, base+sub.lo, buf[sub.lo:sub.hi])
			})
			close(sub.done)
		})
	}
	// A reader that comes to wait on the part raises its ranges with it
	// (newCall); a raise that comes before this sees the part's task
	// only, so raise the ranges to what the part has reached meanwhile.
	now := pf.parts.setRanges(call, tasks)
	if now > prio {
		for _, t := range tasks {
			pf.sched.Raise(t, now)
		}
	}
	defer pf.parts.setRanges(call, nil)
	// The first range with the progress of the checksums, which sum
	// blocks in order: the rest are summed below, once they are in.
	// A panic in this goroutine's own GETs fails the part but must not
	// skip the wait below: ranges still running write into buf, which
	// goes back to the pool when this returns.
	first := ranges[0][1]
	err := guard(fmt.Sprintf("fetch %s [%d,%d)", call.obj.Key, base, base+first), func() error {
		return fetcher.ReadRangeProgress(ctx, pf.store, call.obj, base, buf[:first], progress)
	})
	for i, sub := range subs {
		if pf.sched.Cancel(tasks[i]) {
			if err == nil { // else the part has failed: leave the range
				sub.err = guard(fmt.Sprintf("fetch %s [%d,%d)", call.obj.Key, base+sub.lo, base+sub.hi), func() error {
					return pf.store.ReadRange(ctx, call.obj, base+sub.lo, buf[sub.lo:sub.hi])
				})
			}
			close(sub.done)
		}
		<-sub.done
		if err == nil && sub.err != nil {
			err = fmt.Errorf("range [%d,%d) of the part: %w", sub.lo, sub.hi, sub.err)
		}
	}
	if err == nil && sums != nil {
		sums.Filled(len(buf))
	}
	return err
}

// splitRanges divides a part of n bytes into the ranges fetchPart fetches
// in parallel: one, unless SplitSize allows several and the pool has
// workers spare at prio. Ranges are whole multiples of 64 KiB but for the
// last, in order, and cover [0, n).
func (pf *partFetches) splitRanges(n int64, prio prefetch.Priority) [][2]int64 {
	k := int64(1)
	if prio != prefetch.Readahead && pf.cfg.SplitSize > 0 && n >= 2*pf.cfg.SplitSize {
		k = min(n/pf.cfg.SplitSize, MaxSplit)
		if k > 1 {
			k = min(k, int64(pf.sched.Spare(prio))+1)
		}
	}
	if k <= 1 {
		return [][2]int64{{0, n}}
	}
	const align = 64 << 10
	size := (n + k - 1) / k
	size = (size + align - 1) / align * align
	out := make([][2]int64, 0, k)
	for lo := int64(0); lo < n; lo += size {
		out = append(out, [2]int64{lo, min(lo+size, n)})
	}
	return out
}
