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
// with remounts, so that `make soak` cannot rot unnoticed. The run goes
// round the mount modes: a kill -9 and a remount over the dead mount, a
// --passthrough mount and a --prefetch all mount, every byte checked.
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
	if n := res.ops["kill -9 + remount"]; n == 0 {
		t.Errorf("no kill -9 and remount in the run")
	}
	for _, md := range modes {
		if res.modes[md.name] == 0 {
			t.Errorf("no mount in mode %q (%v); mounts by mode: %v", md.name, md.args, res.modes)
		}
	}
	if res.passthroughOff > 0 {
		t.Logf("passthrough unavailable here: the --passthrough mounts served their reads through segfs")
	}
	if h := res.faults.Requests["head"]; h != 0 {
		t.Errorf("segfs sent %d HEAD requests; it sends none", h)
	}
}

func TestRotation(t *testing.T) {
	// The first remounts go round every mode, the first of them after
	// kill -9; the kills then move round the modes.
	if got := len(modes); got != rotationRemounts+1 || !crashBefore(1) {
		t.Fatalf("%d modes, %d remounts to go round, first after kill -9: %v", got, rotationRemounts, crashBefore(1))
	}
	killed, unmounted := map[string]bool{}, map[string]bool{}
	for n := 1; n <= 2*len(modes); n++ {
		if name := modes[(n-1)%len(modes)].name; crashBefore(n) {
			killed[name] = true
		} else {
			unmounted[name] = true
		}
	}
	for _, md := range modes {
		if !killed[md.name] || !unmounted[md.name] {
			t.Errorf("mode %q: killed %v, unmounted %v within %d remounts", md.name, killed[md.name], unmounted[md.name], 2*len(modes))
		}
	}
	c, err := parseFlags([]string{"--duration", "8s", "--remount-every", "75s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.remountInterval(); got*time.Duration(rotationRemounts) >= c.duration {
		t.Errorf("remount every %v in an %v run: the rotation does not fit", got, c.duration)
	}
}
