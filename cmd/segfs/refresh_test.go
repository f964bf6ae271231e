package main

import (
	"strings"
	"testing"
	"time"
)

func TestViewLine(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		m    map[string]int64
		want string
	}{
		{map[string]int64{}, "as listed at mount (no refresh: --refresh or SIGHUP)"},
		{map[string]int64{"refresh_failures": 2}, "as listed at mount; 0 refreshes, 2 failed; 0 files added, 0 changed, 0 removed"},
		{map[string]int64{"refreshes": 3, "view_listed_timestamp_ns": now.Add(-90 * time.Second).UnixNano(), "files_added": 4, "files_changed": 1, "files_removed": 2},
			"listed 1m30s ago; 3 refreshes, 0 failed; 4 files added, 1 changed, 2 removed"},
	} {
		if got := viewLine(c.m, now); got != c.want {
			t.Errorf("viewLine(%v) = %q, want %q", c.m, got, c.want)
		}
	}
	if !strings.Contains(viewLine(map[string]int64{"refreshes": 1, "view_listed_timestamp_ns": now.UnixNano()}, now), "listed 0s ago") {
		t.Errorf("a view listed now")
	}
}
