package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// ErrClosed is returned by reads on a closed Reader.
var ErrClosed = errors.New("segfs: reader closed")

// PartCache is the persistent part store the Reader keeps fetched parts
// in (cache.Cache). All methods may be called concurrently.
type PartCache interface {
	// ReadAt reads len(p) bytes at off within the part; ok is false on a
	// miss.
	ReadAt(ctx context.Context, k cache.Key, p []byte, off int64) (n int, ok bool, err error)
	// Put stores a whole part; it does not retain data.
	Put(ctx context.Context, k cache.Key, data []byte) error
	// Contains reports whether the part is stored.
	Contains(k cache.Key) bool
	// WillNeed hints that a stored part will be read soon.
	WillNeed(k cache.Key)
	// Pin and Unpin bracket the time an object's file is open: its parts
	// are evicted last.
	Pin(object, etag string)
	Unpin(object, etag string)
}

// summingCache is a PartCache that takes the checksums of a part's
// blocks computed while its bytes arrive (cache.Cache): runFetch sums
// each block while it is still in the CPU's cache instead of Put reading
// the whole part again later.
type summingCache interface {
	NewSums(data []byte) *cache.Sums
	PutSummed(ctx context.Context, k cache.Key, data []byte, sums *cache.Sums) error
}

// PrefetchMode says what a Reader fetches in the background
// (--prefetch).
type PrefetchMode string

// Prefetch modes.
const (
	PrefetchNone PrefetchMode = "none" // fetch only what reads and readahead need
	PrefetchOpen PrefetchMode = "open" // also fetch the rest of each opened file
	PrefetchAll  PrefetchMode = "all"  // also fetch every file after the mount starts
)

// ReaderConfig configures a Reader. Zero fields take the defaults.
type ReaderConfig struct {
	// Source names the store in cache keys, e.g. "s3://bucket/prefix".
	Source string
	// PartSize is the size of the aligned parts that are fetched and
	// cached. Default 8 MiB.
	PartSize int64
	// MemoryLimit bounds the bytes of parts kept in memory because the
	// disk cache could not take them (a full disk). Default 64 MiB.
	MemoryLimit int64
	// SmallRead is the largest read that, when cold and not sequential, is
	// served by a GET of just its own range rather than by waiting for its
	// whole part (which is then fetched in the background). Default
	// PartSize/8.
	SmallRead int64
	// MaxReadahead bounds a sequential reader's readahead window, in
	// parts. Default: the scheduler's worker count.
	MaxReadahead int
	// Prefetch is PrefetchNone, PrefetchOpen or PrefetchAll. Default
	// PrefetchOpen.
	Prefetch PrefetchMode
	// Writers is the number of goroutines storing fetched parts in the
	// disk cache. A fetch hands its part to a free writer, waiting for one
	// if all are busy, so at most Writers parts wait for the disk beside
	// the ones the fetch pool holds. Default 4.
	Writers int
	// Passthrough builds a whole-object file of each object once its parts
	// are all cached, and lets opens of such objects be served by the
	// kernel from that file (see whole.go). It needs a PartCache that is
	// also a WholeCache.
	Passthrough bool
	// StreamIdle is how long a followed sequential reader may go without
	// a read before the Reader stops following it (follow.go): its held
	// parts go and its object's fill is queued again. Default 2s.
	StreamIdle time.Duration
	// SplitSize, if positive, lets a part fetch that finds workers of the
	// pool idle split into that many more GETs, of at least SplitSize
	// bytes each and at most MaxSplit in all, run in parallel on those
	// workers (fetchPart, split.go). 0 fetches every part with one GET.
	SplitSize int64
	// DropAfterRead has the kernel drop a file's pages from its page cache
	// when the last handle that segfs serves closes after reading the
	// whole file, if the file is larger than a part (fileNode.release).
	DropAfterRead bool
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
}

