package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// Resources are the peaks of a segfs process during one case, and what it
// fetched against what it served.
type Resources struct {
	PeakGoroutines int64 `json:"peak_goroutines"`
	PeakThreads    int64 `json:"peak_threads"`
	// PeakRSSBytes is the larger of the sampled VmRSS peak and the
	// kernel's VmHWM (the process was started fresh for the case).
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
	PeakHeap     int64 `json:"peak_heap_bytes"`
	Samples      int   `json:"samples"`
	// Deltas of segfs's counters over the case.
	Gets      int64 `json:"gets"`
	GetBytes  int64 `json:"get_bytes"`
	ReadBytes int64 `json:"read_bytes"` // bytes segfs returned to reads
	// CPUSeconds is the CPU time (user and system, all threads) segfs
	// used over the case.
	CPUSeconds float64 `json:"cpu_seconds"`
	// Counters holds the delta of every counter in /stats over the case
	// (the gauges among them are differences of two readings).
	Counters map[string]int64 `json:"counter_deltas,omitempty"`
	// The machine over the case, from /proc/stat: CPU seconds busy (user,
	// nice, system, irq, softirq, and steal: time the hypervisor gave to
	// others, which a process's own CPU time may include) summed over its
	// CPUs, and the seconds it had (wall time times CPUs).
	MachineCPUSeconds float64 `json:"machine_cpu_seconds,omitempty"`
	MachineSeconds    float64 `json:"machine_seconds,omitempty"`
	// CPU seconds of the S3 server and of the bench process itself (the
	// shaping proxy and the reads the bench times run in it) over the case.
	ServerCPUSeconds float64 `json:"server_cpu_seconds,omitempty"`
	BenchCPUSeconds  float64 `json:"bench_cpu_seconds,omitempty"`
	// Fetches is the fetch pool at every sample: how full it was over
	// the case, to tell a case that waits on the remote from one that
	// leaves connections idle.
	Fetches []FetchSample `json:"fetch_timeline,omitempty"`
	// MeanRunning is the mean of Fetches' Running: the GETs in flight on
	// average, against the pool's Workers.
	MeanRunning float64 `json:"mean_running_fetches,omitempty"`
	Workers     int64   `json:"workers,omitempty"`
}

// FetchSample is one reading of the fetch pool, Ms after the sampler
// started: GETs running and waiting (all priorities), and so far in the
// case the bytes fetched, the bytes served to readers, and the part reads
// served from the disk cache and from parts held for a sequential reader.
type FetchSample struct {
	Ms       int64 `json:"ms"`
	Running  int64 `json:"running"`
	Queued   int64 `json:"queued"`
	Fetched  int64 `json:"fetched_bytes"`
	Served   int64 `json:"served_bytes"`
	DiskHits int64 `json:"disk_hits"`
	HeldHits int64 `json:"held_hits"`
}

// statsFunc fetches the mount's counters (harness.Mount.Stats).
type statsFunc func(context.Context) (map[string]int64, error)

// sampler polls a segfs process's /proc status and /stats on a ticker
// until Stop. Its peaks are guarded by mu.
type sampler struct {
	// Immutable after startSampler.
	pid    int
	stats  statsFunc
	cancel context.CancelFunc
	done   chan struct{}
	before map[string]int64
	cpu0   time.Duration // -1 if it could not be read
	start  time.Time
	others procCPUs   // the server and the bench at the start
	mach0  machineCPU // zero if /proc/stat could not be read

	mu      sync.Mutex
	res     Resources // guarded by mu
	lastErr error     // guarded by mu
}

// startSampler takes a first reading of the counters and starts polling
// every interval. Stop must be called.
func startSampler(ctx context.Context, pid, serverPid int, stats statsFunc, interval time.Duration) (*sampler, error) {
	before, err := stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("sampler: %w", err)
	}
	cpu0, err := procCPU(pid)
	if err != nil {
		cpu0 = -1
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{pid: pid, stats: stats, cancel: cancel, done: make(chan struct{}), before: before, cpu0: cpu0, start: time.Now(),
		others: readProcCPUs(serverPid, os.Getpid())}
	s.mach0, _ = readMachineCPU()
	s.sample(ctx)
	go s.loop(ctx, interval)
	return s, nil
}

func (s *sampler) loop(ctx context.Context, interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sample(ctx)
		}
	}
}

