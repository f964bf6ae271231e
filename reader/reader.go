package reader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// ErrClosed is returned by reads on a closed Reader.
var ErrClosed = errors.New("segfs: reader closed")

// Cache is the persistent store the Reader keeps fetched parts and
// whole-object files in: cache.Cache. All methods may be called
// concurrently.
type Cache interface {
	// ReadAt reads len(p) bytes at off within the part; ok is false on a
	// miss.
	ReadAt(ctx context.Context, k cache.Key, p []byte, off int64) (n int, ok bool, err error)
	// NewSums returns the checksums of a part that will be read into
	// data, to be filled as its bytes arrive; nil if the cache computes
	// them itself.
	NewSums(data []byte) *cache.Sums
	// PutSummed stores a whole part, with the checksums sums computed
	// as it arrived (nil: computed by the cache). It does not retain data.
	PutSummed(ctx context.Context, k cache.Key, data []byte, sums *cache.Sums) error
	// Contains reports whether the part is stored.
	Contains(k cache.Key) bool
	// WillNeed hints that a stored part will be read soon.
	WillNeed(k cache.Key)
}

// Pinner is a Cache that evicts the parts of open files last: Pin and
// Unpin bracket the time an object's file is open. A Cache that is not
// one keeps no such order.
type Pinner interface {
	Pin(object, etag string)
	Unpin(object, etag string)
}

// WholeObjects is a Cache that keeps whole-object files, which
// Config.Passthrough needs.
type WholeObjects interface {
	// Promote builds the whole-object file of an object whose parts are
	// all stored; cache.ErrIncomplete if one is missing.
	Promote(ctx context.Context, k cache.ObjectKey, partSize int64) error
	// OpenObject opens an object's sealed whole-object file, if stored.
	OpenObject(k cache.ObjectKey) (*os.File, bool)
}

// The disk cache is all three.
var (
	_ Cache        = (*cache.Cache)(nil)
	_ Pinner       = (*cache.Cache)(nil)
	_ WholeObjects = (*cache.Cache)(nil)
)

// noPins is the Pinner of a Cache that keeps no eviction order.
type noPins struct{}

func (noPins) Pin(string, string)   {}
func (noPins) Unpin(string, string) {}

// Reader serves logical byte ranges of objects from aligned parts: from
// memory when it holds them, from the disk cache when it has them, else
// fetched through the scheduler and then cached. It may be used by any
// number of goroutines at once. It is a façade: its state lives in its
// parts (the part table, the part fetches, the cursors, the range GETs
// and the range tier), each with its own lock and invariants; see the
// package doc for them and the lock order.
type Reader struct {
	// Every field is constant after New (hooks: set by a test before
	// it reads); the mutable state is in the parts below.
	store    fetcher.Store
	cache    Cache
	sched    *prefetch.Scheduler
	cfg      Config
	policies []prefetch.Policy
	frames   *FrameReader
	whole    *promoter     // nil unless cfg.Passthrough
	pins     Pinner        // the cache's, or noPins
	wholes   WholeObjects  // the cache's; nil unless cfg.Passthrough
	stop     chan struct{} // closed by Close: ends sweepStreams and range-tier stores
	stats    Stats
	hooks    *hooks // nil in production (hooks.go)

	// parts owns the calls in flight, their buffers, the held parts and
	// the memory tier, under its own lock (parttable.go).
	parts *partTable

	// fetches run the part calls and the writers that store them
	// (calls.go).
	fetches *partFetches
	sweeper sync.WaitGroup // sweepStreams

	ranges  rangeGets  // small range GETs in flight, under their own lock (ranges.go)
	rtier   *rangeTier // heads and tails fetched ahead, under their own lock (rangetier.go)
	learned *learner   // the open profile being learned (profile.go)

	// cursors are the streams and fills over objects, under their own
	// lock, taken before the part table's (cursors.go).
	cursors *cursors
	tiers   partTiers // the tiers below the part table (parttiers.go)
}

