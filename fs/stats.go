package fs

import "sync/atomic"

// Stats are the FUSE edge's counters; the tag is the name in /stats
// (package stats).
type Stats struct {
	PageDrops atomic.Int64 `stat:"page_cache_drops"` // files read whole whose pages the kernel was told to drop
}