func (s *sampler) sample(ctx context.Context) {
	st, perr := harness.ReadProcStatus(s.pid)
	callCtx, cancel := context.WithTimeout(ctx, time.Second)
	stats, serr := s.stats(callCtx)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if perr == nil {
		s.res.PeakThreads = max(s.res.PeakThreads, st.Threads)
		s.res.PeakRSSBytes = max(s.res.PeakRSSBytes, st.VmRSS, st.VmHWM)
	} else {
		s.lastErr = perr
	}
	if serr == nil {
		s.res.PeakGoroutines = max(s.res.PeakGoroutines, stats["goroutines"])
		s.res.PeakHeap = max(s.res.PeakHeap, stats["heap_bytes"])
		s.res.Workers = stats["workers"]
		s.res.Fetches = append(s.res.Fetches, FetchSample{
			Ms:       time.Since(s.start).Milliseconds(),
			Running:  stats["running_demand"] + stats["running_readahead"] + stats["running_background"],
			Queued:   stats["queued_demand"] + stats["queued_readahead"] + stats["queued_background"],
			Fetched:  stats["get_bytes"] - s.before["get_bytes"],
			Served:   stats["read_bytes"] - s.before["read_bytes"],
			DiskHits: stats["disk_hits"] - s.before["disk_hits"],
			HeldHits: stats["held_hits"] - s.before["held_hits"],
		})
	} else if ctx.Err() == nil {
		s.lastErr = serr
	}
	if perr == nil && serr == nil {
		s.res.Samples++
	}
}

// Stop ends the polling, takes a last reading and returns the peaks and
// counter deltas. An error means the last counters could not be read; the
// peaks are still returned.
func (s *sampler) Stop(ctx context.Context) (Resources, error) {
	s.cancel()
	<-s.done
	s.sample(ctx)
	after, err := s.stats(ctx)
	cpu1, cerr := procCPU(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.res
	if cerr == nil && s.cpu0 >= 0 {
		res.CPUSeconds = (cpu1 - s.cpu0).Seconds()
	}
	if m1, err := readMachineCPU(); err == nil && s.mach0.total > 0 {
		res.MachineCPUSeconds = float64(m1.busy-s.mach0.busy) / clockTicks
		res.MachineSeconds = float64(m1.total-s.mach0.total) / clockTicks
	}
	others := readProcCPUs(s.others.pids[0], s.others.pids[1])
	res.ServerCPUSeconds = others.delta(s.others, 0)
	res.BenchCPUSeconds = others.delta(s.others, 1)
	if err != nil {
		return res, fmt.Errorf("sampler: %w", err)
	}
	res.Counters = make(map[string]int64, len(after))
	for k, v := range after {
		res.Counters[k] = v - s.before[k]
	}
	if n := len(res.Fetches); n > 0 {
		var sum int64
		for _, f := range res.Fetches {
			sum += f.Running
		}
		res.MeanRunning = float64(sum) / float64(n)
	}
	res.Gets = after["gets"] - s.before["gets"]
	res.GetBytes = after["get_bytes"] - s.before["get_bytes"]
	res.ReadBytes = after["read_bytes"] - s.before["read_bytes"]
	if res.Samples == 0 && s.lastErr != nil {
		return res, fmt.Errorf("sampler: no sample succeeded: %w", s.lastErr)
	}
	return res, nil
}

// clockTicks is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// which Linux fixes at 100 for user space whatever the kernel's HZ.
const clockTicks = 100

// parseProcCPU returns utime+stime (every thread of the process, including
// those that exited) from a /proc/PID/stat line (proc(5) fields 14 and 15).
// The command name, field 2, is in parentheses and may hold spaces and
// parentheses itself, so fields are counted from the last ')'.
func parseProcCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// procCPUs holds the CPU time of two processes, -1 where unread.
type procCPUs struct {
	pids [2]int
	cpu  [2]time.Duration
}

func readProcCPUs(a, b int) procCPUs {
	p := procCPUs{pids: [2]int{a, b}}
	for i, pid := range p.pids {
		d, err := procCPU(pid)
		if err != nil || pid <= 0 {
			d = -1
		}
		p.cpu[i] = d
	}
	return p
}

// delta returns process i's CPU seconds since before, 0 if unread.
func (p procCPUs) delta(before procCPUs, i int) float64 {
	if p.cpu[i] < 0 || before.cpu[i] < 0 {
		return 0
	}
	return (p.cpu[i] - before.cpu[i]).Seconds()
}

// machineCPU is the first line of /proc/stat in clock ticks: the time
// every CPU spent busy (user, nice, system, irq, softirq, steal) and in
// all.
type machineCPU struct{ busy, total int64 }

func readMachineCPU() (machineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}, err
	}
	return parseMachineCPU(string(b))
}

// parseMachineCPU reads the "cpu" line of /proc/stat (proc(5)): user nice
// system idle iowait irq softirq steal ...; guest time is in user already.
func parseMachineCPU(stat string) (machineCPU, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}, fmt.Errorf("proc stat: no cpu line in %q", line)
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return machineCPU{}, fmt.Errorf("proc stat: %w", err)
		}
		v[i] = n
	}
	m := machineCPU{busy: v[0] + v[1] + v[2] + v[5] + v[6] + v[7]}
	for _, n := range v {
		m.total += n
	}
	return m, nil
}

// procCPU returns the CPU time (user and system) process pid has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcCPU(string(b))
}
