package reader

import (
	"testing"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/stats"
)

// mustNew is New for tests: a config error fails the test.
func mustNew(t testing.TB, store fetcher.Store, pc Cache, sched *prefetch.Scheduler, cfg Config) *Reader {
	t.Helper()
	r, err := New(store, pc, sched, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newTestFrames returns a FrameReader over r with cfg, as New builds its
// own; its counters are r's.
func newTestFrames(r *Reader, cfg FrameConfig) (*FrameReader, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return newFrameReader(r, cfg)
}

// prefetchOpen runs what --prefetch open and all run at the open of obj,
// alone in its directory.
func prefetchOpen(r *Reader, obj fetcher.Object) {
	r.runPlan(prefetch.OnOpen{}.Opened(&prefetch.Dir{Files: []fetcher.Object{obj}}, 0, r.cfg.PartSize))
}

// prefetchSmallAfter runs what --prefetch open runs for the small files
// after an opened one: objs follow it in its directory.
func prefetchSmallAfter(r *Reader, objs []fetcher.Object) {
	dir := &prefetch.Dir{Files: append([]fetcher.Object{{Key: "opened"}}, objs...)}
	r.runPlan(prefetch.SmallAfter{N: prefetch.SmallAhead}.Opened(dir, 0, r.cfg.PartSize))
}

// sweep runs what --prefetch all runs once the mount serves objs.
func sweep(r *Reader, objs []fetcher.Object) {
	r.runPlan(prefetch.Sweep{}.Mounted(objs, r.cfg.PartSize))
}

// counters returns st's values by their /stats names, to print.
func counters(st *Stats) map[string]int64 {
	m := map[string]int64{}
	stats.Collect(m, st)
	return m
}
