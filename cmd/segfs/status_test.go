package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
