package reader

import (
	"log/slog"
	"time"

	"github.com/segfs/segfs/prefetch"
)

// Config configures a Reader. Zero fields take the defaults.
type Config struct {
	// Source names the store in cache keys, e.g. "s3://bucket/prefix"
	// (fetcher.CacheSource).
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
	// Prefetch selects the prefetch policies (prefetch.Policies). Default
	// prefetch.Open.
	Prefetch prefetch.Mode
	// Writers is the number of goroutines storing fetched parts in the
	// disk cache. A fetch hands its part to a free writer, waiting for one
	// if all are busy, so at most Writers parts wait for the disk beside
	// the ones the fetch pool holds. Default 4.
	Writers int
	// Passthrough builds a whole-object file of each object once its parts
	// are all cached, and lets opens of such objects be handed to the
	// kernel with that file (OpenWhole; whole.go).
	Passthrough bool
	// StreamIdle is how long a followed sequential reader may go without
	// a read before the Reader stops following it (stream.go): its held
	// parts go and its object's fill is queued again. Default 2s.
	StreamIdle time.Duration
	// SplitSize, if positive, lets a part fetch that finds workers of the
	// pool idle split into that many more GETs, of at least SplitSize
	// bytes each and at most MaxSplit in all, run in parallel on those
	// workers (split.go). 0 fetches every part with one GET.
	SplitSize int64
	// DropAfterRead lets a handle that read a whole file larger than a
	// part say so when it closes (Handle.ReadWhole), so the edge can have
	// the kernel drop the file's pages.
	DropAfterRead bool
	// SegmentPrefetch runs the segment-aware policy (prefetch.LuceneOpen)
	// in every prefetch mode: a directory holding a Lucene index, when
	// first seen, has its small files and the heads and tails of its
	// larger files fetched at once, into the range tier.
	SegmentPrefetch bool
	// RangeMemory bounds the range tier's blocks kept in memory; the
	// others are read from the disk cache. Default DefaultRangeMemory;
	// below one block, none is kept.
	RangeMemory int64
	// Kernel is what the kernel reads of a file around an open's reads
	// (the mount's readahead and max_read), which the segment policy
	// fetches ahead. Default prefetch.DefaultKernel.
	Kernel prefetch.Kernel
	// Frames configures the reads of seekable zstd objects (frames.go).
	Frames FrameConfig
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
}

// Default values of Config.
const (
	DefaultPartSize    = 8 << 20
	DefaultMemoryLimit = 64 << 20
	DefaultWriters     = 4
	DefaultStreamIdle  = 2 * time.Second
	// MaxSplit bounds the GETs one part fetch splits into.
	MaxSplit = 8
)

func (c Config) withDefaults(workers int) (Config, error) {
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
	if c.RangeMemory <= 0 {
		c.RangeMemory = DefaultRangeMemory
	}
	if c.Kernel.Readahead <= 0 || c.Kernel.MaxRead <= 0 {
		c.Kernel = prefetch.DefaultKernel
	}
	if c.Prefetch == "" {
		c.Prefetch = prefetch.Open
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
	var err error
	c.Frames, err = c.Frames.withDefaults()
	return c, err
}