// New returns a Reader over store that keeps parts in pc and runs every
// fetch on sched. Close the Reader before the scheduler.
func New(store fetcher.Store, pc Cache, sched *prefetch.Scheduler, cfg Config) (*Reader, error) {
	cfg, err := cfg.withDefaults(sched.Workers())
	if err != nil {
		return nil, fmt.Errorf("reader: %w", err)
	}
	var wholes WholeObjects
	if cfg.Passthrough {
		var ok bool
		if wholes, ok = pc.(WholeObjects); !ok {
			return nil, errors.New("reader: passthrough needs a cache that keeps whole-object files")
		}
	}
	pins, ok := pc.(Pinner)
	if !ok {
		pins = noPins{}
	}
	r := &Reader{
		store:  store,
		cache:  pc,
		pins:   pins,
		wholes: wholes,
		sched:  sched,
		cfg:    cfg,

		stop:   make(chan struct{}),
		ranges: rangeGets{store: store, sched: sched, calls: make(map[rangeKey]*rangeCall)},
	}
	r.ranges.stats = &r.stats
	r.rtier = newRangeTier(r)
	r.learned = newLearner(r)
	r.parts = newPartTable(sched, &r.stats, cfg)
	r.cursors = newCursors(r)
	r.fetches = newPartFetches(r)
	r.tiers = newPartTiers(r)
	var profile *prefetch.Profile
	if cfg.SegmentPrefetch {
		profile = r.learned.loadProfile()
	}
	r.policies = prefetch.Policies(cfg.Prefetch, cfg.SegmentPrefetch, cfg.Kernel, profile)
	r.frames, err = newFrameReader(r, cfg.Frames)
	if err != nil {
		return nil, err
	}
	if cfg.Passthrough {
		r.whole = newPromoter(r)
	}
	r.fetches.startWriters()
	r.sweeper.Go(r.cursors.sweepStreams)
	return r, nil
}

// ReadAt reads up to len(dest) bytes of obj at off into dest and returns
// the filled prefix. A read at or past the end of the object returns no
// bytes and no error. seq, if not nil, tracks the caller's access pattern
// for readahead. ctx bounds only this caller's wait: fetches that other
// readers or the cache want go on when it is done. On error no bytes are
// returned and dest's contents are unspecified.
func (r *Reader) ReadAt(ctx context.Context, obj fetcher.Object, dest []byte, off int64, seq *prefetch.Sequence) ([]byte, error) {
	data, _, err := r.read(ctx, obj, dest, off, seq, false)
	return data, err
}

// ReadAtRef is ReadAt for a caller that can send the bytes from where
// they lie: a read within one part that a stream holds in memory, or
// whose fetch is in flight, returns a slice of the part's buffer, not a
// copy in dest, which saves a copy of every byte of a cold sequential
// read. release, if not nil, must be called once the returned bytes are
// no longer used; until then the buffer is not recycled. Any other read
// fills dest, as ReadAt does, and release is nil.
func (r *Reader) ReadAtRef(ctx context.Context, obj fetcher.Object, dest []byte, off int64, seq *prefetch.Sequence) (data []byte, release func(), err error) {
	return r.read(ctx, obj, dest, off, seq, true)
}

