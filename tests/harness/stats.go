package harness

import (
	"context"
	"os"
	"testing"
	"time"
)

// HangGuard bounds every wait on a condition segfs should reach by itself.
// It only turns a hang into a failure; it is never a performance bound.
const HangGuard = 60 * time.Second

// MustStats returns the mount's counters or ends the test, showing the end
// of the segfs log.
func MustStats(tb testing.TB, m *Mount) map[string]int64 {
	tb.Helper()
	s, err := m.Stats(context.Background())
	if err != nil {
		log := m.Log()
		if len(log) > 4096 {
			log = "…" + tail(log, 4096)
		}
		tb.Fatalf("%v\nsegfs log:\n%s", err, log)
	}
	return s
}

// WaitStats polls the mount's counters until cond holds and returns them.
// After HangGuard it fails the test, naming what it waited for.
func WaitStats(tb testing.TB, m *Mount, what string, cond func(map[string]int64) bool) map[string]int64 {
	tb.Helper()
	deadline := time.Now().Add(HangGuard)
	for {
		s := MustStats(tb, m)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			tb.Fatalf("still waiting for %s after %v; stats: %v", what, HangGuard, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Idle reports whether, by the counters s, no part fetch is queued or
// running.
func Idle(s map[string]int64) bool {
	return s["inflight_parts"] == 0 &&
		s["queued_demand"]+s["queued_readahead"]+s["queued_background"] == 0 &&
		s["running_demand"]+s["running_readahead"]+s["running_background"] == 0
}

// WaitIdle waits until no fetch is queued or running and returns the
// counters then.
func WaitIdle(tb testing.TB, m *Mount) map[string]int64 {
	tb.Helper()
	return WaitStats(tb, m, "no fetch queued or running", Idle)
}

// DropPageCache asks the kernel to drop clean pages, so that later reads
// reach segfs rather than the page cache. Best effort: without root it
// only logs.
func DropPageCache(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Log("not root: page cache not dropped")
		return
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		tb.Logf("drop_caches: %v (continuing)", err)
	}
}

// Delta returns how much counter k of a mount's /stats grew from before
// to after.
func Delta(before, after map[string]int64, k string) int64 { return after[k] - before[k] }
