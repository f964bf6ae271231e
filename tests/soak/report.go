package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segfs/segfs/tests/faults"
)

// maxListed bounds how many wrong reads, hangs and errors the report lists
// one by one; all are counted.
const maxListed = 20

// results is what a run found. Its methods may be called concurrently.
type results struct {
	mu       sync.Mutex
	ops      map[string]int64 // completed operations by kind
	bytes    int64            // bytes read and verified
	reads    int64            // reads verified byte-exact
	failedBy map[string]int64 // failed operations by errno name
	failures []string         // the first failed operations
	wrongN   int64
	wrongs   []string // the first wrong reads
	hangs    []string
	unmounts []string // unmounts that did not end cleanly
	fatals   []error  // errors that stopped the run
	mounts   int
	modes    map[string]int64 // mounts by mode
	// passthroughOff counts the --passthrough mounts where segfs found
	// passthrough unavailable (kernel, privileges) and served every read.
	passthroughOff int
	segfs          map[string]int64 // segfs's counters summed over the mounts
	peaks          peaks
	// idleGoroutines are segfs's goroutines at rest before each unmount.
	idleGoroutines []int64
	faults         faults.Stats
	leaks          []string
	segfsFails     []string // segfs's "read failed" log lines, the first few
	segfsFailN     int64
	cacheParts     int
	cacheWhole     int // whole-object files checked
	// Goroutines of this process before anything started and once all
	// was closed.
	goroutinesStart, goroutinesEnd int
	cacheBad                       []string
	duration                       time.Duration
}

// peaks are the largest figures sampled from any segfs process.
type peaks struct {
	goroutines, threads, rss, heap int64
	samples                        int
}

func newResults() *results {
	return &results{ops: map[string]int64{}, failedBy: map[string]int64{}, segfs: map[string]int64{}, modes: map[string]int64{}}
}

func (r *results) op(kind string) {
	r.mu.Lock()
	r.ops[kind]++
	r.mu.Unlock()
}

func (r *results) verified(n int) {
	r.mu.Lock()
	r.reads++
	r.bytes += int64(n)
	r.mu.Unlock()
}

// failed records an operation that failed with an error (an errno, if
// the error holds one).
func (r *results) failed(kind, name string, off int64, err error) {
	what := "no errno"
	var errno syscall.Errno
	if errors.As(err, &errno) {
		what = errnoName(errno)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failedBy[what]++
	if len(r.failures) < maxListed {
		r.failures = append(r.failures, fmt.Sprintf("%s %s at %d: %v", kind, name, off, err))
	}
}

func (r *results) wrong(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wrongN++
	if len(r.wrongs) < maxListed {
		r.wrongs = append(r.wrongs, s)
	}
}

func (r *results) hang(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hangs = append(r.hangs, s)
}

func (r *results) unmountFailed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unmounts = append(r.unmounts, err.Error())
}

func (r *results) fatal(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fatals = append(r.fatals, err)
}

// addMount records a mount in a mode; passthroughOff says it asked for
// passthrough and segfs found it unavailable.
func (r *results) addMount(mode string, passthroughOff bool) {
	r.mu.Lock()
	r.mounts++
	r.modes[mode]++
	if passthroughOff {
		r.passthroughOff++
	}
	r.mu.Unlock()
}

// summedCounters are the segfs counters the report sums over mounts.
var summedCounters = []string{"reads", "read_bytes", "gets", "get_bytes", "retries", "read_errors", "fetch_errors", "changed",
	"disk_hits", "memory_hits", "held_hits", "fill_paused", "cache_puts", "cache_evictions", "cache_corrupt_removed",
	"promotions", "passthrough_opens", "bad_whole_objects"}

// mountDone adds a mount's last counters (nil if unknown) to the sums,
// and its goroutines at rest to the list.
func (r *results) mountDone(st map[string]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st == nil {
		r.segfs["mounts without final counters"]++
		return
	}
	if st["idle"] == 1 {
		r.idleGoroutines = append(r.idleGoroutines, st["goroutines"])
	}
	for _, k := range summedCounters {
		r.segfs[k] += st[k]
	}
}

func (r *results) sample(goroutines, threads, rss, heap int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &r.peaks
	p.goroutines, p.threads = max(p.goroutines, goroutines), max(p.threads, threads)
	p.rss, p.heap = max(p.rss, rss), max(p.heap, heap)
	p.samples++
}

// segfsLog records the read failures a mount's log reports.
func (r *results) segfsLog(log string) {
	lines := readFailures(log)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.segfsFailN += int64(len(lines))
	for _, l := range lines {
		if len(r.segfsFails) < maxListed {
			r.segfsFails = append(r.segfsFails, l)
		}
	}
}

func (r *results) leak(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leaks = append(r.leaks, s)
}

// cacheChecked records one cache file compared with its object: counted
// in *n, and its complaint, if msg is not empty, among the bad ones.
func (r *results) cacheChecked(rel, msg string, n *int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*n++
	if msg != "" {
		r.cacheBad = append(r.cacheBad, rel+": "+msg)
	}
}

