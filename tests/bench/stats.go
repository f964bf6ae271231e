package main

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Percentile returns the q-th percentile (0 < q <= 100) of ds by the
// nearest-rank method: the smallest value with at least q% of the values
// at or below it. It returns 0 for no values. ds is not modified.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return percentileSorted(s, q)
}

func percentileSorted(s []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// Latencies summarises a set of latencies in milliseconds.
type Latencies struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
	// Slowest are the slowest few, slowest first, with their place in
	// the sequence: whether a tail comes from the first reads (a fresh
	// mount's connections, its first fetches) or from anywhere.
	Slowest []Sample `json:"slowest,omitempty"`
}

// Sample is one latency and its index in the sequence measured.
type Sample struct {
	Index int     `json:"index"`
	Ms    float64 `json:"ms"`
}

// slowestKept is how many of the slowest latencies Summarize keeps.
const slowestKept = 5

// Summarize returns the summary of ds; the zero Latencies for none.
func Summarize(ds []time.Duration) Latencies {
	if len(ds) == 0 {
		return Latencies{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	idx := make([]int, len(ds))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(ds[b], ds[a]) })
	var slowest []Sample
	for _, i := range idx[:min(slowestKept, len(idx))] {
		slowest = append(slowest, Sample{Index: i, Ms: ms(ds[i])})
	}
	return Latencies{
		Count:   len(s),
		P50:     ms(percentileSorted(s, 50)),
		P99:     ms(percentileSorted(s, 99)),
		Max:     ms(s[len(s)-1]),
		Mean:    ms(sum / time.Duration(len(s))),
		Slowest: slowest,
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MBps is n bytes over d in decimal megabytes per second; 0 if d is not
// positive.
func MBps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / 1e6 / d.Seconds()
}

// Ratio is a/b, or nil when either is not a positive number, so that a
// missing baseline shows as missing rather than as 0 or +Inf.
func Ratio(a, b float64) *float64 {
	if !(a > 0) || !(b > 0) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return nil
	}
	r := a / b
	return &r
}
