package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// dropCaches writes back dirty pages and drops the page cache, dentries
// and inodes (`sync; echo 3 > /proc/sys/vm/drop_caches`). It needs root.
func dropCaches() error {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		return fmt.Errorf("drop page cache: %w", err)
	}
	return nil
}

// readAll reads the files at paths into io.Discard, one after another. The
// bench uses it to put the S3 server's own files back into the page cache
// after dropping it: the simulated remote is the proxy's profile, not this
// machine's disk.
func readAll(ctx context.Context, paths []string) error {
	buf := make([]byte, 1<<20)
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		f.Close()
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
	}
	return nil
}

// Machine describes where a run happened.
type Machine struct {
	CPUs     int    `json:"cpus"`
	MemBytes int64  `json:"mem_bytes"`
	Kernel   string `json:"kernel"`
	CPUModel string `json:"cpu_model,omitempty"`
	Go       string `json:"go"`
	// Load averages (1, 5, 15 minutes) at the start and the end of the
	// run: other work on the machine skews every figure.
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadAvg()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	m.MemBytes, _ = memTotal()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return m
}

func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fs := strings.Fields(rest)
			if len(fs) > 0 {
				kb, err := strconv.ParseInt(fs[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("meminfo: no MemTotal")
}
