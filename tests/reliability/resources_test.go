package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/tests/harness"
)

// The shape of plan 19's run and the mount's configuration.
const (
	resFiles      = 10_000 // files, all held open at once
	resLarge      = 16     // of them, multi-part files (1 to 2 MiB)
	resReaders    = 512    // concurrent readers
	resReadsEach  = 48     // reads per reader
	resPartSize   = 64 << 10
	resMaxFetches = 16      // segfs's default
	resMaxRead    = 1 << 20 // segfs's default --max-read
	resCacheSize  = "64MiB"
	resMemCache   = 64 << 20 // --memory-cache, its default
	resSampleStep = 5 * time.Millisecond
)

// What segfs and go-fuse run with that the bounds count (read from
// their code: fs/reader.go, fuse/server.go and fuse/types.go of go-fuse
// v2.12.1).
const (
	// fuseMaxBackground is go-fuse's default max_background (segfs sets
	// none): the kernel has at most that many asynchronous requests
	// (readahead of buffered reads, releases) with the server at once.
	fuseMaxBackground = 12
	// requestGoroutines is the most goroutines one FUSE request keeps:
	// the one serving it (go-fuse serves each request in the loop that
	// read it), two more when it is a small read across a part border
	// (Reader.readSmallParts), and the reader loop that go-fuse starts
	// when it reads a request and finds no other loop reading. That loop
	// ends (or reads) only once the scheduler gets to it, so with the
	// CPUs busy such loops wait in numbers: one per request read, which
	// under a burst of short requests (the releases of a mass close) is
	// more than one per request in flight. The test bounds the reads and
	// only reports the close.
	requestGoroutines = 4
)

