package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/ops"
)

func TestRelToMount(t *testing.T) {
	mnt := t.TempDir()
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		filepath.Join(mnt, "d"): "d",
		mnt:                     ".",
		"d/x":                   "d/x", // not in the working directory: a path in the mount
	} {
		got, err := relToMount(mnt, in)
		if err != nil || got != want {
			t.Errorf("relToMount(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := relToMount(mnt, "/etc/passwd"); err == nil {
		t.Error("a path outside the mount was accepted")
	}
}

// A status report lists the directories a repository mount's files are
// summed by.
func TestPrintStatusDirs(t *testing.T) {
	want := []ops.DirStatus{
		{Name: "u1/1", Files: 1, Size: 500, Cached: 250, Fraction: 0.5},
		{Name: "u1/0", Files: 2, Size: 110, Cached: 100, Fraction: 100.0 / 110},
	}
	var b strings.Builder
	printStatus(&b, &ops.StatusReport{Dirs: want, Counters: map[string]int64{}})
	if !strings.Contains(b.String(), "50.0%") || !strings.Contains(b.String(), "u1/1/") {
		t.Errorf("the report does not show the directories:\n%s", b.String())
	}
}

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
