package reader

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/prefetch"
)

// FrameConfig configures a FrameReader. Zero DecodeBytes and MaxFrameSize
// select their defaults.
//
// Decoded frames take at most CacheBytes + DecodeBytes of memory: the
// frames kept for later reads, plus the reservations of the decodes in
// progress (a decode's compressed bytes, its output and what a corrupt
// frame may cost past it), which last until the reads waiting for a
// frame have copied it out. Beyond that, only a frame evicted from the
// cache while a read still copies from it lives on, until the copy ends.
type FrameConfig struct {
	// CacheBytes bounds the decoded frames kept in memory for later
	// reads. A frame larger than CacheBytes is never kept; 0 keeps none.
	CacheBytes int64
	// DecodeBytes bounds the memory held by frame decodes at once. Each
	// decode reserves compress.DecodeCost of its frame before allocating
	// anything, and waits (as long as one of its readers waits) while the
	// others' reservations leave too little room. At least
	// MinDecodeMemory(MaxFrameSize). Default DefaultDecodeMemory.
	DecodeBytes int64
	// MaxFrameSize is the largest frame decoded, in decompressed bytes;
	// a frame may also have at most compress.CompressBound(MaxFrameSize)
	// compressed bytes. Every read of an object with a frame past either
	// fails (compress.ErrFrameTooLarge). At most compress.MaxFrameSize.
	// Default compress.DefaultFrameLimit.
	MaxFrameSize int64
}

// Default values of FrameConfig. DefaultDecodeMemory holds one decode of
// a frame of compress.DefaultFrameLimit (MinDecodeMemory), or dozens of
// push's default frames at once.
const (
	DefaultFrameCache   = 64 << 20
	DefaultDecodeMemory = 64 << 20
)

// MinDecodeMemory returns the smallest FrameConfig.DecodeBytes that lets
// a frame of maxFrameSize decode: compress.MaxDecodeCost(maxFrameSize),
// 2.25 times maxFrameSize plus its compressed bound and 256 KiB.
func MinDecodeMemory(maxFrameSize int64) int64 { return compress.MaxDecodeCost(maxFrameSize) }

func (c FrameConfig) withDefaults() (FrameConfig, error) {
	if c.DecodeBytes == 0 {
		c.DecodeBytes = DefaultDecodeMemory
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = compress.DefaultFrameLimit
	}
	switch {
	case c.CacheBytes < 0:
		return c, fmt.Errorf("frame cache of %d bytes: must not be negative", c.CacheBytes)
	case c.MaxFrameSize < 1 || c.MaxFrameSize > compress.MaxFrameSize:
		return c, fmt.Errorf("max frame size %d: must be between 1 and %d", c.MaxFrameSize, compress.MaxFrameSize)
	case c.DecodeBytes < MinDecodeMemory(c.MaxFrameSize):
		return c, fmt.Errorf("decode memory %d: must be at least %d, what one frame of the max frame size %d may take to decode",
			c.DecodeBytes, MinDecodeMemory(c.MaxFrameSize), c.MaxFrameSize)
	}
	return c, nil
}

// FrameReader serves logical ranges of seekable zstd objects. It fetches
// the compressed bytes of the frames a read touches through the Reader
// (so through the part cache and the fetch pool, with readahead),
// verifies and decodes them, and keeps hot decoded frames in memory.
//
// Invariants:
//   - One decode per frame at a time (single-flight): reads of a frame
//     that is being decoded, or whose decoded bytes other reads are still
//     copying, share that decode. The decode runs on the FrameReader's
//     context, not a reader's: an interrupted reader leaves alone, and
//     the decode stops only when no reader waits for it any more.
//   - Decode memory is reserved before it is allocated, within
//     FrameConfig.DecodeBytes; see FrameConfig for the whole bound.
//   - An object with a frame past FrameConfig.MaxFrameSize is never
//     fetched or decoded: each of its reads fails at once.
//   - Close stops every decode and waits for their goroutines.
type FrameReader struct {
	// Immutable after construction.
	r      *Reader
	cfg    FrameConfig
	dec    *compress.Decoder
	frames *ristretto.Cache[string, []byte] // nil when CacheBytes is 0
	budget *decodeBudget
	ctx    context.Context // of every decode; cancelled by Close
	cancel context.CancelFunc

	mu       sync.Mutex
	flights  map[string]*flight // guarded by mu
	closed   bool               // guarded by mu
	decoders sync.WaitGroup     // running flights; Add only under mu while !closed

	// refused holds the objects (key NUL ETag) refused for a frame past
	// the limit and logged once: each of their reads fails alike.
	refused sync.Map
}

