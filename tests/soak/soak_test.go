package main

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.duration != 10*time.Minute || c.rate != 64e6 || c.readers == 0 {
		t.Errorf("defaults: %+v", c)
	}
	if c, err = parseFlags([]string{"--duration", "2m", "--rate", "0"}); err != nil || c.duration != 2*time.Minute || c.rate != 0 {
		t.Errorf("--duration 2m --rate 0: %+v, %v", c, err)
	}
	for _, bad := range [][]string{
		{"--duration", "0s"}, {"--fault-rate", "0.5"}, {"--copiers", "0", "--readers", "0", "--openers", "0"},
		{"--scale", "10"}, {"extra"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

func TestReadFailures(t *testing.T) {
	log := "time=x level=INFO msg=mounted\n" +
		`time=y level=WARN msg="read failed" op=read key=a/b errno="input/output error" err="boom"` + "\n"
	got := readFailures(log)
	if len(got) != 1 || !strings.HasPrefix(got[0], "key=a/b") {
		t.Errorf("readFailures = %q", got)
	}
}

// TestReportVerdict checks that each kind of finding fails the run, and
// that failed reads alone do not.
func TestReportVerdict(t *testing.T) {
	for name, spoil := range map[string]func(r *results){
		"nothing read":   func(r *results) { r.reads = 0 },
		"wrong byte":     func(r *results) { r.wrong("x") },
		"hang":           func(r *results) { r.hang("x") },
		"unmount failed": func(r *results) { r.unmountFailed(context.Canceled) },
		"leak":           func(r *results) { r.leak("x") },
		"bad cache part": func(r *results) { r.cacheBad = append(r.cacheBad, "x") },
	} {
		r := newResults()
		r.verified(10)
		r.failed("pread", "f", 0, syscall.EIO)
		if !r.passed() {
			t.Fatalf("a run with only a failed read did not pass")
		}
		spoil(r)
		if r.passed() {
			t.Errorf("%s: the run passed", name)
		}
		var out bytes.Buffer
		r.print(&out)
		if !strings.Contains(out.String(), "result: FAIL") || !strings.Contains(out.String(), "EIO 1") {
			t.Errorf("%s: report:\n%s", name, out.String())
		}
	}
}

// TestSoakSmoke runs the whole soak for a few seconds on a small shard,
// with remounts, so that `make soak` cannot rot unnoticed.
func TestSoakSmoke(t *testing.T) {
	harness.RequireBinaries(t)
	cfg, err := parseFlags([]string{"--duration", "8s", "--scale", "8000000", "--remount-every", "3s",
		"--cache-size", "4MiB", "--part-size", "256KiB", "--fault-rate", "0.05", "--shard-dir", t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := run(context.Background(), cfg, &out)
	t.Logf("soak output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !res.passed() {
		t.Errorf("the smoke soak failed")
	}
	if res.faults.TotalFaults() == 0 || res.mounts < 2 {
		t.Errorf("%d faults injected over %d mounts; want faults and remounts", res.faults.TotalFaults(), res.mounts)
	}
}
