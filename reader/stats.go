package reader

import (
	"sync/atomic"

	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/stats"
)

// Stats are the read engine's counters and gauges, each declared once:
// its tag is its name in /stats (package stats). All fields are updated
// atomically and may be read at any time.
type Stats struct {
	// Logical reads.
	Reads     atomic.Int64 `stat:"reads"`      // ReadAt calls
	ReadBytes atomic.Int64 `stat:"read_bytes"` // bytes returned by ReadAt

	// ReadLatency is the time a Handle took to serve a read (what each
	// FUSE read of a file waits for in segfs), by the slowest tier its
	// bytes came from (tier.go). Failed reads are not observed.
	ReadLatency [numTiers]stats.Histogram `stat:"read_seconds" label:"tier=held,memory,disk,remote"`

	// Where part reads were served from.
	MemoryHits atomic.Int64 `stat:"memory_hits"` // by the memory tier
	HeldHits   atomic.Int64 `stat:"held_hits"`   // by parts held for a sequential reader
	DiskHits   atomic.Int64 `stat:"disk_hits"`   // by the disk cache
	Joins      atomic.Int64 `stat:"joins"`       // by waiting on a fetch already in flight
	RangeReads atomic.Int64 `stat:"range_reads"` // by a GET of their own range (cold small reads)

	// Part fetches.
	PartsFetched  atomic.Int64 `stat:"parts_fetched"`      // whole parts fetched
	PartsSplit    atomic.Int64 `stat:"parts_split"`        // part fetches split into several GETs run in parallel
	SplitGets     atomic.Int64 `stat:"split_gets"`         // the GETs of those split fetches
	FetchedBytes  atomic.Int64 `stat:"fetched_bytes"`      // bytes fetched (parts and ranges)
	FetchErrors   atomic.Int64 `stat:"fetch_errors"`       // part fetches that failed
	NoSpace       atomic.Int64 `stat:"no_space"`           // fetched parts the disk cache had no room for
	StartedDemand atomic.Int64 `stat:"started_demand"`     // part fetches started for a waiting reader
	StartedAhead  atomic.Int64 `stat:"started_readahead"`  // part fetches started as readahead
	StartedBack   atomic.Int64 `stat:"started_background"` // part fetches started in the background
	FetchNanos    atomic.Int64 `stat:"fetch_ns"`           // time part fetches spent receiving, summed over fetches
	PutNanos      atomic.Int64 `stat:"cache_put_ns"`       // time spent storing fetched parts in the disk cache, summed

	// Prefetch and sequential readers.
	FillPaused     atomic.Int64 `stat:"fill_paused"`     // background part fetches taken back for a sequential reader
	IdleStreams    atomic.Int64 `stat:"idle_streams"`    // sequential readers no longer followed after StreamIdle without a read
	FillsAbandoned atomic.Int64 `stat:"fills_abandoned"` // objects whose background fill stopped at a failed part fetch

	// The range tier (heads and tails fetched ahead for a Lucene open).
	RangesPrefetched  atomic.Int64 `stat:"ranges_prefetched"`                // range fetches started for the range tier
	RangeTierHits     atomic.Int64 `stat:"range_tier_hits"`                  // part reads served by the range tier
	RangeTierJoins    atomic.Int64 `stat:"range_tier_joins"`                 // of them, reads that joined range fetches in flight
	RangeTierEarly    atomic.Int64 `stat:"range_tier_early"`                 // of the joins, reads answered before their fetch ended, its first bytes in
	RangeTierBytes    atomic.Int64 `stat:"range_tier_bytes"`                 // bytes fetched into the range tier
	ProfileLoaded     atomic.Int64 `stat:"open_profile_loaded" kind:"gauge"` // 1 if the cache held a learned open profile at the start
	ProfileRanges     atomic.Int64 `stat:"open_profile_ranges"`              // open ranges a learned profile widened
	OpenPrefetchNanos atomic.Int64 `stat:"open_prefetch_ns" kind:"gauge"`    // from the first directory seen to the last range fetch's end

	// Gauges.
	OpenHandles   atomic.Int64 `stat:"open_handles" kind:"gauge"`      // open handles now
	MemoryBytes   atomic.Int64 `stat:"memory_part_bytes" kind:"gauge"` // bytes held by the memory tier now
	HeldBytes     atomic.Int64 `stat:"held_bytes" kind:"gauge"`        // bytes of parts held for sequential readers now
	InflightParts atomic.Int64 `stat:"inflight_parts" kind:"gauge"`    // part fetches queued, running or being stored now

	// Whole-object files (--passthrough).
	PassthroughOpens atomic.Int64 `stat:"passthrough_opens"`            // opens handed to the kernel with a whole-object file
	PromotePending   atomic.Int64 `stat:"promote_pending" kind:"gauge"` // objects queued for, or in, a whole-object file build

	// Seekable zstd frames.
	FrameHits        atomic.Int64 `stat:"frame_hits"`                       // frames served decoded from memory
	FrameShared      atomic.Int64 `stat:"frame_shared"`                     // frames served by another read's decode
	FrameDecodes     atomic.Int64 `stat:"frame_decodes"`                    // frames decoded (successfully or not)
	DecodedBytes     atomic.Int64 `stat:"frame_decoded_bytes"`              // logical bytes of the frames decoded successfully
	DecodeNanos      atomic.Int64 `stat:"frame_decode_ns"`                  // wall time in the decoder, summed over concurrent decodes
	FrameRejected    atomic.Int64 `stat:"frame_rejected"`                   // reads refused: their object has a frame past the frame limit
	DecodeWaits      atomic.Int64 `stat:"decode_waits"`                     // decodes that waited for decode memory
	DecodeMemory     atomic.Int64 `stat:"decode_memory_bytes" kind:"gauge"` // decode memory reserved now
	DecodeMemoryPeak atomic.Int64 `stat:"decode_memory_peak" kind:"gauge"`  // the most decode memory reserved at once
}

// started returns the counter of part fetches started at prio.
func (s *Stats) started(prio prefetch.Priority) *atomic.Int64 {
	switch prio {
	case prefetch.Demand:
		return &s.StartedDemand
	case prefetch.Readahead:
		return &s.StartedAhead
	}
	return &s.StartedBack
}

// Stats returns the Reader's live counters.
func (r *Reader) Stats() *Stats { return &r.stats }