// flight is one decode of one frame and the reads that share it.
type flight struct {
	done   chan struct{}      // closed under FrameReader.mu once data and err are set
	cancel context.CancelFunc // stops the decode
	data   []byte             // the decoded frame, read-only; set before done
	err    error              // set before done
	tier   readTier           // the slowest tier the decode's reads touched; final once done

	// Guarded by FrameReader.mu.
	readers int   // reads waiting for the flight or copying from data
	held    int64 // budget held for data once done, until readers is 0
}

// newFrameReader returns a FrameReader over r, with cfg's defaults
// already set. Close it after use.
//
// The frame cache is ristretto: its TinyLFU admission keeps frames that
// are read often while a sequential scan streams past them, and a miss
// only costs a decode of bytes that are local by then.
func newFrameReader(r *Reader, cfg FrameConfig) (*FrameReader, error) {
	dec, err := compress.NewDecoder()
	if err != nil {
		return nil, fmt.Errorf("frame reader: %w", err)
	}
	var frames *ristretto.Cache[string, []byte]
	if cfg.CacheBytes > 0 {
		frames, err = ristretto.NewCache(&ristretto.Config[string, []byte]{
			NumCounters: max(cfg.CacheBytes/(256<<10), 64) * 10, // ten per frame it can hold
			MaxCost:     cfg.CacheBytes,
			BufferItems: 64,
		})
		if err != nil {
			dec.Close()
			return nil, fmt.Errorf("frame reader: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &FrameReader{
		r: r, cfg: cfg, dec: dec, frames: frames,
		budget: newDecodeBudget(cfg.DecodeBytes, &r.stats),
		ctx:    ctx, cancel: cancel,
		flights: make(map[string]*flight),
	}, nil
}

// Close stops the decodes in progress (their readers get errors wrapping
// ErrClosed), waits for them, and releases the decoder and the frame
// cache. Reads after Close fail.
func (fr *FrameReader) Close() {
	fr.mu.Lock()
	already := fr.closed
	fr.closed = true
	fr.mu.Unlock()
	if already {
		return
	}
	fr.cancel()
	fr.decoders.Wait()
	if fr.frames != nil {
		fr.frames.Close()
	}
	fr.dec.Close()
}

// ReadAt reads up to len(dest) logical bytes of e at off into dest and
// returns the filled prefix; a read at or past the end returns none. A
// frame that fails to decode or verify fails the read with an error
// naming the object and the frame; nothing of it is kept. Every read of
// an object with a frame past FrameConfig.MaxFrameSize fails with an
// error wrapping compress.ErrFrameTooLarge, before anything is fetched.
func (fr *FrameReader) ReadAt(ctx context.Context, e Entry, dest []byte, off int64, seq *prefetch.Sequence) ([]byte, error) {
	t := e.Table
	if off < 0 {
		return nil, fmt.Errorf("read %s at %d: negative offset", e.Name, off)
	}
	if err := t.CheckFrameLimit(fr.cfg.MaxFrameSize); err != nil {
		fr.r.stats.FrameRejected.Add(1)
		err = fmt.Errorf("read %s: not decoded: %w", e.Obj.Key, err)
		if _, seen := fr.refused.LoadOrStore(e.Obj.Key+"\x00"+e.Obj.ETag, true); !seen {
			fr.r.cfg.Logger.Warn("object not readable: a frame is past --max-frame-size", "key", e.Obj.Key, "err", err)
		}
		return nil, LoggedError{err}
	}
	if off >= t.Size || len(dest) == 0 {
		return dest[:0], nil
	}
	end := min(off+int64(len(dest)), t.Size)
	first, last := t.FramesFor(off, end-off)
	out := dest[:0]
	for i := first; i <= last; i++ {
		f := t.Frames[i]
		if f.Size == 0 {
			continue
		}
		data, done, err := fr.frame(ctx, e, i, seq)
		if err != nil {
			return nil, err
		}
		lo, hi := max(off, f.Off)-f.Off, min(end, f.Off+f.Size)-f.Off
		out = append(out, data[lo:hi]...)
		if done != nil {
			done()
		}
	}
	return out, nil
}

// frame returns decoded frame i of e, from memory or from a decode it
// starts or joins. done, if not nil, must be called once the bytes are
// no longer used: until then they stay reserved in the decode budget.
func (fr *FrameReader) frame(ctx context.Context, e Entry, i int, seq *prefetch.Sequence) (data []byte, done func(), err error) {
	key := e.Obj.Key + "\x00" + e.Obj.ETag + "\x00" + strconv.Itoa(i)
	if fr.frames != nil {
		if data, ok := fr.frames.Get(key); ok {
			fr.r.stats.FrameHits.Add(1)
			markTier(ctx, TierMemory)
			return data, nil, nil
		}
	}
	fl, err := fr.join(key, e, i, seq)
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-fl.done:
	case <-ctx.Done():
		fr.leave(key, fl)
		return nil, nil, fmt.Errorf("%s frame %d: %w", e.Obj.Key, i, ctx.Err())
	}
	if fl.err != nil {
		fr.leave(key, fl)
		return nil, nil, fl.err
	}
	markTier(ctx, fl.tier.get()) // where the decode's compressed bytes came from
	return fl.data, func() { fr.leave(key, fl) }, nil
}

// join adds a reader to the flight of key, starting it if there is none.
func (fr *FrameReader) join(key string, e Entry, i int, seq *prefetch.Sequence) (*flight, error) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fl, ok := fr.flights[key]; ok {
		fl.readers++
		fr.r.stats.FrameShared.Add(1)
		return fl, nil
	}
	if fr.closed {
		return nil, fmt.Errorf("%s frame %d: %w", e.Obj.Key, i, ErrClosed)
	}
	ctx, cancel := context.WithCancel(fr.ctx)
	fl := &flight{done: make(chan struct{}), cancel: cancel, readers: 1}
	ctx = context.WithValue(ctx, tierKey{}, &fl.tier)
	fr.flights[key] = fl
	fr.decoders.Add(1)
	go fr.run(ctx, key, fl, e, i, seq)
	return fl, nil
}