// TestPlan19BoundedResources: 10,000 files on the real server, all opened
// at once by a child process, then read by 512 readers at once, random
// ranges and whole multi-part files, half of the files through O_DIRECT
// (every read reaches segfs) and half through the page cache; the disk
// cache holds a fifth of the data, so reads keep going to the remote.
// Every byte must be right. segfs's peak resident set must stay within
// the memory bound it logs, its OS threads within a bound set by its
// configuration, and its goroutines with every file open within one that
// does not count the files; under the readers, within one that counts
// the FUSE requests they can have in flight (resBounds says why each
// term is there). After the files are closed the goroutines come back
// to what the idle mount had.
func TestPlan19BoundedResources(t *testing.T) {
	// Not parallel: the figures it logs are the mount's alone.
	files := resManifest(1901)
	tmp := t.TempDir()
	manifestPath := filepath.Join(tmp, "manifest.json")
	b, err := json.Marshal(files)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifestPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := buildTestProgram(t, tmp, "resreader")

	e := newEnv(t, nil, 1901, nil)
	start := time.Now()
	total, err := putGenerated(e, files)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("uploaded %d objects, %d bytes, in %v", len(files), total, time.Since(start).Round(time.Millisecond))

	cache := cacheDir(t)
	opts := e.mountOptions(cache, "--part-size", "64KiB", "--max-fetches", strconv.Itoa(resMaxFetches), "--cache-size", resCacheSize)
	opts.Endpoint = "" // the server itself: nothing is injected
	m := harness.StartMountT(t, opts)
	// The logged bound leaves out the FUSE requests in flight, which no
	// flag bounds: each holds a reply of up to --max-read, and the kernel
	// has one per reader in a read and max_background more.
	memBound := loggedMemoryBound(t, m) + (resReaders+fuseMaxBackground)*resMaxRead
	base := harness.WaitIdle(t, m)
	bounds := resBounds(t, m, base["goroutines"])

	child := startResReader(t, bin, m.Dir, manifestPath)
	start = time.Now()
	child.waitOpened(t)
	opened := harness.WaitStats(t, m, "every file open and no fetch running", func(s map[string]int64) bool {
		return s["open_handles"] == resFiles && harness.Idle(s)
	})
	t.Logf("%d files open in %v, their background fetches done; goroutines: %d on the idle mount, %d with every file open (bound %d)",
		resFiles, time.Since(start).Round(time.Millisecond), base["goroutines"], opened["goroutines"], bounds.idle)
	if opened["goroutines"] > bounds.idle {
		t.Errorf("%d goroutines with %d files open and nothing read, more than %d: something keeps a goroutine per file",
			opened["goroutines"], resFiles, bounds.idle)
	}

	samp := startSampler(t, m)
	start = time.Now()
	res := child.results(t)
	reading := samp.stop(t)
	t.Logf("%d reads (%d of whole files), %d bytes (%d through O_DIRECT) in %v; at most %d readers in a read at once",
		res.Reads, res.SeqReads, res.Bytes, res.DirectRead, time.Since(start).Round(time.Millisecond), res.MaxInRead)
	if want := int64(resReaders * resReadsEach); res.Reads != want || res.Mismatches != 0 || res.Failed != 0 {
		t.Errorf("%d reads, want %d; %d returned other bytes, %d failed: %q", res.Reads, want, res.Mismatches, res.Failed, res.Errors)
	}

	samp = startSampler(t, m)
	child.exit(t)
	after := harness.WaitStats(t, m, "every file closed and no fetch running", func(s map[string]int64) bool {
		return s["open_handles"] == 0 && harness.Idle(s)
	})
	closing := samp.stop(t)
	st, err := harness.ReadProcStatus(m.Pid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("segfs: %d GETs (%d parts, %d own-range reads), %d disk hits, %d evictions, %d fetch errors",
		harness.Delta(opened, after, "gets"), harness.Delta(opened, after, "parts_fetched"), harness.Delta(opened, after, "range_reads"),
		harness.Delta(opened, after, "disk_hits"), harness.Delta(opened, after, "cache_evictions"), harness.Delta(opened, after, "fetch_errors"))
	t.Logf("peak resident set %d bytes (VmHWM; bound %d)", st.VmHWM, memBound)
	t.Logf("reading (%d samples): %d threads (bound %d), %d goroutines (bound %d), %d fetches running, %d bytes of held parts, %d in the memory tier",
		reading.samples, reading.threads, bounds.threads, reading.goroutines, bounds.reading, reading.running, reading.held, reading.memory)
	t.Logf("closing the %d files (%d samples): %d threads, %d goroutines; then %d goroutines, %d threads",
		resFiles, closing.samples, closing.threads, closing.goroutines, after["goroutines"], st.Threads)

	if st.VmHWM > memBound {
		t.Errorf("peak resident set %d bytes, more than the memory bound segfs logged and its FUSE requests' replies, %d", st.VmHWM, memBound)
	}
	if st.Threads > bounds.threads || reading.threads > bounds.threads {
		t.Errorf("%d OS threads at the peak (%d at the end), more than %d", reading.threads, st.Threads, bounds.threads)
	}
	if reading.goroutines > bounds.reading {
		t.Errorf("%d goroutines while reading, more than %d", reading.goroutines, bounds.reading)
	}
	if reading.running > resMaxFetches {
		t.Errorf("%d fetches running at once, more than --max-fetches %d", reading.running, resMaxFetches)
	}
	if hold := int64(resMaxFetches+1) * resPartSize; reading.held > hold {
		t.Errorf("streams held %d bytes of parts, more than %d ((max-fetches+1) parts)", reading.held, hold)
	}
	if reading.memory > resMemCache {
		t.Errorf("the memory tier held %d bytes, more than --memory-cache %d", reading.memory, resMemCache)
	}
	// Closed and idle: back to the idle mount's goroutines, give or take
	// the pooled connections and reader loops that come and go.
	if after["goroutines"] > bounds.idle {
		t.Errorf("%d goroutines once every file is closed, more than %d (the idle mount had %d)", after["goroutines"], bounds.idle, base["goroutines"])
	}
	for _, k := range []string{"held_bytes", "memory_part_bytes", "inflight_parts"} {
		if after[k] != 0 {
			t.Errorf("%s is %d once every file is closed and nothing is fetched, want 0", k, after[k])
		}
	}
	if n := harness.Delta(opened, after, "fetch_errors"); n != 0 {
		t.Errorf("%d fetches failed; nothing was injected", n)
	}
	checkCache(t, cache, resContent(files))
}

// bounds are plan 19's bounds on segfs, from its configuration.
type bounds struct {
	idle    int64 // goroutines with nothing read, however many files are open
	reading int64 // goroutines under the readers
	threads int64 // OS threads
}

// resBounds returns the bounds for the test's mount, whose idle
// goroutines are base. base itself holds the fixed ones: the fetch pool
// (--max-fetches), the disk writers (reader.DefaultWriters), the stream
// sweeper, go-fuse's serving loop, the signal and metrics goroutines;
// it must be no more than those and 32 others (pooled connections, the
// runtime's), far from one per listed key.
//
// On top of base, with nothing read: the HTTP connections, two
// goroutines each (a read and a write loop); the transport keeps up to
// MaxConns = 2 × max-fetches of them idle and no more than max-fetches
// are in use, and as many may be dialling: 7 × max-fetches in all. And
// go-fuse's reader loops, of which up to maxReaders+1 wait in read(2) on
// /dev/fuse (maxReaders is GOMAXPROCS clamped to [2, 16]). No term
// counts open files: a handle is a struct, not a goroutine.
//
// Under the readers, requestGoroutines for each FUSE request the kernel
// can have with segfs at once: one per reader inside a read (a reader's
// read is one synchronous request: O_DIRECT, or a page-cache miss the
// kernel reads itself; go-fuse documents that it does not limit
// synchronous requests, and its accounting of request bytes counts
// input buffers, which a read does not keep) and fuseMaxBackground
// asynchronous ones. The child runs with asynchronous preemption off,
// so no signal interrupts a read and no INTERRUPT request comes on top.
// This term grows with the readers, not with the files.
//
// Threads: GOMAXPROCS running Go code, sysmon and one spare M the
// scheduler starts when it hands a P over, and one for each goroutine
// that can be inside a system call at once: go-fuse's maxReaders+1
// loops blocked in read(2), the writers in disk writes, and one handler
// for each FUSE request in flight (a read of a cached part, the reply).
// A handler's system call keeps its thread when it outlasts sysmon's
// tick, and how often that happens depends on how busy the machine is,
// not on segfs: 15 to 18 threads in all at 512 readers on a quiet
// machine, 32 in one CI run (the test alone, on a busier machine). So the
// bound counts the requests, like the goroutines' bound, and no term
// counts open files. The fetch workers hold none: their sockets go
// through the netpoller.
func resBounds(t *testing.T, m *harness.Mount, base int64) bounds {
	t.Helper()
	procs := int64(max(runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	fuseLoops := min(max(procs, 2), 16) + 1
	w := int64(resMaxFetches)
	if fixed := w + reader.DefaultWriters + 32; base > fixed {
		t.Errorf("%d goroutines on the idle mount of %d keys, more than %d (max-fetches + writers + 32)", base, resFiles, fixed)
	}
	idle := base + 7*w + fuseLoops
	return bounds{
		idle:    idle,
		reading: idle + requestGoroutines*(resReaders+fuseMaxBackground),
		threads: procs + 2 + fuseLoops + reader.DefaultWriters + resReaders + fuseMaxBackground,
	}
}

// resFile is an entry of testdata/resreader's manifest.
type resFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Seed   uint64 `json:"seed"`
	Direct bool   `json:"direct"`
}

// resManifest returns plan 19's files, in 100 directories: resLarge of
// 1 to 2 MiB (16 to 32 parts), the others of 1 byte to 64 KiB (one
// part), every other one to be opened with O_DIRECT. A file's content
// is randomBytes(Seed, Size).
func resManifest(seed uint64) []resFile {
	rng := rand.New(rand.NewPCG(seed, 19))
	files := make([]resFile, resFiles)
	for i := range files {
		size := 1 + rng.Int64N(resPartSize)
		if i < resLarge {
			size = 1<<20 + rng.Int64N(1<<20)
		}
		files[i] = resFile{
			Name:   fmt.Sprintf("d%02d/f%05d.bin", i%100, i),
			Size:   size,
			Seed:   seed<<20 + uint64(i),
			Direct: i%2 == 0,
		}
	}
	return files
}

// putGenerated uploads files, making each one's content as it goes,
// harness.UploadParallelism at a time (more at a time is no faster on
// two CPUs: 9 to 16 s for the 10,000 with 4 to 64 at a time), and
// returns the bytes uploaded. The test never holds the 351 MB at once
// (the race detector's shadow of them took the test to 2.4 GB).
func putGenerated(e *env, files []resFile) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(harness.UploadParallelism)
	var total int64
	for _, f := range files {
		total += f.Size
		g.Go(func() error {
			_, err := e.srv.PutBytes(ctx, e.bucket, f.Name, randomBytes(f.Seed, int(f.Size)))
			return err
		})
	}
	return total, g.Wait()
}

// resContent returns the content of files for checkCache.
func resContent(files []resFile) contentFunc {
	byName := make(map[string]resFile, len(files))
	for _, f := range files {
		byName[f.Name] = f
	}
	return func(key, _ string) ([]byte, bool) {
		f, ok := byName[key]
		if !ok {
			return nil, false
		}
		return randomBytes(f.Seed, int(f.Size)), true
	}
}

// memoryBoundRE finds the bound segfs logs at mount (cmd/segfs/memory.go).
var memoryBoundRE = regexp.MustCompile(`msg="memory bound" bytes=(\d+) terms="?([^"\n]*)`)

// loggedMemoryBound returns the memory bound m logged, and logs its terms.
func loggedMemoryBound(t *testing.T, m *harness.Mount) int64 {
	t.Helper()
	match := memoryBoundRE.FindStringSubmatch(m.Log())
	if match == nil {
		t.Fatalf("segfs logged no memory bound; log:\n%s", tail(m.Log(), 4096))
	}
	n, err := strconv.ParseInt(match[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("memory bound %d bytes: %s", n, match[2])
	return n
}

// resReader is a running testdata/resreader.
type resReader struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout *bufio.Reader
	stderr *syncBuffer
}

// startResReader starts testdata/resreader over dir, with asynchronous
// preemption off (see resBounds); it is killed at the end of the test if
// still running.
func startResReader(t *testing.T, bin, dir, manifest string) *resReader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*hangGuard)
	cmd := exec.CommandContext(ctx, bin, "-dir", dir, "-manifest", manifest,
		"-readers", strconv.Itoa(resReaders), "-reads", strconv.Itoa(resReadsEach))
	cmd.Env = harness.SetEnv(harness.ChildEnv(), "GODEBUG", "asyncpreemptoff=1")
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd.Stdin = stdinR
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &resReader{cmd: cmd, stdin: stdinW, stdout: bufio.NewReader(out), stderr: &syncBuffer{}}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	stdinR.Close()
	t.Cleanup(func() {
		stdinW.Close()
		cancel()
		_ = cmd.Wait()
	})
	return r
}

