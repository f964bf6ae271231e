package stats

import (
	"sync/atomic"
	"time"
)

// Bounds are the upper bounds of every Histogram's buckets, from the
// 10µs of a read served from a held part to the minute of a stalled GET
// that is retried; above the last is the +Inf bucket. One set for every
// histogram keeps Observe free of lookups and makes histograms of
// different tiers comparable bucket by bucket.
var Bounds = [...]time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 30 * time.Second, time.Minute,
}

// Histogram is a distribution of durations over Bounds. The zero value
// is ready; its methods may be called concurrently. A struct field of
// this type (or an array of them) with a `stat` tag is served as a
// Prometheus histogram, not in the JSON of /stats (Collect skips it).
type Histogram struct {
	counts [len(Bounds) + 1]atomic.Uint64 // per bucket, not cumulative; the last is +Inf
	sum    atomic.Int64                   // nanoseconds
}

// Observe adds one duration.
func (h *Histogram) Observe(d time.Duration) {
	i := 0
	for i < len(Bounds) && d > Bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// Since observes the time since start.
func (h *Histogram) Since(start time.Time) { h.Observe(time.Since(start)) }

// HistogramSnapshot is a Histogram's state at one moment.
type HistogramSnapshot struct {
	Count uint64
	Sum   time.Duration
	// Cumulative[i] counts the observations of at most Bounds[i].
	Cumulative [len(Bounds)]uint64
}

// Snapshot returns the histogram's state. Observations that land while
// it runs may be counted in some buckets and not yet in Count; Count is
// read last and raised to the +Inf total, so that the buckets never
// exceed it.
func (h *Histogram) Snapshot() HistogramSnapshot {
	var s HistogramSnapshot
	var total uint64
	for i := range Bounds {
		total += h.counts[i].Load()
		s.Cumulative[i] = total
	}
	s.Count = total + h.counts[len(Bounds)].Load()
	s.Sum = time.Duration(h.sum.Load())
	return s
}