// leave removes a reader from fl. The last one out forgets the flight:
// it releases the budget held for the decoded bytes or, if the decode
// still runs, stops it, so that a later read starts afresh.
func (fr *FrameReader) leave(key string, fl *flight) {
	var free int64
	fr.mu.Lock()
	fl.readers--
	if fl.readers == 0 {
		if fr.flights[key] == fl {
			delete(fr.flights, key)
		}
		select {
		case <-fl.done:
			free, fl.held = fl.held, 0
		default:
			fl.cancel()
		}
	}
	fr.mu.Unlock()
	fr.budget.release(free)
}

// run decodes the frame of fl and publishes the result. Of the budget the
// decode reserved, the decoded bytes stay held while readers copy them;
// the rest (compressed bytes, overrun allowance) is released before the
// readers wake, so the budget is settled when the last of them leaves.
func (fr *FrameReader) run(ctx context.Context, key string, fl *flight, e Entry, i int, seq *prefetch.Sequence) {
	defer fr.decoders.Done()
	defer fl.cancel()
	f := e.Table.Frames[i]
	data, reserved, err := fr.decode(ctx, e, i, seq)
	if err != nil && fr.ctx.Err() != nil {
		err = fmt.Errorf("%s frame %d: %w: %v", e.Obj.Key, i, ErrClosed, err)
	}
	var keep int64 // the decoded bytes, while readers may copy them
	if err == nil {
		keep = f.Size
		if fr.frames != nil && f.Size <= fr.cfg.CacheBytes {
			fr.frames.Set(key, data, f.Size)
		}
	}
	fr.budget.release(reserved - keep)
	fr.mu.Lock()
	fl.data, fl.err = data, err
	switch {
	case err == nil && fl.readers > 0:
		fl.held, keep = keep, 0 // the last reader releases it
	case fr.flights[key] == fl:
		// A failure is not shared with reads that come later.
		delete(fr.flights, key)
	}
	close(fl.done)
	fr.mu.Unlock()
	fr.budget.release(keep)
}

// decode reserves the frame's decode cost, fetches its compressed bytes
// and decodes them. It returns how much of the budget it holds.
func (fr *FrameReader) decode(ctx context.Context, e Entry, i int, seq *prefetch.Sequence) (data []byte, reserved int64, err error) {
	f := e.Table.Frames[i]
	cost := compress.DecodeCost(f)
	if err := fr.budget.acquire(ctx, cost); err != nil {
		return nil, 0, fmt.Errorf("%s frame %d: %w", e.Obj.Key, i, err)
	}
	// From here a panic (a decoder tripping over the frame's bytes)
	// fails this frame's reads and still returns its reservation.
	reserved = cost
	defer catchPanic(&err, fmt.Sprintf("decode %s frame %d", e.Obj.Key, i))
	comp := make([]byte, f.CompSize)
	got, err := fr.r.ReadAt(ctx, e.Obj, comp, f.CompOff, seq)
	if err != nil {
		return nil, cost, err
	}
	if int64(len(got)) != f.CompSize {
		return nil, cost, fmt.Errorf("%s frame %d: %d of %d compressed bytes: %w", e.Obj.Key, i, len(got), f.CompSize, compress.ErrCorrupt)
	}
	start := time.Now()
	data, err = fr.dec.DecodeFrame(f, got, nil)
	fr.r.stats.DecodeNanos.Add(int64(time.Since(start)))
	fr.r.stats.FrameDecodes.Add(1)
	if err != nil {
		return nil, cost, fmt.Errorf("%s frame %d: %w", e.Obj.Key, i, err)
	}
	fr.r.stats.DecodedBytes.Add(int64(len(data)))
	return data, cost, nil
}
