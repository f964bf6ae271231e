package reader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// The tiers of a part read, in the order choose gives them (decide.go).
// The part table serves the first three, memory, held and in flight,
// under its lock (partTable.read); the rest are the partTiers here, one
// per source. A tier that finds the bytes are not its own after all
// says so (done false) and the read falls through to the next source
// choose names. Before any of them, the read asks the range tier's
// heads and tails (rangetier.go).

// partRead is one read of a part: len(p) bytes at off within part idx
// of obj, key naming that part.
type partRead struct {
	obj   fetcher.Object
	idx   int64
	key   partKey
	p     []byte
	off   int64
	small bool // a cold small read, not of a stream (readPlan.small)
}

// A partTier serves a part read from one place. done false with no
// error means "not mine": the read goes on to the next tier. Its
// methods may be called concurrently.
type partTier interface {
	read(ctx context.Context, rd partRead) (done bool, err error)
}

// partTiers are the tiers below the part table, by source; nil for the
// sources the table serves.
type partTiers [numSources]partTier

func newPartTiers(r *Reader) partTiers {
	return partTiers{
		fromDisk:         diskTier{cache: r.cache, key: r.cfg.cacheKey, stats: &r.stats, log: r.cfg.Logger},
		fromRange:        rangeGetTier{gets: &r.ranges, partSize: r.cfg.PartSize},
		fromRangeAndPart: rangeGetTier{gets: &r.ranges, partSize: r.cfg.PartSize, start: r.fetches.startPart},
		fromFetch:        fetchTier{r: r},
	}
}

// diskTier reads parts from the disk cache. A part that is gone, or
// damaged (the cache removes it), is not its own.
type diskTier struct {
	cache Cache
	key   func(partKey) cache.Key
	stats *Stats
	log   *slog.Logger
}

func (d diskTier) read(ctx context.Context, rd partRead) (bool, error) {
	_, ok, err := d.cache.ReadAt(ctx, d.key(rd.key), rd.p, rd.off)
	switch {
	case err != nil && ctx.Err() != nil:
		return false, ctx.Err()
	case err == nil && ok:
		d.stats.DiskHits.Add(1)
		markTier(ctx, TierDisk)
		return true, nil
	case err != nil:
		d.log.Warn("cache read failed; fetching again", "key", rd.obj.Key, "part", rd.idx, "err", err)
	}
	return false, nil
}

// rangeGetTier reads a part read's own range with a GET (ranges.go);
// with start, it also starts the whole part in the background.
type rangeGetTier struct {
	gets     *rangeGets
	partSize int64
	start    func(obj fetcher.Object, idx int64, prio prefetch.Priority) // nil: the range only
}

func (g rangeGetTier) read(ctx context.Context, rd partRead) (bool, error) {
	if g.start != nil {
		g.start(rd.obj, rd.idx, prefetch.Background)
	}
	off := rd.idx*g.partSize + rd.off
	n := int64(len(rd.p))
	pieces := min(MaxRangePieces, n/RangePieceMin)
	if pieces <= 1 {
		err := g.gets.read(ctx, rd.obj, off, rd.p)
		return err == nil, err
	}
	// A large cold read (a page fault's read-around of a mapped file)
	// waits for its bytes at one connection's rate; cut into pieces read
	// at once, it waits about one round trip.
	piece := (n/pieces + Page - 1) / Page * Page
	errs := make([]error, pieces)
	var wg sync.WaitGroup
	for i := range pieces {
		lo, hi := int64(i)*piece, min(int64(i+1)*piece, n)
		if lo >= hi {
			break
		}
		wg.Go(func() {
			errs[i] = guard(fmt.Sprintf("read %s [%d,%d)", rd.obj.Key, off+lo, off+hi), func() error {
				return g.gets.read(ctx, rd.obj, off+lo, rd.p[lo:hi])
			})
		})
	}
	wg.Wait()
	err := errors.Join(errs...)
	return err == nil, err
}

// A cold small read of more than 2 × RangePieceMin bytes is fetched as
// up to MaxRangePieces GETs of at least RangePieceMin bytes each, at
// once; Page aligns the pieces.
const (
	RangePieceMin  = 256 << 10
	MaxRangePieces = 4
	Page           = 4096
)

// fetchTier starts the part's fetch at demand and waits for it. The
// part is not its own if another reader started it meanwhile: the read
// then looks at the part table again. A reader waits on the fetch it
// started even if that fails at once: it then has its own attempt's
// error, not a second attempt.
type fetchTier struct{ r *Reader }

func (f fetchTier) read(ctx context.Context, rd partRead) (bool, error) {
	mine := f.r.fetches.startDemand(rd.obj, rd.idx)
	f.r.hooks.started()
	if mine == nil {
		return false, nil
	}
	// Its own fetch: the bytes come from the store, even if the fetch
	// has ended by the time wait looks at it.
	markTier(ctx, TierRemote)
	err := f.r.parts.wait(ctx, mine, rd.p, rd.off)
	return err == nil, err
}