// passed reports whether the run found nothing wrong.
func (r *results) passed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrongN == 0 && len(r.hangs) == 0 && len(r.unmounts) == 0 && len(r.fatals) == 0 &&
		len(r.leaks) == 0 && len(r.cacheBad) == 0 && r.reads > 0
}

// print writes the report.
func (r *results) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pass := r.wrongN == 0 && len(r.hangs) == 0 && len(r.unmounts) == 0 && len(r.fatals) == 0 &&
		len(r.leaks) == 0 && len(r.cacheBad) == 0 && r.reads > 0
	verdict := "PASS"
	if !pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "\nresult: %s after %v\n", verdict, r.duration.Round(time.Second))
	var total int64
	for _, n := range r.ops {
		total += n
	}
	fmt.Fprintf(w, "  operations       %d: %s\n", total, countList(r.ops))
	off := ""
	if r.passthroughOff > 0 {
		off = fmt.Sprintf("; passthrough unavailable in %d, segfs served their reads", r.passthroughOff)
	}
	fmt.Fprintf(w, "  mounts           %d: %s%s\n", r.mounts, countList(r.modes), off)
	fmt.Fprintf(w, "  bytes read       %d (%.2f GB), all compared with the shard\n", r.bytes, float64(r.bytes)/1e9)
	fmt.Fprintf(w, "  reads verified   %d byte-exact\n", r.reads)
	fmt.Fprintf(w, "  wrong bytes      %d reads\n", r.wrongN)
	for _, s := range r.wrongs {
		fmt.Fprintf(w, "                   %s\n", s)
	}
	var failed int64
	for _, n := range r.failedBy {
		failed += n
	}
	fmt.Fprintf(w, "  reads failed     %d%s\n", failed, paren(countList(r.failedBy)))
	for _, s := range r.failures {
		fmt.Fprintf(w, "                   %s\n", s)
	}
	fmt.Fprintf(w, "  segfs said       %d \"read failed\" log lines\n", r.segfsFailN)
	for _, s := range r.segfsFails {
		fmt.Fprintf(w, "                   %s\n", s)
	}
	var faulted int64
	for _, n := range r.faults.Faults {
		faulted += n
	}
	var requests int64
	for _, n := range r.faults.Requests {
		requests += n
	}
	fmt.Fprintf(w, "  requests         %d: %s\n", requests, countList(r.faults.Requests))
	fmt.Fprintf(w, "  faults injected  %d: %s\n", faulted, countList(r.faults.Faults))
	fmt.Fprintf(w, "  segfs counters   %s (summed over mounts)\n", countList(r.segfs))
	fmt.Fprintf(w, "  segfs peaks      %d goroutines, %d threads, %.0f MiB RSS, %.0f MiB heap (%d samples)\n",
		r.peaks.goroutines, r.peaks.threads, float64(r.peaks.rss)/(1<<20), float64(r.peaks.heap)/(1<<20), r.peaks.samples)
	fmt.Fprintf(w, "  segfs at rest    %v goroutines before each unmount, nothing in flight\n", r.idleGoroutines)
	fmt.Fprintf(w, "  cache check      %d part files and %d whole-object files compared with the objects, %d wrong\n",
		r.cacheParts, r.cacheWhole, len(r.cacheBad))
	for _, s := range r.cacheBad {
		fmt.Fprintf(w, "                   %s\n", s)
	}
	fmt.Fprintf(w, "  hangs            %d\n", len(r.hangs))
	for _, s := range r.hangs {
		fmt.Fprintf(w, "                   %s\n", s)
	}
	fmt.Fprintf(w, "  unmount errors   %d\n", len(r.unmounts))
	for _, s := range r.unmounts {
		fmt.Fprintf(w, "                   %s\n", firstLine(s))
	}
	fmt.Fprintf(w, "  goroutines       %d in this process before anything started, %d once all was closed\n",
		r.goroutinesStart, r.goroutinesEnd)
	if len(r.leaks) == 0 {
		fmt.Fprintf(w, "  leaks            none (goroutines of this process, mounts, temporary files in the cache)\n")
	} else {
		fmt.Fprintf(w, "  leaks            %d\n", len(r.leaks))
		for _, s := range r.leaks {
			fmt.Fprintf(w, "                   %s\n", s)
		}
	}
	for _, err := range r.fatals {
		fmt.Fprintf(w, "  error            %v\n", err)
	}
}

// countList formats counts as "a 1, b 2" in key order.
func countList(m map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// errnoName is the errno's symbolic name where the soak expects it.
func errnoName(e syscall.Errno) string {
	names := map[syscall.Errno]string{
		syscall.EIO: "EIO", syscall.ESTALE: "ESTALE", syscall.ENOENT: "ENOENT", syscall.EINTR: "EINTR",
		syscall.ENOTCONN: "ENOTCONN", syscall.ECONNABORTED: "ECONNABORTED", syscall.EAGAIN: "EAGAIN", syscall.EINVAL: "EINVAL",
	}
	if s, ok := names[e]; ok {
		return s
	}
	return fmt.Sprintf("errno %d", int(e))
}
