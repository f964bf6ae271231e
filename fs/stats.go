package fs

import "sync/atomic"

// Stats are the FUSE edge's counters; the tag is the name in /stats
// (package stats).
type Stats struct {
	PageDrops  atomic.Int64 `stat:"page_cache_drops"` // files read whole whose pages the kernel was told to drop
	StaleReads atomic.Int64 `stat:"stale_reads"`      // reads failed with ESTALE: the object changed or gone from the store

	// The view's refreshes (Root.Refresh; a failed listing changes
	// nothing and is counted by whoever listed).
	Refreshes       atomic.Int64 `stat:"refreshes"`               // listings applied, changed or not
	RefreshFailures atomic.Int64 `stat:"refresh_failures"`        // refreshes that could not list the store: the view stayed
	FilesAdded      atomic.Int64 `stat:"files_added"`             // names a refresh added
	FilesChanged    atomic.Int64 `stat:"files_changed"`           // names a refresh gave another version (a new inode)
	FilesRemoved    atomic.Int64 `stat:"files_removed"`           // names a refresh removed
	FilesKept       atomic.Int64 `stat:"files_kept" kind:"gauge"` // names a newer listing dropped, still shown for --keep-removed
	// ViewListed is when the view's listing was last applied, in Unix
	// nanoseconds (0 until the first refresh: the mount's listing).
	ViewListed atomic.Int64 `stat:"view_listed_timestamp_ns" kind:"gauge"`
}
