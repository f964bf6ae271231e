package reader

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// Warming: an operator's `segfs warm` fetches files into the cache at
// background priority, where the scheduler holds them to
// prefetch.Config.BackgroundRate (--background-bandwidth) beside a
// search's reads.

// Cached returns how many bytes of e's stored object are cached: its
// parts in the disk cache, the memory tier or held for a reader. An
// inline entry is all cached. The range tier's heads and tails do not
// count: they are not the file.
func (r *Reader) Cached(e Entry) (cached, total int64) {
	if e.Inline != nil {
		return int64(len(e.Inline)), int64(len(e.Inline))
	}
	obj := e.Obj
	for idx := int64(0); idx*r.cfg.PartSize < obj.Size; idx++ {
		if r.fetches.partCached(keyOfPart(obj, idx)) {
			cached += r.cfg.partLen(obj, idx)
		}
	}
	return cached, obj.Size
}

// partCached reports whether part k is in the disk cache, the memory
// tier, or held for a reader.
func (pf *partFetches) partCached(k partKey) bool {
	return pf.parts.has(k) || pf.cache.Contains(pf.cfg.cacheKey(k))
}

// WarmProgress reports a warm's advance: one part of File, of Bytes,
// is cached now (WasCached: it was before the warm reached it), or File
// failed with Err (reported once a file). An inline file is one part.
type WarmProgress struct {
	File      string
	Bytes     int64
	WasCached bool
	Err       error
}

// Parts returns how many parts Warm reports for e.
func (r *Reader) Parts(e Entry) int64 {
	if e.Inline != nil || e.Obj.Size == 0 {
		return 1
	}
	return (e.Obj.Size + r.cfg.PartSize - 1) / r.cfg.PartSize
}

// ErrNotKept is a part that was fetched for a warm but was not in the
// cache after: evicted at once, as a cache smaller than the warm's
// files must.
var ErrNotKept = errors.New("fetched but not kept in the cache (is --cache-size smaller than the files warmed?)")

// Warm fetches into the cache every part of entries that is not cached,
// at background priority, at most the pool's worker count at a time,
// and sends progress on report for each part as it is cached, and once
// for each file that fails (its other parts are still fetched). It
// returns when every part is cached or failed, or ctx is done; then the
// fetches it has queued run on (at most the window of them), and their
// parts are cached. It returns ctx's error if ctx ended it, else nil:
// failures are reported per file. report is called from several
// goroutines, one call at a time.
func (r *Reader) Warm(ctx context.Context, entries []Entry, report func(WarmProgress)) error {
	var mu sync.Mutex
	send := func(p WarmProgress) {
		mu.Lock()
		defer mu.Unlock()
		report(p)
	}
	sem := make(chan struct{}, r.sched.Workers())
	var wg sync.WaitGroup
	failed := make(map[string]bool)
	defer wg.Wait()
	for _, e := range entries {
		if r.parts.isClosed() {
			break
		}
		if e.Inline != nil || e.Obj.Size == 0 {
			send(WarmProgress{File: e.Name, Bytes: int64(len(e.Inline)), WasCached: true})
			continue
		}
		for idx := int64(0); idx*r.cfg.PartSize < e.Obj.Size; idx++ {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			wg.Go(func() {
				defer func() { <-sem }()
				var was bool
				err := guard(fmt.Sprintf("warm %s part %d", e.Obj.Key, idx), func() (err error) {
					was, err = r.fetches.warmPart(ctx, e.Obj, idx)
					return err
				})
				switch {
				case err == nil:
					send(WarmProgress{File: e.Name, Bytes: r.cfg.partLen(e.Obj, idx), WasCached: was})
				case ctx.Err() != nil, errors.Is(err, ErrClosed):
				default:
					mu.Lock()
					first := !failed[e.Name]
					failed[e.Name] = true
					mu.Unlock()
					if first {
						send(WarmProgress{File: e.Name, Err: fmt.Errorf("part %d: %w", idx, err)})
					}
				}
			})
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.parts.isClosed() {
		return ErrClosed // the mount is going: what was not cached is not a failure
	}
	return nil
}

// warmPart makes sure part idx of obj is cached: it starts a
// background fetch of it, or follows the fetch in flight, and waits
// until the part has left the in-flight map, then checks the cache.
// wasCached says the part was cached when it looked first. A fetch a
// sequential reader took back (errFillPaused), or one of another's that
// ended, is looked at again; the warm's own fetch that succeeded but
// left nothing in the cache is ErrNotKept, not fetched twice.
func (pf *partFetches) warmPart(ctx context.Context, obj fetcher.Object, idx int64) (wasCached bool, err error) {
	k := keyOfPart(obj, idx)
	for attempt := 0; attempt < 4; attempt++ {
		if pf.partCached(k) {
			return attempt == 0, nil
		}
		call := pf.newCall(obj.Key, obj, idx, prefetch.Background, nil, true)
		own := call != nil
		if own {
			// With a ref of the caller's: wait for the bytes, then give
			// the ref back.
			select {
			case <-call.done:
			case <-ctx.Done():
			}
			pf.parts.release(call.buf)
		} else {
			var closed bool
			call, closed = pf.parts.callOf(k)
			if closed {
				return false, ErrClosed
			}
			if call == nil {
				continue // stored or dropped since: look again
			}
		}
		select {
		case <-call.gone:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		// gone and done close in one critical section of partTable.mu, after
		// err is set: once done is closed, err may be read.
		<-call.done
		switch {
		case errors.Is(call.err, errFillPaused):
			continue
		case call.err != nil:
			return false, call.err
		case own && !pf.partCached(k):
			if pf.parts.isClosed() {
				return false, ErrClosed
			}
			return false, ErrNotKept
		}
	}
	if pf.partCached(k) {
		return false, nil
	}
	return false, ErrNotKept
}
