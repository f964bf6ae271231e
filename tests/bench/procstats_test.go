package main

import (
	"context"
	"errors"
	"math"
	"os"
	"sync"
	"testing"
	"time"
)

// fakeStats serves counters that the test moves forward.
type fakeStats struct {
	mu    sync.Mutex
	stats map[string]int64
	err   error
}

func (f *fakeStats) get(ctx context.Context) (map[string]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	out := make(map[string]int64, len(f.stats))
	for k, v := range f.stats {
		out[k] = v
	}
	return out, nil
}

func (f *fakeStats) set(k string, v int64) {
	f.mu.Lock()
	f.stats[k] = v
	f.mu.Unlock()
}

func TestSamplerPeaksAndDeltas(t *testing.T) {
	f := &fakeStats{stats: map[string]int64{"gets": 5, "get_bytes": 100, "read_bytes": 40, "goroutines": 10, "heap_bytes": 1}}
	s, err := startSampler(context.Background(), os.Getpid(), os.Getpid(), f.get, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	burnCPU(300 * time.Millisecond) // shows in the machine's and this process's CPU
	// Stop takes a last sample, so these count even if no tick came.
	f.set("gets", 7)
	f.set("get_bytes", 1100)
	f.set("read_bytes", 540)
	f.set("goroutines", 99)
	res, err := s.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.PeakGoroutines != 99 || res.Gets != 2 || res.GetBytes != 1000 || res.ReadBytes != 500 {
		t.Errorf("resources = %+v", res)
	}
	if res.PeakThreads < 1 || res.PeakRSSBytes <= 0 || res.Samples < 2 {
		t.Errorf("no process figures: %+v", res)
	}
	// The server's and the bench's CPU are this one process's, read one
	// after the other at each sample: they may differ by what it burnt
	// between the two reads (a clock tick or so), not more.
	if res.MachineSeconds <= 0 || res.MachineCPUSeconds <= 0 || res.BenchCPUSeconds <= 0 || math.Abs(res.ServerCPUSeconds-res.BenchCPUSeconds) > 0.05 {
		t.Errorf("CPU figures: machine %.2f of %.2f s, bench %.2f s, server (this process too) %.2f s",
			res.MachineCPUSeconds, res.MachineSeconds, res.BenchCPUSeconds, res.ServerCPUSeconds)
	}
}

// burnCPU keeps one CPU busy for about d of its own time.
func burnCPU(d time.Duration) {
	start, _ := procCPU(os.Getpid())
	x := 0
	for {
		for i := range 1 << 20 {
			x += i
		}
		if now, err := procCPU(os.Getpid()); err != nil || now-start >= d || x == 0 {
			return
		}
	}
}

func TestParseMachineCPU(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  100 2 30 400 50 6 7 80 0 0\ncpu0 50 1 15 200 25 3 3 40 0 0\nintr 1\n"
	got, err := parseMachineCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := (machineCPU{busy: 100 + 2 + 30 + 6 + 7 + 80, total: 100 + 2 + 30 + 400 + 50 + 6 + 7 + 80}); got != want {
		t.Errorf("parseMachineCPU = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 x 4 5 6 7 8\n", "cpu 1 2 3\n"} {
		if _, err := parseMachineCPU(bad); err == nil {
			t.Errorf("parseMachineCPU(%q) succeeded", bad)
		}
	}
}

func TestSamplerFailsWithoutStats(t *testing.T) {
	f := &fakeStats{err: errors.New("connection refused")}
	if _, err := startSampler(context.Background(), os.Getpid(), os.Getpid(), f.get, time.Millisecond); err == nil {
		t.Fatal("startSampler with failing stats succeeded")
	}
}

func TestParseProcCPU(t *testing.T) {
	// A real line with a command name holding ") (" and spaces; utime 250
	// and stime 37 ticks.
	line := "4242 (seg fs) (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 37 0 0 20 0 9 0 100 1000000 500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	got, err := parseProcCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2870 * time.Millisecond; got != want {
		t.Errorf("parseProcCPU = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "4242 no parens S 1", "4242 (x) S 1 2 3"} {
		if _, err := parseProcCPU(bad); err == nil {
			t.Errorf("parseProcCPU(%q) succeeded", bad)
		}
	}
	if d, err := procCPU(os.Getpid()); err != nil || d < 0 {
		t.Errorf("procCPU(self) = %v, %v", d, err)
	}
}
