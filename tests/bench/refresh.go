package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/osremote"
)

// Case 9: what following a live store costs (issue 35). A shard is
// written in OpenSearch's remote store layout by tests/osremote (and the
// same files as plain objects), mounted with --refresh, left idle for a
// few refreshes, then given one more segment and a new commit, as a
// node's refresh uploads them.
const (
	caseRefreshIdle    = "9-refresh-idle"
	caseRefreshSegment = "9-refresh-new-segment"
	refreshOSBase      = "refresh-os"
	refreshPlainPrefix = "refresh-plain"
	refreshUUID        = "bEnChReFrEsHuUiD0000001"
	refreshInterval    = 500 * time.Millisecond
	refreshIdleRounds  = 6
	refreshScale       = 2 << 20 // tests/osremote's size scale: about 60 MB for the 8 segments
)

// RefreshCost is what one refresh asked of the store, in the JSON under
// each case 9 record.
type RefreshCost struct {
	Refreshes int64 `json:"refreshes"` // refreshes the figures are over
	// Per refresh:
	Lists    float64 `json:"lists"`
	Heads    float64 `json:"heads"`
	Gets     float64 `json:"gets"`
	GetBytes float64 `json:"get_bytes"`
	// The new segment's: the range GETs the new commit's open (segment
	// prefetch) had started when its segments_N showed, and their bytes
	// received by then (counted in Gets and GetBytes once they end).
	RangeGets  int64 `json:"range_gets,omitempty"`
	RangeBytes int64 `json:"range_bytes,omitempty"`
}