func (r *Reader) read(ctx context.Context, obj fetcher.Object, dest []byte, off int64, seq *prefetch.Sequence, byRef bool) ([]byte, func(), error) {
	r.stats.Reads.Add(1)
	if off < 0 {
		return nil, nil, fmt.Errorf("read %s at %d: negative offset", obj.Key, off)
	}
	if off >= obj.Size || len(dest) == 0 {
		return dest[:0], nil, nil
	}
	window, streaming := 0, false
	if seq != nil {
		end := min(off+int64(len(dest)), obj.Size)
		window, streaming = seq.Observe(off, end, r.cfg.MaxReadahead)
		refill, pump := r.cursors.follow(obj, seq, off/r.cfg.PartSize, streaming)
		r.cursors.refill(obj, refill)
		for _, f := range pump {
			r.cursors.pump(f)
		}
	}
	p := r.cfg.planRead(obj.Size, off, int64(len(dest)), streaming, byRef)
	out := dest[:p.end-off]
	// A read the range tier holds, or is fetching, in whole is answered
	// from there, before any part fetch of the file is started, joined
	// or borrowed from (a fill's, or a stream's).
	if ok, err := r.rtier.readAt(ctx, keyOfObject(obj), out, off); err != nil {
		return nil, nil, fmt.Errorf("read %s [%d,%d): %w", obj.Key, off, p.end, err)
	} else if ok {
		r.stats.ReadBytes.Add(int64(len(out)))
		return out, nil, nil
	}
	for i := p.startFrom; i <= p.last; i++ {
		r.fetches.startPart(obj, i, prefetch.Demand)
	}
	var release func()
	if p.borrow {
		out, release = r.borrowPart(ctx, obj, p.first, out, off-p.first*r.cfg.PartSize)
	}
	var err error
	switch {
	case release != nil:
	case p.parallel:
		err = r.readSmallParts(ctx, obj, out, off, p.first, p.last)
	default:
		ps := r.cfg.PartSize
		for i := p.first; i <= p.last && err == nil; i++ {
			lo, hi := max(off, i*ps), min(p.end, (i+1)*ps)
			err = r.readPart(ctx, obj, i, out[lo-off:hi-off], lo-i*ps, p.small, p.first != p.last)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s [%d,%d): %w", obj.Key, off, p.end, err)
	}
	if window > 0 {
		from, to := seq.Ahead(p.last, int64(window))
		for i := from; i <= to && i*r.cfg.PartSize < obj.Size; i++ {
			r.fetches.startPart(obj, i, prefetch.Readahead)
		}
	}
	r.stats.ReadBytes.Add(int64(len(out)))
	return out, release, nil
}

// readSmallParts fills out, the bytes of a small read at off that spans
// parts first to last, reading the parts at once: a cold one by a GET of
// its own range each, in parallel. The kernel reads a whole readahead
// span around a page fault of a mapped file, and such a read that
// crosses a part border would otherwise wait for its halves' GETs one
// after the other.
func (r *Reader) readSmallParts(ctx context.Context, obj fetcher.Object, out []byte, off, first, last int64) error {
	ps := r.cfg.PartSize
	end := off + int64(len(out))
	errs := make([]error, last-first+1)
	var wg sync.WaitGroup
	for i := first; i <= last; i++ {
		lo, hi := max(off, i*ps), min(end, (i+1)*ps)
		wg.Go(func() {
			errs[i-first] = guard(fmt.Sprintf("read %s part %d", obj.Key, i), func() error {
				return r.readPart(ctx, obj, i, out[lo-off:hi-off], lo-i*ps, true, true)
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// borrowPart returns the bytes of part idx at off, len(p) of them, from
// the part's buffer, if a stream holds it or its fetch is in flight (and
// then waits for it), with the func that gives the buffer back. Otherwise
// it returns p and a nil func, and the caller reads the part into p.
func (r *Reader) borrowPart(ctx context.Context, obj fetcher.Object, idx int64, p []byte, off int64) ([]byte, func()) {
	buf, call, tasks := r.parts.borrow(keyOfPart(obj, idx))
	if buf == nil {
		return p, nil
	}
	release := func() { r.parts.release(buf) }
	if call == nil {
		r.stats.HeldHits.Add(1)
		markTier(ctx, TierHeld)
	} else {
		r.parts.raiseJoined(tasks)
		if waited(call.done) {
			markTier(ctx, TierRemote)
		} else {
			markTier(ctx, TierHeld) // fetched, in its buffer
		}
		select {
		case <-call.done:
		case <-ctx.Done():
			release()
			return p, nil // readPart reports ctx's error
		}
		if call.err != nil {
			release()
			return p, nil // readPart fetches again or reports the error
		}
	}
	n := min(int64(len(p)), int64(len(buf.data))-off)
	return buf.data[off : off+n], release
}

// readPart fills p with the bytes at off within part idx of obj, from
// the first tier that has them in the order choose gives (decide.go):
// the part table's (memory, held, in flight), then the tiers below it
// (parttiers.go).
func (r *Reader) readPart(ctx context.Context, obj fetcher.Object, idx int64, p []byte, off int64, small, tier bool) error {
	rd := partRead{obj: obj, idx: idx, key: keyOfPart(obj, idx), p: p, off: off, small: small}
	// The range tier first: the heads and tails of an index's files,
	// fetched ahead or on their way, answer a read before any part fetch
	// of the same file could. read asked it for the whole read; with
	// tier (a read across parts) this part's share may still be there.
	if tier {
		if ok, err := r.rtier.read(ctx, rd.key, p, off); ok || err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		retry := attempt > 0
		done, v, err := r.parts.read(ctx, rd, retry)
		if done || err != nil {
			return err
		}
		v.disk = r.cache.Contains(r.cfg.cacheKey(rd.key))
		src := choose(v, small, retry)
		for {
			done, err := r.tiers[src].read(ctx, rd)
			if done || err != nil {
				return err
			}
			if src == fromFetch {
				break // started by another reader meanwhile: look again
			}
			v.disk = false // the disk cache had it no more
			src = choose(v, small, retry)
		}
	}
}

// Close refuses new reads, stops the frame decodes, finishes storing the
// parts already fetched and queued for the disk cache, and stops the
// writers; parts fetched after it are not cached. The scheduler, closed
// after it, ends the fetches. Close may be called more than once.
func (r *Reader) Close() error {
	r.frames.Close()
	r.learned.saveProfile()
	first := !r.parts.close()
	r.rtier.close()
	if first {
		close(r.stop)
		r.sweeper.Wait()
	}
	r.fetches.close(first)
	r.rtier.waitWriter()
	if r.whole != nil {
		r.whole.close()
	}
	r.parts.clear()
	r.cursors.clear()
	r.stats.MemoryBytes.Store(0)
	r.stats.HeldBytes.Store(0)
	return nil
}