// Default values of ReaderConfig.
const (
	DefaultPartSize    = 8 << 20
	DefaultMemoryLimit = 64 << 20
	DefaultWriters     = 4
	DefaultStreamIdle  = 2 * time.Second
	// MaxSplit bounds the GETs one part fetch splits into.
	MaxSplit = 8
)

func (c ReaderConfig) withDefaults(workers int) ReaderConfig {
	if c.PartSize <= 0 {
		c.PartSize = DefaultPartSize
	}
	if c.MemoryLimit <= 0 {
		c.MemoryLimit = DefaultMemoryLimit
	}
	if c.SmallRead <= 0 {
		c.SmallRead = c.PartSize / 8
	}
	if c.MaxReadahead <= 0 {
		c.MaxReadahead = workers
	}
	if c.Prefetch == "" {
		c.Prefetch = PrefetchOpen
	}
	if c.Writers <= 0 {
		c.Writers = DefaultWriters
	}
	if c.StreamIdle <= 0 {
		c.StreamIdle = DefaultStreamIdle
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Reader serves logical byte ranges of objects from aligned parts: from
// the disk cache when it has them, else fetched through the scheduler and
// then cached. It may be used by any number of goroutines at once.
type Reader struct {
	// Immutable after construction.
	store fetcher.Store
	cache PartCache
	sched *prefetch.Scheduler
	cfg   ReaderConfig
	bufs  chan []byte // free part buffers, at most one per worker
	stats readerCounters
	// receiving counts part fetches filling their buffers now.
	receiving atomic.Int64
	putq      chan *partCall // hands fetched parts to the writers; closed by Close
	whole     *promoter      // nil unless cfg.Passthrough
	// beforeSplit, if set (by tests), runs when a part fetch has decided
	// to split, before it submits its ranges.
	beforeSplit func()
	// afterPublish, if set (by tests), runs when a part fetch has
	// published its bytes or error to its waiters, before it is stored.
	afterPublish func(*partCall)
	// afterStart, if set (by tests), runs when a reader has started the
	// fetch of a part it waits for, before it waits.
	afterStart func()

	senders sync.WaitGroup // runFetch calls sending to putq; Add under mu while open
	writers sync.WaitGroup
	stop    chan struct{} // closed by Close: ends sweepStreams
	sweeper sync.WaitGroup

	// Guarded by mu.
	mu         sync.Mutex
	closed     bool
	inflight   map[partKey]*partCall
	ranges     map[rangeKey]*rangeCall
	mem        memTier
	prefetched map[partKey]bool    // objects (idx -1) whose background fetch was queued
	fills      map[partKey]*fill   // by object (idx -1): the fill whose cursor is on it (fill.go)
	streams    map[partKey]*stream // by object (idx -1): sequential readers followed (follow.go)
	heldBytes  int64               // capacity of the streams' held parts
}

// partKey names one part of one object version.
type partKey struct {
	key  string
	etag string
	idx  int64
}

// NewReader returns a Reader over store that keeps parts in pc and runs
// every fetch on sched. Close the Reader before the scheduler.
func NewReader(store fetcher.Store, pc PartCache, sched *prefetch.Scheduler, cfg ReaderConfig) *Reader {
	cfg = cfg.withDefaults(sched.Workers())
	r := &Reader{
		store:      store,
		cache:      pc,
		sched:      sched,
		cfg:        cfg,
		bufs:       make(chan []byte, sched.Workers()),
		putq:       make(chan *partCall), // a hand-off: no parts queued beyond the writers
		inflight:   make(map[partKey]*partCall),
		ranges:     make(map[rangeKey]*rangeCall),
		mem:        newMemTier(cfg.MemoryLimit),
		prefetched: make(map[partKey]bool),
		fills:      make(map[partKey]*fill),
		streams:    make(map[partKey]*stream),
		stop:       make(chan struct{}),
	}
	if wc, ok := pc.(WholeCache); ok && cfg.Passthrough {
		r.whole = newPromoter(r, wc)
	}
	r.writers.Add(cfg.Writers)
	for range cfg.Writers {
		go r.writer()
	}
	r.sweeper.Go(r.sweepStreams)
	return r
}

// PartSize returns the part size in use.
func (r *Reader) PartSize() int64 { return r.cfg.PartSize }

// Opened and Closed bracket an open file of obj: the cache keeps its
// parts in preference to others', within its bound.
func (r *Reader) Opened(obj fetcher.Object) { r.cache.Pin(obj.Key, obj.ETag) }

// Closed undoes one Opened.
func (r *Reader) Closed(obj fetcher.Object) { r.cache.Unpin(obj.Key, obj.ETag) }

// DropAfterRead reports whether files read whole leave the page cache
// when closed (ReaderConfig.DropAfterRead).
func (r *Reader) DropAfterRead() bool { return r.cfg.DropAfterRead }

// Prefetch returns the prefetch mode in use.
func (r *Reader) Prefetch() PrefetchMode { return r.cfg.Prefetch }

func (r *Reader) cacheKey(k partKey) cache.Key {
	return cache.Key{Source: r.cfg.Source, Object: k.key, ETag: k.etag, PartSize: r.cfg.PartSize, Index: k.idx}
}

func keyOf(obj fetcher.Object, idx int64) partKey {
	return partKey{key: obj.Key, etag: obj.ETag, idx: idx}
}

// partLen returns the length of part idx of obj.
func (r *Reader) partLen(obj fetcher.Object, idx int64) int64 {
	return min(r.cfg.PartSize, obj.Size-idx*r.cfg.PartSize)
}

// ReadAt reads up to len(dest) bytes of obj at off into dest and returns
// the filled prefix. A read at or past the end of the object returns no
// bytes and no error. seq, if not nil, tracks the caller's access pattern
// for readahead. ctx bounds only this caller's wait: fetches that other
// readers or the cache want go on when it is done. On error no bytes are
// returned and dest's contents are unspecified.
func (r *Reader) ReadAt(ctx context.Context, obj fetcher.Object, dest []byte, off int64, seq *Sequence) ([]byte, error) {
	data, _, err := r.read(ctx, obj, dest, off, seq, false)
	return data, err
}

// ReadAtRef is ReadAt for a caller that can send the bytes from where
// they lie: a read within one part that a stream holds in memory, or
// whose fetch is in flight, returns a slice of the part's buffer, not a
// copy in dest (measured: the copy was a tenth of segfs's CPU on a cold
// sequential read). release, if not nil, must be called once the
// returned bytes are no longer used; until then the buffer is not
// recycled. Any other read fills dest, as ReadAt does, and release is
// nil.
func (r *Reader) ReadAtRef(ctx context.Context, obj fetcher.Object, dest []byte, off int64, seq *Sequence) (data []byte, release func(), err error) {
	return r.read(ctx, obj, dest, off, seq, true)
}

func (r *Reader) read(ctx context.Context, obj fetcher.Object, dest []byte, off int64, seq *Sequence, byRef bool) ([]byte, func(), error) {
	r.stats.reads.Add(1)
	if off < 0 {
		return nil, nil, fmt.Errorf("read %s at %d: negative offset", obj.Key, off)
	}
	if off >= obj.Size || len(dest) == 0 {
		return dest[:0], nil, nil
	}
	end := min(off+int64(len(dest)), obj.Size)
	out := dest[:end-off]
	ps := r.cfg.PartSize
	first, last := off/ps, (end-1)/ps

	window, streaming := 0, false
	if seq != nil {
		window, streaming = seq.observe(off, end, r.cfg.MaxReadahead)
		refill, pump := r.follow(obj, seq, first, streaming)
		r.refill(obj, refill)
		for _, f := range pump {
			r.pump(f)
		}
	}
	// A small read that is not part of a sequential stream is served by a
	// GET of its own range, unless its part is no larger than SmallRead
	// (a small file, an object's short tail): a GET of the range would
	// cost about as much as the part. A read of a stream (seqRun reads in
	// a row, or a run from the file's start) waits for its part, as the
	// next reads will. A lone read next to the one before is not a stream:
	// a random reader's chance neighbour, or the second of the reads the
	// kernel sends around a page fault of a mapped file, would otherwise
	// wait for a whole part (measured: the slowest cold reads, at the
	// time of a whole part's GET).
	small := !streaming && end-off <= r.cfg.SmallRead && r.partLen(obj, first) > r.cfg.SmallRead

	// Start the fetches of every further part this read spans before
	// waiting on the first. Not for a small read: each of its parts is
	// served by a GET of its own range (readSmallParts), and a part started
	// here at demand would make it wait for the whole part instead
	// (measured: a read around a page fault of a mapped file that
	// crossed a part border waited as long as an 8 MiB GET).
	if !small {
		for i := first + 1; i <= last; i++ {
			r.startPart(obj, i, prefetch.Demand)
		}
	}
	var release func()
	if byRef && first == last && !small {
		out, release = r.borrowPart(ctx, obj, first, out, off-first*ps)
	}
	var err error
	switch {
	case release != nil:
	case small && last > first:
		err = r.readSmallParts(ctx, obj, out, off, first, last)
	default:
		for i := first; i <= last && err == nil; i++ {
			lo := max(off, i*ps)
			hi := min(end, (i+1)*ps)
			err = r.readPart(ctx, obj, i, out[lo-off:hi-off], lo-i*ps, small)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s [%d,%d): %w", obj.Key, off, end, err)
	}
	if window > 0 {
		from, to := seq.ahead(last, int64(window))
		for i := from; i <= to && i*ps < obj.Size; i++ {
			r.startPart(obj, i, prefetch.Readahead)
		}
	}
	r.stats.readBytes.Add(int64(len(out)))
	return out, release, nil
}

// readSmallParts fills out, the bytes of a small read at off that spans
// parts first to last, reading the parts at once: a cold one by a GET of
// its own range each, in parallel. The kernel reads 1 MiB (the mount's
// readahead) around a page fault of a mapped file, so with 8 MiB parts
// one cold fault in eight crosses a part border, and read one after the
// other its two halves waited for two GETs in a row (docs/BENCH.md has
// the mapped reads' tail before and after).
func (r *Reader) readSmallParts(ctx context.Context, obj fetcher.Object, out []byte, off, first, last int64) error {
	ps := r.cfg.PartSize
	end := off + int64(len(out))
	errs := make([]error, last-first+1)
	var wg sync.WaitGroup
	for i := first; i <= last; i++ {
		lo, hi := max(off, i*ps), min(end, (i+1)*ps)
		wg.Go(func() {
			errs[i-first] = func() (err error) {
				defer catchPanic(&err, fmt.Sprintf("read %s part %d", obj.Key, i))
				return r.readPart(ctx, obj, i, out[lo-off:hi-off], lo-i*ps, true)
			}()
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
	k := keyOf(obj, idx)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return p, nil
	}
	call := r.inflight[k]
	held := false
	if call == nil {
		st := r.streams[objectKey(obj)]
		if st == nil {
			r.mu.Unlock()
			return p, nil
		}
		h, ok := st.held[idx]
		if !ok {
			r.mu.Unlock()
			return p, nil
		}
		call, held = h.call, true
		if call.refs == 0 {
			call.data = h.data // released by its last reader; the stream still holds it
		}
	}
	var tasks []*prefetch.Task
	if held {
		call.refs++
	} else {
		tasks = r.joinLocked(call)
	}
	r.mu.Unlock()
	release := func() {
		r.mu.Lock()
		r.releaseLocked(call)
		r.mu.Unlock()
	}
	if held {
		r.stats.heldHits.Add(1)
	} else {
		r.raiseJoined(tasks)
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
	n := min(int64(len(p)), int64(len(call.data))-off)
	return call.data[off : off+n], release
}

// joinLocked makes the caller one more reader waiting on call, which is
// then demand work, and returns its tasks (the call's, if it has one yet,
// and those of its ranges while a split fetch runs), to be raised by
// raiseJoined once r.mu is released. r.mu must be held.
func (r *Reader) joinLocked(call *partCall) []*prefetch.Task {
	call.refs++
	call.prio = prefetch.Demand
	tasks := make([]*prefetch.Task, 0, 1+len(call.ranges))
	if call.task != nil {
		tasks = append(tasks, call.task)
	}
	return append(tasks, call.ranges...)
}

// raiseJoined counts a join and raises its call's tasks to demand: a
// reader waits on them.
func (r *Reader) raiseJoined(tasks []*prefetch.Task) {
	r.stats.joins.Add(1)
	for _, t := range tasks {
		r.sched.Raise(t, prefetch.Demand)
	}
}

// readPart fills p with the bytes at off within part idx of obj: from
// memory, from a part fetch in flight, from the disk cache, or from a new
// fetch. A small cold read does not wait for a whole part that only
// readahead or background work wants: unless the part's bytes are already
// here or another reader waits on it too, it is served by a GET of its own
// range, and the part is queued in the background for the reads after it.
func (r *Reader) readPart(ctx context.Context, obj fetcher.Object, idx int64, p []byte, off int64, small bool) error {
	k := keyOf(obj, idx)
	ck := r.cacheKey(k)
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return ErrClosed
		}
		if r.mem.copyOut(k, p, off) {
			r.mu.Unlock()
			r.stats.memHits.Add(1)
			return nil
		}
		if data, ok := r.heldLocked(k); ok {
			copy(p, data[off:])
			r.mu.Unlock()
			r.stats.heldHits.Add(1)
			return nil
		}
		call := r.inflight[k]
		if call != nil && (!small || call.fetched || call.prio == prefetch.Demand) {
			tasks := r.joinLocked(call)
			r.mu.Unlock()
			r.raiseJoined(tasks)
			return r.waitCall(ctx, call, p, off)
		}
		r.mu.Unlock()

		if r.cache.Contains(ck) {
			_, ok, err := r.cache.ReadAt(ctx, ck, p, off)
			switch {
			case err != nil && ctx.Err() != nil:
				return ctx.Err()
			case err == nil && ok:
				r.stats.diskHits.Add(1)
				return nil
			case err != nil:
				r.cfg.Logger.Warn("cache read failed; fetching again", "key", obj.Key, "part", idx, "err", err)
			}
		}
		if small || attempt > 0 {
			// attempt > 0: the part was fetched for us but is neither in
			// flight, in memory nor on disk (evicted at once, or refused).
			if small && call == nil {
				r.startPart(obj, idx, prefetch.Background)
			}
			return r.readRange(ctx, obj, idx*r.cfg.PartSize+off, p)
		}
		mine := r.startDemand(obj, idx)
		if r.afterStart != nil {
			r.afterStart()
		}
		if mine != nil {
			return r.waitCall(ctx, mine, p, off)
		}
	}
}

// Stats returns a snapshot of the Reader's counters.
func (r *Reader) Stats() ReaderStats {
	r.mu.Lock()
	mem, held, inflight := r.mem.bytes, r.heldBytes, len(r.inflight)
	r.mu.Unlock()
	st := r.stats.snapshot(mem, held, inflight)
	if r.whole != nil {
		st.PassthroughOpens = r.whole.opens.Load()
		st.PromotePending = r.whole.pending.Load()
	}
	return st
}

// Close refuses new reads, finishes storing the parts already fetched and
// queued for the disk cache, and stops the writers; parts fetched after
// it are not cached. The scheduler, closed after it, ends the fetches.
// Close may be called more than once.
func (r *Reader) Close() error {
	r.mu.Lock()
	already := r.closed
	r.closed = true
	r.mu.Unlock()
	if !already {
		close(r.stop)
		r.sweeper.Wait()
		r.senders.Wait()
		close(r.putq)
	}
	r.writers.Wait()
	if r.whole != nil {
		r.whole.close()
	}
	r.mu.Lock()
	r.mem.clear()
	clear(r.streams)
	clear(r.fills)
	r.heldBytes = 0
	r.mu.Unlock()
	return nil
}
