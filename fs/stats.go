package fs

import (
	"sync/atomic"

	"github.com/segfs/segfs/prefetch"
)

type readerCounters struct {
	reads, readBytes      atomic.Int64
	memHits, diskHits     atomic.Int64
	joins, rangeReads     atomic.Int64
	partsFetched          atomic.Int64
	partsSplit, splitGets atomic.Int64
	fetchedBytes          atomic.Int64
	fetchErrors, noSpace  atomic.Int64
	fetchNanos, putNanos  atomic.Int64
	started               [3]atomic.Int64 // part fetches started, by priority
	heldHits, fillPaused  atomic.Int64
	pageDrops             atomic.Int64
	idleStreams           atomic.Int64
	fillsAbandoned        atomic.Int64
	openHandles           atomic.Int64 // a gauge
}

// ReaderStats is a snapshot of a Reader's counters.
type ReaderStats struct {
	Reads       int64 // ReadAt calls
	ReadBytes   int64 // bytes returned by ReadAt
	MemoryHits  int64 // part reads served by the memory tier
	HeldHits    int64 // part reads served by parts held for a sequential reader
	FillPaused  int64 // background part fetches taken back for a sequential reader
	PageDrops   int64 // files read whole whose pages the kernel was told to drop
	IdleStreams int64 // sequential readers no longer followed after StreamIdle without a read
	// FillsAbandoned counts objects whose background fill stopped at a
	// part fetch that failed.
	FillsAbandoned int64
	OpenHandles    int64 // open file handles now, released ones' page drops done
	DiskHits       int64 // part reads served by the disk cache
	Joins          int64 // part reads that waited on a fetch already in flight
	RangeReads     int64 // cold small reads served by a GET of their own range
	PartsFetched   int64 // whole parts fetched
	PartsSplit     int64 // part fetches split into several GETs run in parallel
	SplitGets      int64 // the GETs of those split fetches
	FetchedBytes   int64 // bytes fetched (parts and ranges)
	FetchErrors    int64 // part fetches that failed
	NoSpace        int64 // fetched parts the disk cache had no room for
	StartedDemand  int64 // part fetches started for a waiting reader
	StartedAhead   int64 // part fetches started as readahead
	StartedBack    int64 // part fetches started in the background
	FetchNanos     int64 // time part fetches spent receiving, summed over fetches
	PutNanos       int64 // time part fetches spent storing into the disk cache, summed
	MemoryBytes    int64 // bytes held by the memory tier now
	HeldBytes      int64 // bytes of parts held for sequential readers now
	InflightParts  int64 // part fetches queued or running now
	// PassthroughOpens counts opens handed to the kernel with a
	// whole-object file (--passthrough); their reads never reach segfs.
	PassthroughOpens int64
	// PromotePending counts objects queued for, or in, a whole-object
	// file build.
	PromotePending int64
}

func (c *readerCounters) snapshot(mem, held int64, inflight int) ReaderStats {
	return ReaderStats{
		Reads:          c.reads.Load(),
		ReadBytes:      c.readBytes.Load(),
		MemoryHits:     c.memHits.Load(),
		HeldHits:       c.heldHits.Load(),
		FillPaused:     c.fillPaused.Load(),
		PageDrops:      c.pageDrops.Load(),
		IdleStreams:    c.idleStreams.Load(),
		FillsAbandoned: c.fillsAbandoned.Load(),
		OpenHandles:    c.openHandles.Load(),
		DiskHits:       c.diskHits.Load(),
		Joins:          c.joins.Load(),
		RangeReads:     c.rangeReads.Load(),
		PartsFetched:   c.partsFetched.Load(),
		PartsSplit:     c.partsSplit.Load(),
		SplitGets:      c.splitGets.Load(),
		FetchedBytes:   c.fetchedBytes.Load(),
		FetchErrors:    c.fetchErrors.Load(),
		NoSpace:        c.noSpace.Load(),
		StartedDemand:  c.started[prefetch.Demand].Load(),
		StartedAhead:   c.started[prefetch.Readahead].Load(),
		StartedBack:    c.started[prefetch.Background].Load(),
		FetchNanos:     c.fetchNanos.Load(),
		PutNanos:       c.putNanos.Load(),
		MemoryBytes:    mem,
		HeldBytes:      held,
		InflightParts:  int64(inflight),
	}
}
