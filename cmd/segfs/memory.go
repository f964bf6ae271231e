package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/segfs/segfs/ops"
)

// memoryBound is what bounds segfs's memory, term by term, as the flags
// set it (engine.memoryBound). docs/DESIGN.md states the same formula;
// the Go memory limit follows it.
//
// It leaves out one term that no flag bounds: the FUSE requests in
// flight, each with a reply buffer of up to --max-read. The kernel
// sends one synchronous request per thread blocked in a read of the
// mount and at most max_background (12) asynchronous ones, and go-fuse
// offers no bound on requests whose input is small (it counts input
// buffers, which a read does not keep). docs/DESIGN.md says so beside the
// formula.
type memoryBound struct {
	Parts  int64 // part buffers (reader.Bound), and the command's own
	Ranges int64 // own-range GETs and the range tier (reader.Bound)
	Memory int64 // --memory-cache: parts the disk cache refused
	Frames int64 // decoded seekable zstd frames: kept, and being decoded
	Tree   int64 // the tree, per listed key, and a repository mount's directories (--max-dirs)
	Index  int64 // the disk cache's index, per cached part
	// Resolve is a repository mount's shard resolutions in flight, each
	// a metadata file read and decoded at its worst (view.ResolveSlots).
	Resolve int64
	// Listeners are the HTTP listeners' connections, every slot taken:
	// the control socket's, and --metrics-addr's and --pprof-addr's
	// when served (ops.Limits.Memory).
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

// listeners are the limits of the HTTP listeners the mount serves.
func (c *mountCmd) listeners() []ops.Limits {
	lims := []ops.Limits{ops.ControlLimits()}
	if c.MetricsAddr != "" {
		lims = append(lims, ops.MetricsLimits())
	}
	if c.PprofAddr != "" {
		lims = append(lims, ops.PprofLimits())
	}
	return lims
}

// listenersMemory is what listeners held to lims may hold together.
func listenersMemory(lims []ops.Limits) int64 {
	var n int64
	for _, l := range lims {
		n += l.Memory()
	}
	return n
}

// Total returns the sum of the terms.
func (b memoryBound) Total() int64 {
	return b.Parts + b.Ranges + b.Memory + b.Frames + b.Tree + b.Index + b.Resolve + b.Listeners + b.Base
}

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