// waitOpened waits for the child's report that it holds every file open.
func (r *resReader) waitOpened(t *testing.T) {
	t.Helper()
	line, err := r.stdout.ReadBytes('\n')
	var got struct{ Opened int }
	if err == nil {
		err = json.Unmarshal(line, &got)
	}
	if err != nil || got.Opened != resFiles {
		t.Fatalf("resreader: %v; opened %d files, want %d; stdout %q; stderr %q", err, got.Opened, resFiles, line, r.stderr.String())
	}
}

// resResult is testdata/resreader's result.
type resResult struct {
	Reads      int64    `json:"reads"`
	SeqReads   int64    `json:"seq_reads"`
	Bytes      int64    `json:"bytes"`
	DirectRead int64    `json:"direct_read"`
	Mismatches int64    `json:"mismatches"`
	Failed     int64    `json:"failed"`
	MaxInRead  int64    `json:"max_in_read"`
	Errors     []string `json:"errors"`
}

// results lets the child's readers go and returns what they found once
// they are done; the child still holds every file open.
func (r *resReader) results(t *testing.T) resResult {
	t.Helper()
	if _, err := r.stdin.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	line, err := r.stdout.ReadBytes('\n')
	var res resResult
	if err == nil {
		err = json.Unmarshal(line, &res)
	}
	if err != nil {
		t.Fatalf("resreader: %v; stdout %q; stderr %q", err, line, r.stderr.String())
	}
	return res
}

