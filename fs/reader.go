package fs

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/segfs/segfs/fetcher"
)

// ErrClosed is returned by reads on a closed Reader.
var ErrClosed = errors.New("segfs: reader closed")

// ReaderConfig configures a Reader. Zero fields take the defaults.
type ReaderConfig struct {
	// PartSize is the size of the aligned parts that are fetched and kept.
	// Default 8 MiB.
	PartSize int64
	// MaxFetches bounds the remote reads in flight at once. Default 16.
	MaxFetches int
	// MemoryLimit bounds the bytes of fetched parts kept in memory after
	// their readers are served. Default 128 MiB. Parts being fetched are
	// bounded separately, by MaxFetches parts.
	MemoryLimit int64
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
}

// Default values of ReaderConfig.
const (
	DefaultPartSize    = 8 << 20
	DefaultMaxFetches  = 16
	DefaultMemoryLimit = 128 << 20
)

func (c ReaderConfig) withDefaults() ReaderConfig {
	if c.PartSize <= 0 {
		c.PartSize = DefaultPartSize
	}
	if c.MaxFetches <= 0 {
		c.MaxFetches = DefaultMaxFetches
	}
	if c.MemoryLimit <= 0 {
		c.MemoryLimit = DefaultMemoryLimit
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Reader serves logical byte ranges of objects from aligned parts. It may
// be used by any number of goroutines at once.
type Reader struct {
	// Immutable after construction.
	store  fetcher.Store
	cfg    ReaderConfig
	sem    chan struct{} // one token per remote read in flight
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // one per fetch goroutine
	stats  readerCounters

	// Guarded by mu.
	mu       sync.Mutex
	closed   bool
	inflight map[partKey]*partCall
	lru      list.List // of *memPart, most recently used first
	cached   map[partKey]*list.Element
	memBytes int64
}

type partKey struct {
	key  string
	etag string
	idx  int64
}

// partCall is one fetch of a part, shared by every reader that wants it.
// data and err are written once, before done is closed.
type partCall struct {
	key  partKey
	obj  fetcher.Object
	done chan struct{}
	data []byte
	err  error
}

type memPart struct {
	key  partKey
	data []byte
}

type readerCounters struct {
	reads, readBytes              atomic.Int64
	partHits, partJoins           atomic.Int64
	partsFetched, partFetchErrors atomic.Int64
}

// ReaderStats is a snapshot of a Reader's counters.
type ReaderStats struct {
	Reads           int64 // ReadAt calls
	ReadBytes       int64 // bytes returned by ReadAt
	PartHits        int64 // parts found in memory
	PartJoins       int64 // parts already being fetched for another reader
	PartsFetched    int64 // parts fetched successfully
	PartFetchErrors int64 // part fetches that failed
	MemoryBytes     int64 // bytes of parts held in memory now
}

// NewReader returns a Reader over store. Close it to stop its fetches.
func NewReader(store fetcher.Store, cfg ReaderConfig) *Reader {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Reader{
		store:    store,
		cfg:      cfg,
		sem:      make(chan struct{}, cfg.MaxFetches),
		ctx:      ctx,
		cancel:   cancel,
		inflight: make(map[partKey]*partCall),
		cached:   make(map[partKey]*list.Element),
	}
}

// PartSize returns the part size in use.
func (r *Reader) PartSize() int64 { return r.cfg.PartSize }

// ReadAt reads up to len(dest) bytes of obj at off. A read at or past the
// end of the object returns no bytes and no error. The returned slice is
// either a prefix of dest or a slice of a shared, immutable part buffer
// that the caller must not modify; it is valid until the caller drops it.
// On error no bytes are returned. ctx bounds only this caller's wait: a
// fetch that other readers share goes on when ctx is done.
func (r *Reader) ReadAt(ctx context.Context, obj fetcher.Object, dest []byte, off int64) ([]byte, error) {
	r.stats.reads.Add(1)
	if off < 0 {
		return nil, fmt.Errorf("read %s at %d: negative offset", obj.Key, off)
	}
	if off >= obj.Size || len(dest) == 0 {
		return dest[:0], nil
	}
	end := min(off+int64(len(dest)), obj.Size)
	ps := r.cfg.PartSize
	first, last := off/ps, (end-1)/ps

	// Start every fetch the read needs before waiting for any of them.
	parts := make([][]byte, 0, last-first+1)
	calls := make([]*partCall, 0, last-first+1)
	for i := first; i <= last; i++ {
		data, call, err := r.acquire(obj, i)
		if err != nil {
			return nil, err
		}
		parts = append(parts, data)
		calls = append(calls, call)
	}
	for j, call := range calls {
		if call == nil {
			continue
		}
		select {
		case <-call.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("read %s [%d,%d): %w", obj.Key, off, end, ctx.Err())
		}
		if call.err != nil {
			return nil, fmt.Errorf("read %s [%d,%d): %w", obj.Key, off, end, call.err)
		}
		parts[j] = call.data
	}

	var out []byte
	if len(parts) == 1 {
		out = parts[0][off-first*ps : end-first*ps] // no copy
	} else {
		out = dest[:0]
		for j, data := range parts {
			start := (first + int64(j)) * ps
			lo := max(off, start) - start
			hi := min(end, start+int64(len(data))) - start
			out = append(out, data[lo:hi]...)
		}
	}
	r.stats.readBytes.Add(int64(len(out)))
	return out, nil
}

// acquire returns part idx of obj from memory, or the call that fetches it,
// starting that call if no other reader has.
func (r *Reader) acquire(obj fetcher.Object, idx int64) ([]byte, *partCall, error) {
	k := partKey{key: obj.Key, etag: obj.ETag, idx: idx}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, ErrClosed
	}
	if el, ok := r.cached[k]; ok {
		r.lru.MoveToFront(el)
		r.stats.partHits.Add(1)
		return el.Value.(*memPart).data, nil, nil
	}
	if call, ok := r.inflight[k]; ok {
		r.stats.partJoins.Add(1)
		return nil, call, nil
	}
	call := &partCall{key: k, obj: obj, done: make(chan struct{})}
	r.inflight[k] = call
	r.wg.Add(1)
	go r.fetch(call)
	return nil, call, nil
}

// fetch reads one part on the Reader's context, publishes the result to
// its waiters and keeps it in memory.
func (r *Reader) fetch(call *partCall) {
	defer r.wg.Done()
	off := call.key.idx * r.cfg.PartSize
	n := min(r.cfg.PartSize, call.obj.Size-off)
	var data []byte
	var err error
	select {
	case r.sem <- struct{}{}:
		data = make([]byte, n)
		err = r.store.ReadRange(r.ctx, call.obj, off, data)
		<-r.sem
	case <-r.ctx.Done():
		err = fmt.Errorf("fetch %s part %d: %w", call.key.key, call.key.idx, ErrClosed)
	}
	if err != nil {
		r.stats.partFetchErrors.Add(1)
		data = nil
	} else {
		r.stats.partsFetched.Add(1)
	}

	r.mu.Lock()
	delete(r.inflight, call.key)
	if err == nil && !r.closed {
		r.keepLocked(call.key, data)
	}
	r.mu.Unlock()

	call.data, call.err = data, err
	close(call.done)
}

// keepLocked adds a part to the memory tier, evicting the least recently
// used parts to stay within MemoryLimit. r.mu must be held.
func (r *Reader) keepLocked(k partKey, data []byte) {
	size := int64(len(data))
	if size > r.cfg.MemoryLimit {
		return
	}
	for r.memBytes+size > r.cfg.MemoryLimit {
		el := r.lru.Back()
		old := r.lru.Remove(el).(*memPart)
		delete(r.cached, old.key)
		r.memBytes -= int64(len(old.data))
	}
	r.cached[k] = r.lru.PushFront(&memPart{key: k, data: data})
	r.memBytes += size
}

// Stats returns a snapshot of the Reader's counters.
func (r *Reader) Stats() ReaderStats {
	r.mu.Lock()
	mem := r.memBytes
	r.mu.Unlock()
	return ReaderStats{
		Reads:           r.stats.reads.Load(),
		ReadBytes:       r.stats.readBytes.Load(),
		PartHits:        r.stats.partHits.Load(),
		PartJoins:       r.stats.partJoins.Load(),
		PartsFetched:    r.stats.partsFetched.Load(),
		PartFetchErrors: r.stats.partFetchErrors.Load(),
		MemoryBytes:     mem,
	}
}

// Close cancels every fetch in flight, waits for them to end and drops the
// parts kept in memory. Reads after Close fail with ErrClosed.
func (r *Reader) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	r.lru.Init()
	clear(r.cached)
	r.memBytes = 0
	r.mu.Unlock()
	return nil
}
