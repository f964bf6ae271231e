package reader

// Bound is what a Reader may hold in memory, term by term, as its
// configuration (defaults applied) and its scheduler's workers set it.
// The command adds what the engine does not hold (the tree, the disk
// cache's index, its own buffers) to state the process's bound.
type Bound struct {
	// Parts: each worker holds one part buffer while it fetches; as
	// many again wait, free, for reuse; Writers more are being written
	// to the disk; and the streams of sequential readers hold at most
	// MaxReadahead+1 together with the fetches receiving (one per
	// worker), with one buffer to spare.
	Parts int64
	// Ranges: the buffers of cold small reads' own-range GETs, one per
	// worker; with SegmentPrefetch also the range tier's blocks, in
	// memory (Config.RangeMemory) and in flight: a running range fetch holds
	// its GET's buffer, at most RangeFetchMax, one fetch per worker (its
	// blocks are slices of it, in the LRU too); and the fetches queued
	// for the disk cache, at most RangeMemory more (those the LRU let
	// go before they were written).
	Ranges int64
	// Memory: the memory tier, the parts the disk cache refused.
	Memory int64
	// Frames: decoded seekable zstd frames kept, and being decoded.
	Frames int64
}

// MemoryBound returns r's bound.
func (r *Reader) MemoryBound() Bound {
	ps, w := r.cfg.PartSize, int64(r.sched.Workers())
	b := Bound{
		Parts:  (3*w + int64(r.cfg.Writers) + 1) * ps,
		Ranges: w * r.cfg.SmallRead,
		Memory: r.cfg.MemoryLimit,
		Frames: r.cfg.Frames.CacheBytes + r.cfg.Frames.DecodeBytes,
	}
	if r.cfg.SegmentPrefetch {
		b.Ranges += w*RangeFetchMax + 2*r.cfg.RangeMemory
	}
	return b
}

// PartSize is the size of r's parts (Config.PartSize, defaults applied).
func (r *Reader) PartSize() int64 { return r.cfg.PartSize }