// exit tells the child to exit, closing every file at once, and waits
// for it.
func (r *resReader) exit(t *testing.T) {
	t.Helper()
	r.stdin.Close()
	if err := r.cmd.Wait(); err != nil {
		t.Errorf("resreader: %v; stderr %q", err, r.stderr.String())
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// peaks are the largest figures a sampler saw.
type peaks struct {
	samples    int
	threads    int64 // OS threads of segfs (/proc/PID/status)
	goroutines int64 // goroutines of segfs (/stats)
	running    int64 // fetches running
	held       int64 // bytes of parts held for sequential readers
	memory     int64 // bytes of parts in the memory tier
}

// sampler reads segfs's threads and counters every resSampleStep. The
// samples can miss a peak between them, so the peaks are lower bounds of
// the true ones (but for VmHWM, which the kernel keeps).
type sampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	// Written by the sampling goroutine until done is closed and it has
	// ended.
	p   peaks
	err error // the first failed sample
}

func startSampler(t *testing.T, m *harness.Mount) *sampler {
	s := &sampler{done: make(chan struct{})}
	s.wg.Go(func() {
		tick := time.NewTicker(resSampleStep)
		defer tick.Stop()
		for {
			s.sample(m)
			select {
			case <-s.done:
				s.sample(m)
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *sampler) sample(m *harness.Mount) {
	st, err := harness.ReadProcStatus(m.Pid())
	var stats map[string]int64
	if err == nil {
		stats, err = m.Stats(context.Background())
	}
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.p.samples++
	s.p.threads = max(s.p.threads, st.Threads)
	s.p.goroutines = max(s.p.goroutines, stats["goroutines"])
	s.p.running = max(s.p.running, stats["running_demand"]+stats["running_readahead"]+stats["running_background"])
	s.p.held = max(s.p.held, stats["held_bytes"])
	s.p.memory = max(s.p.memory, stats["memory_part_bytes"])
}

// stop ends the sampling and returns the peaks; it may be called more
// than once.
func (s *sampler) stop(t *testing.T) peaks {
	s.once.Do(func() {
		close(s.done)
		s.wg.Wait()
		if s.err != nil {
			t.Errorf("sampling segfs: %v", s.err)
		}
	})
	return s.p
}

// buildTestProgram builds testdata/name into dir with the go command that
// runs the tests and returns the binary's path.
func buildTestProgram(t *testing.T, dir, name string) string {
	t.Helper()
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to build testdata/%s: %v", name, err)
		}
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command(goCmd, "build", "-o", bin, "./testdata/"+name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/%s: %v\n%s", name, err, out)
	}
	return bin
}
