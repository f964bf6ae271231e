package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/reader"
)

// memoryBound is what bounds segfs's memory, term by term, as the flags
// set it. docs/DESIGN.md states the same formula; the Go memory limit follows it.
type memoryBound struct {
	Parts  int64 // part buffers: the fetch pool's, the writers', the streams' held parts and the free list
	Ranges int64 // the buffers of cold small reads' own-range GETs, and the range tier's blocks in memory and in flight
	Memory int64 // --memory-cache: parts the disk cache refused
	Frames int64 // decoded seekable zstd frames: kept, and being decoded
	Tree   int64 // the tree, per listed key
	Index  int64 // the disk cache's index, per cached part
	// Listeners are the HTTP listeners' connections, every slot taken:
	// the control socket's, and --metrics-addr's and --pprof-addr's
	// when served (listenLimits.memory).
	Listeners int64
	Base      int64 // the runtime, the FUSE server's buffers, the SDK
}

// Per-item costs that the bound counts.
const (
	// indexBytesPerPart bounds one disk-cache index entry: its id, LRU
	// links and map slot.
	indexBytesPerPart = 256
	// baseBytes is what segfs takes with no data in flight.
	baseBytes = 64 << 20
)

// memoryBoundOf returns the bound for a mount of keys listed keys.
//
// It leaves out one term that no flag bounds: the FUSE requests in
// flight, each with a reply buffer of up to --max-read. The kernel
// sends one synchronous request per thread blocked in a read of the
// mount and at most max_background (12) asynchronous ones, and go-fuse
// offers no bound on requests whose input is small (it counts input
// buffers, which a read does not keep). docs/DESIGN.md says so beside the
// formula.
//
// Part buffers: each of the --max-fetches workers holds one while it
// fetches; as many again wait, free, for reuse; DefaultWriters more are
// being written to the disk; and the streams of sequential readers hold
// at most --max-fetches+1 (the readahead's reach, less what is being
// received). Cached parts number at most --cache-size/--part-size whole
// ones plus one short part per object.
func memoryBoundOf(c *mountCmd, keys int) memoryBound {
	ps, w := int64(c.PartSize), int64(c.MaxFetches)
	return memoryBound{
		Parts:     (3*w + reader.DefaultWriters + 1) * ps,
		Ranges:    w*(ps/8+3*reader.RangeBlock) + reader.RangeMemory,
		Memory:    int64(c.MemoryCache),
		Frames:    c.frameMemory(),
		Tree:      int64(keys) * segfs.TreeBytesPerKey,
		Index:     (int64(c.CacheSize)/ps + int64(keys)) * indexBytesPerPart,
		Listeners: listenersMemory(c.listeners()),
		Base:      baseBytes,
	}
}

// listeners are the limits of the HTTP listeners the mount serves.
func (c *mountCmd) listeners() []listenLimits {
	lims := []listenLimits{controlLimits()}
	if c.MetricsAddr != "" {
		lims = append(lims, metricsLimits())
	}
	if c.PprofAddr != "" {
		lims = append(lims, pprofLimits())
	}
	return lims
}

// listenersMemory is what listeners held to lims may hold together.
func listenersMemory(lims []listenLimits) int64 {
	var n int64
	for _, l := range lims {
		n += l.memory()
	}
	return n
}

// Total returns the sum of the terms.
func (b memoryBound) Total() int64 {
	return b.Parts + b.Ranges + b.Memory + b.Frames + b.Tree + b.Index + b.Listeners + b.Base
}

// frameMemory is what decoded seekable zstd frames may take: the frames
// kept for later reads, and those being decoded (each decode reserves
// its worst case within --decode-memory before it allocates).
func (c *mountCmd) frameMemory() int64 { return int64(c.FrameCache) + int64(c.DecodeMemory) }

// setMemoryLimit gives the Go runtime a soft memory limit of the bound,
// so that garbage does not grow the heap past what the configuration
// allows, while live data within the bound never drives the collector
// into running without pause. GOMEMLIMIT, when set, wins.
func setMemoryLimit(b memoryBound, log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		log.Info("memory bound", "bytes", b.Total(), "terms", fmt.Sprintf("%+v", b), "go_memory_limit", "GOMEMLIMIT")
		return
	}
	debug.SetMemoryLimit(b.Total())
	log.Info("memory bound", "bytes", b.Total(), "terms", fmt.Sprintf("%+v", b))
}