// refresh is case 9.
func (b *bench) refresh(ctx context.Context) ([]Record, error) {
	put := func(key string, data []byte) error {
		_, err := b.srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	segs := func(n int) []string {
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf("_%d", i))
		}
		return s
	}
	seed := uint64(b.cfg.seed)
	files3, err := osremote.ShardFiles(segs(8), 3, refreshScale, seed)
	if err != nil {
		return nil, err
	}
	files4, err := osremote.ShardFiles(segs(9), 4, refreshScale, seed)
	if err != nil {
		return nil, err
	}
	var recs []Record
	var errs []error
	for _, sys := range []struct {
		name   string
		layout string
	}{{sysSegfsOpenSearch, "opensearch"}, {sysSegfs, "plain"}} {
		var write func(files map[string][]byte, gen int64) error
		var mo mountOpts
		switch sys.layout {
		case "opensearch":
			o := osremote.Options{Base: refreshOSBase, IndexUUID: refreshUUID, PathType: layout.Fixed, Version: 2, Seed: seed}
			r := osremote.New(put, o)
			write = func(files map[string][]byte, gen int64) error { _, err := r.Upload(files, 1, gen); return err }
			mo = mountOpts{prefix: refreshOSBase, extra: []string{"--layout", "opensearch", "--index-uuid", refreshUUID, "--shard", "0"}}
		default:
			uploaded := map[string][]byte{}
			// As a writer uploads a commit: new files, then segments_N,
			// then the old segments_N deleted.
			write = func(files map[string][]byte, gen int64) error {
				names := slices.Sorted(func(yield func(string) bool) {
					for n := range files {
						if !yield(n) {
							return
						}
					}
				})
				slices.SortStableFunc(names, func(a, b string) int {
					return boolInt(strings.HasPrefix(a, "segments_")) - boolInt(strings.HasPrefix(b, "segments_"))
				})
				for _, n := range names {
					if old, ok := uploaded[n]; ok && slices.Equal(old, files[n]) {
						continue // a segment's files never change
					}
					if err := put(refreshPlainPrefix+"/"+n, files[n]); err != nil {
						return err
					}
					uploaded[n] = files[n]
				}
				for n := range uploaded {
					if _, ok := files[n]; !ok {
						if err := b.srv.Delete(ctx, bucket, refreshPlainPrefix+"/"+n); err != nil {
							return err
						}
						delete(uploaded, n)
					}
				}
				return nil
			}
			mo = mountOpts{prefix: refreshPlainPrefix}
		}
		if err := write(files3, 3); err != nil {
			return recs, err
		}
		cache, err := b.freshCache()
		if err != nil {
			return recs, err
		}
		mo.cacheDir = cache
		mo.extra = append(mo.extra, "--refresh", refreshInterval.String())
		idle := Record{System: sys.name, Case: caseRefreshIdle,
			What: fmt.Sprintf("%s layout, %d files, %s refreshes of an unchanged store", sys.layout, len(files3), refreshInterval)}
		seg := Record{System: sys.name, Case: caseRefreshSegment,
			What: fmt.Sprintf("%s layout: one new segment and commit uploaded, until its segments_N is visible through the mount", sys.layout)}
		res, err := b.mounted(ctx, mo, func(ctx context.Context, m *harness.Mount, mnt string) error {
			// The mount's own fetches (the shard's segment prefetch) are
			// not a refresh's.
			if sys.layout == "opensearch" {
				if err := waitIdle(ctx, m); err != nil {
					return err
				}
			}
			first, err := waitRefreshes(ctx, m, 1)
			if err != nil {
				return err
			}
			last, err := waitRefreshes(ctx, m, first["refreshes"]+refreshIdleRounds)
			if err != nil {
				return err
			}
			idle.Refresh = refreshCost(first, last)
			idle.Seconds = float64(refreshInterval) / float64(time.Second)

			before, err := m.Stats(ctx)
			if err != nil {
				return err
			}
			commit := layout.SegmentsFileName(4)
			start := time.Now()
			if err := write(files4, 4); err != nil {
				return err
			}
			uploaded := time.Now()
			if err := waitVisible(ctx, filepath.Join(mnt, commit)); err != nil {
				return err
			}
			visible := time.Now()
			after, err := m.Stats(ctx)
			if err != nil {
				return err
			}
			// Every file of the new commit reads as uploaded (segments_N of
			// the OpenSearch layout is the metadata's SegmentInfos, not
			// the uploaded blob).
			for n, data := range files4 {
				if strings.HasPrefix(n, "segments_") {
					continue
				}
				if got, err := os.ReadFile(filepath.Join(mnt, n)); err != nil || !slices.Equal(got, data) {
					return fmt.Errorf("%s through the mount after the refresh: %d bytes, %v", n, len(got), err)
				}
			}
			seg.Seconds = visible.Sub(uploaded).Seconds()
			seg.Refresh = refreshCost(before, after)
			seg.Refresh.RangeGets = after["ranges_prefetched"] - before["ranges_prefetched"]
			seg.Refresh.RangeBytes = after["range_tier_bytes"] - before["range_tier_bytes"]
			seg.Verified = true
			seg.Note = fmt.Sprintf("upload of the segment and commit %.2f s; visible %.2f s after its end (refreshes every %s); per refresh until then: %.1f lists, %.1f HEADs, %.1f GETs (%.0f bytes); the new commit's open prefetch had started %d range GETs (%d bytes in)",
				uploaded.Sub(start).Seconds(), seg.Seconds, refreshInterval, seg.Refresh.Lists, seg.Refresh.Heads, seg.Refresh.Gets, seg.Refresh.GetBytes, seg.Refresh.RangeGets, seg.Refresh.RangeBytes)
			idle.Note = fmt.Sprintf("per refresh: %.1f lists, %.1f HEADs, %.1f GETs (%.0f bytes), over %d refreshes",
				idle.Refresh.Lists, idle.Refresh.Heads, idle.Refresh.Gets, idle.Refresh.GetBytes, idle.Refresh.Refreshes)
			return nil
		})
		os.RemoveAll(cache)
		if err != nil {
			recs = append(recs, mustFail(idle, err))
			if ctx.Err() != nil || !b.cfg.keepGoing {
				return recs, err
			}
			errs = append(errs, err)
			continue
		}
		seg.Resources = &res
		recs = append(recs, idle, seg)
	}
	return recs, errors.Join(errs...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// refreshCost is the requests per refresh between two snapshots of a
// mount's stats.
func refreshCost(before, after map[string]int64) *RefreshCost {
	n := after["refreshes"] - before["refreshes"]
	per := func(k string) float64 {
		if n == 0 {
			return 0
		}
		return float64(after[k]-before[k]) / float64(n)
	}
	return &RefreshCost{Refreshes: n, Lists: per("lists"), Heads: per("heads"), Gets: per("gets"), GetBytes: per("get_bytes")}
}

// waitRefreshes waits until the mount has made n refreshes (one failed
// fails the case) and returns its stats then.
func waitRefreshes(ctx context.Context, m *harness.Mount, n int64) (map[string]int64, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := m.Stats(ctx)
		if err != nil {
			return nil, err
		}
		if s["refresh_failures"] > 0 {
			return nil, fmt.Errorf("a refresh failed (refresh_failures %d)", s["refresh_failures"])
		}
		if s["refreshes"] >= n {
			return s, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d refreshes after a minute, want %d", s["refreshes"], n)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitVisible waits until p can be stat'ed, polling every 2 ms.
func waitVisible(ctx context.Context, p string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not visible a minute after its upload", path.Base(p))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}
