package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// The fetch scheduler, seen from outside: a fixed pool of fetch workers
// whatever the number of readers and files, one fetch per part however
// many readers want it, fetches that outlive the reader who started them,
// and background prefetching of a whole mount.

// smallShard returns 64 objects of 64 KiB to 2 MiB in 8 directories: the
// smallest and largest sizes, sizes at and around a 256 KiB part border,
// and the rest spread log-uniformly.
func smallShard() map[string][]byte {
	rng := rand.New(rand.NewPCG(7, 7))
	sizes := []int{64 << 10, 2 << 20, 256 << 10, 256<<10 + 1, 512<<10 - 1}
	lo, hi := math.Log(64<<10), math.Log(2<<20)
	for len(sizes) < 64 {
		sizes = append(sizes, int(math.Exp(lo+rng.Float64()*(hi-lo))))
	}
	objs := make(map[string][]byte, len(sizes))
	for i, n := range sizes {
		objs[fmt.Sprintf("seg%d/_%d.dat", i/8, i)] = randomBytes(uint64(100+i), n)
	}
	return objs
}

// Goroutine bounds of TestPrefetchManyReaders, above the count once the
// mount is up and idle (which already includes the fixed fetch workers).
const (
	// While 256 readers run: go-fuse serves each request on a goroutine
	// of its own. Buffered reads reach it as the kernel's background
	// readahead requests, of which go-fuse lets 12 be pending (its
	// default max_background); the 128 readers at random offsets send
	// synchronous reads, one each at a time, so up to 128 more when the
	// machine is loaded and the reads pile up (a full make test reached
	// 123 above idle; alone, the test peaks near 45). Each HTTP
	// connection to the store has 2 (read and write loop), and the fetch
	// pool keeps at most 2 × --max-fetches of them: 12 + 128 + 2×16 =
	// 172, and 192 leaves room. segfs's own goroutines come on top of
	// go-fuse's: one per reader (256), per queued part (the 64 opened
	// files have about 190) or per file (64) would not fit.
	busyGoroutines = 192
	// Once idle again: only the idle HTTP connections (2 each, at most
	// 2 × --max-fetches) and a few stragglers may remain.
	idleGoroutines = 2*2*8 + 8
)

// TestPrefetchManyReaders runs 256 readers at once over 64 files, half
// reading whole files in sequence and half at random offsets. Every byte
// must be right, no more fetches than --max-fetches may run at once, and
// segfs's goroutines must not grow with the readers or the files.
func TestPrefetchManyReaders(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := smallShard()
	putObjects(t, srv, bucket, objs)
	const maxFetches = 8
	m := mountS3(t, srv, "s3://"+bucket, "--part-size", "256KiB", "--max-fetches", "8")
	base := harness.WaitStats(t, m, "the index loaded", func(s map[string]int64) bool {
		return s["cache_index_loaded"] == 1 && harness.Idle(s)
	})
	baseline := base["goroutines"]
	if base["workers"] != maxFetches {
		t.Errorf("workers = %d, want %d (--max-fetches)", base["workers"], maxFetches)
	}

	sampler := startSampler(m)
	keys := slices.Sorted(maps.Keys(objs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 256 {
		key := keys[i%len(keys)]
		path := filepath.Join(m.Dir, filepath.FromSlash(key))
		wg.Go(func() {
			<-start
			var err error
			if i%2 == 0 {
				err = readWhole(path, objs[key])
			} else {
				err = randomPreads(path, objs[key], rand.New(rand.NewPCG(uint64(i), 5)))
			}
			if err != nil {
				t.Errorf("reader %d on %s: %v", i, key, err)
			}
		})
	}
	close(start)
	wg.Wait()
	peak := sampler.stop()
	s := harness.WaitIdle(t, m)
	t.Logf("goroutines: %d idle before, peak %d over %d samples; peak fetches running %d; %d GETs, %d joins, %d range reads",
		baseline, peak.goroutines, peak.samples, peak.running, s["gets"], s["joins"], s["range_reads"])

	if peak.samples < 3 {
		t.Logf("only %d samples taken while reading; the goroutine bound was barely checked", peak.samples)
	}
	if peak.goroutines > baseline+busyGoroutines {
		t.Errorf("segfs ran %d goroutines while reading; want at most %d + %d", peak.goroutines, baseline, busyGoroutines)
	}
	if peak.running > maxFetches {
		t.Errorf("%d fetches ran at once; want at most --max-fetches %d", peak.running, maxFetches)
	}
	settled := harness.WaitStats(t, m, fmt.Sprintf("goroutines back to at most %d + %d", baseline, idleGoroutines), func(s map[string]int64) bool {
		return s["goroutines"] <= baseline+idleGoroutines
	})
	t.Logf("goroutines once idle: %d", settled["goroutines"])
}

// peakStats are the highest values a sampler saw.
type peakStats struct {
	goroutines, running int64
	background          int64 // background fetches running
	samples             int
}

// sampler polls a mount's counters until stopped.
type sampler struct {
	done chan struct{}
	out  chan peakStats
}

// startSampler polls m's counters every 10 ms, recording the peaks of
// goroutines and of fetches running.
func startSampler(m *harness.Mount) *sampler {
	s := &sampler{done: make(chan struct{}), out: make(chan peakStats, 1)}
	go func() {
		var p peakStats
		defer func() { s.out <- p }()
		for {
			if st, err := m.Stats(context.Background()); err == nil {
				p.samples++
				p.goroutines = max(p.goroutines, st["goroutines"])
				p.running = max(p.running, st["running_demand"]+st["running_readahead"]+st["running_background"])
				p.background = max(p.background, st["running_background"])
			}
			select {
			case <-s.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peaks.
func (s *sampler) stop() peakStats {
	close(s.done)
	return <-s.out
}

// readWhole reads the file at path in one go and compares it with want.
func readWhole(path string, want []byte) error {
	got, err := os.ReadFile(path)
	switch {
	case err != nil:
		return err
	case !bytes.Equal(got, want):
		return fmt.Errorf("read %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	return nil
}

// randomPreads makes 16 reads of up to 256 KiB at random offsets of the
// file at path and compares each with want.
func randomPreads(path string, want []byte, rng *rand.Rand) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for range 16 {
		if err := comparePread(f, want, rng.Int64N(int64(len(want))), 1+rng.IntN(256<<10)); err != nil {
			return err
		}
	}
	return nil
}

// TestPrefetchSingleFlight has 100 readers, each on its own descriptor,
// read the same cold 1 MiB at once: one part GET must serve them all.
// Buffered, the kernel's page cache merges most of the reads before they
// reach segfs; with O_DIRECT each is a FUSE request of its own.
func TestPrefetchSingleFlight(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := map[string][]byte{"buffered": randomBytes(81, 4<<20), "direct": randomBytes(82, 4<<20)}
	putObjects(t, srv, bucket, objs)
	// --split-size 0: one part, one GET (a split fetch would be one part
	// fetch of several GETs; TestSplitFetchOfOneColdPart covers it).
	m := mountS3(t, srv, "s3://"+bucket, "--prefetch", "none", "--part-size", "4MiB", "--split-size", "0")
	for _, tc := range []struct {
		name string
		flag int
	}{{"buffered", 0}, {"direct", syscall.O_DIRECT}} {
		t.Run(tc.name, func(t *testing.T) {
			data := objs[tc.name]
			files := make([]*os.File, 100)
			for i := range files {
				f, err := os.OpenFile(filepath.Join(m.Dir, tc.name), os.O_RDONLY|tc.flag, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				files[i] = f
			}
			before := harness.MustStats(t, m)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, f := range files {
				wg.Go(func() {
					<-start
					if err := comparePread(f, data, 0, 1<<20); err != nil {
						t.Errorf("reader %d: %v", i, err)
					}
				})
			}
			close(start)
			wg.Wait()
			after := harness.WaitIdle(t, m)
			t.Logf("100 readers: %d FUSE reads, %d joins, %d range reads, %d GETs",
				harness.Delta(before, after, "reads"), harness.Delta(before, after, "joins"), harness.Delta(before, after, "range_reads"), harness.Delta(before, after, "gets"))
			// Every reader of the part waits on one part GET. Buffered,
			// the kernel reads the pages no other descriptor is already
			// reading, so a fresh descriptor may first ask for a range
			// at a non-zero offset, which segfs serves as a cold random
			// read by a GET of that range (its fast path). How many such
			// reads arrive before the one at offset 0 is the kernel's
			// timing; what segfs owes is one part GET, one GET per
			// range, and ranges that lie within what the readers read
			// (plus at most one readahead window of the kernel's).
			parts, ranges := harness.Delta(before, after, "parts_fetched"), harness.Delta(before, after, "range_reads")
			gets, fetched := harness.Delta(before, after, "gets"), harness.Delta(before, after, "fetched_bytes")
			if parts != 1 || gets != parts+ranges {
				t.Errorf("%d GETs (%d parts, %d ranges) for one part read by 100 readers at once; want 1 part GET and one GET per range", gets, parts, ranges)
			}
			if tc.flag != 0 && ranges != 0 {
				t.Errorf("%d range GETs for 1 MiB O_DIRECT reads; want none (a read that large waits for its part)", ranges)
			}
			if rangeBytes := fetched - int64(len(data)); rangeBytes > 2<<20 {
				t.Errorf("range GETs fetched %d bytes beside the part; want at most 2 MiB (each range once)", rangeBytes)
			}
		})
	}
}

// TestSplitFetchOfOneColdPart: on an idle mount a cold part's fetch is
// split into --split-size GETs run in parallel (eight of 1 MiB for an
// 8 MiB part), and 100 readers of it still share that one part fetch.
func TestSplitFetchOfOneColdPart(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	const part = 8 << 20
	data := randomBytes(83, part)
	putObjects(t, srv, bucket, map[string][]byte{"_0.fdt": data})
	m := mountS3(t, srv, "s3://"+bucket, "--prefetch", "none", "--part-size", "8MiB")
	before := harness.MustStats(t, m)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			f, err := os.OpenFile(filepath.Join(m.Dir, "_0.fdt"), os.O_RDONLY|syscall.O_DIRECT, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			// At offset 0, where a read is the start of a stream and
			// waits for its part (elsewhere, a lone read of up to 1 MiB
			// is a small read, served by a GET of its own range).
			if err := comparePread(f, data, 0, 1<<20); err != nil {
				t.Errorf("reader %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	after := harness.WaitIdle(t, m)
	d := func(k string) int64 { return harness.Delta(before, after, k) }
	t.Logf("100 readers: %d parts fetched, %d split into %d GETs; %d GETs of %d bytes; %d range reads",
		d("parts_fetched"), d("parts_split"), d("split_gets"), d("gets"), d("get_bytes"), d("range_reads"))
	if d("parts_fetched") != 1 || d("parts_split") != 1 || d("split_gets") != 8 || d("gets") != 8 || d("range_reads") != 0 {
		t.Errorf("want one part fetched, split into 8 GETs, and no other GET")
	}
	if d("get_bytes") != part {
		t.Errorf("%d bytes fetched, want the part's %d once", d("get_bytes"), part)
	}
}

// TestPrefetchKilledReader starts a part fetch from process A, has this
// process (B) wait on the same part, and kills A (SIGKILL) while it waits:
// B must get the right bytes from the same fetch, neither cancelled nor
// made again.
func TestPrefetchKilledReader(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	const size = 64 << 20
	data := randomBytes(91, size)
	putObjects(t, srv, bucket, map[string][]byte{"_0.fdt": data})
	// One part for the whole object, and no fetch but the one A starts.
	m := mountS3(t, srv, "s3://"+bucket, "--prefetch", "none", "--part-size", "64MiB", "--split-size", "0")
	path := filepath.Join(m.Dir, "_0.fdt")
	before := harness.MustStats(t, m)

	// O_DIRECT: A's read is a FUSE request of its own, which the kernel
	// interrupts when A is killed (buffered reads would be the kernel's
	// readahead, which no process owns).
	a := exec.Command("dd", "if="+path, "of=/dev/null", "bs=1M", "count=64", "iflag=direct")
	var aOut bytes.Buffer
	a.Stdout, a.Stderr = &aOut, &aOut
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	// killA kills A and waits for it; the test's end does so too, if a
	// failure came first.
	killA := sync.OnceValue(func() error {
		a.Process.Kill()
		return a.Wait()
	})
	t.Cleanup(func() { killA() })
	fetched := func(s map[string]int64) bool {
		return harness.Delta(before, s, "parts_fetched")+harness.Delta(before, s, "fetch_errors") > 0
	}
	harness.WaitStats(t, m, "A's fetch to run", func(s map[string]int64) bool {
		return s["running_demand"] > 0 || fetched(s)
	})

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bDone := make(chan error, 1)
	go func() { bDone <- comparePread(f, data, size/2, 1<<20) }()
	s := harness.WaitStats(t, m, "B to join A's fetch", func(s map[string]int64) bool {
		return harness.Delta(before, s, "joins") > 0 || fetched(s)
	})
	if fetched(s) {
		t.Logf("the part was fetched before A was killed: A's death was not tested this time")
	}
	t.Logf("A: %v; %s", killA(), bytes.TrimSpace(aOut.Bytes()))

	select {
	case err := <-bDone:
		if err != nil {
			t.Errorf("B after A was killed: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatalf("B still blocked %v after A was killed", hangGuard)
	}
	if err := readWhole(path, data); err != nil {
		t.Errorf("whole file after A was killed: %v", err)
	}
	after := harness.WaitIdle(t, m)
	t.Logf("%d GETs, %d joins, %d fetch errors, %d range reads",
		harness.Delta(before, after, "gets"), harness.Delta(before, after, "joins"), harness.Delta(before, after, "fetch_errors"), harness.Delta(before, after, "range_reads"))
	if n := harness.Delta(before, after, "gets"); n != 1 {
		t.Errorf("%d GETs; want 1, the fetch A started serving B too", n)
	}
	if n := harness.Delta(before, after, "fetch_errors"); n != 0 {
		t.Errorf("%d fetches failed; killing a reader must not fail the fetch", n)
	}
}

// TestPrefetchAll mounts the small shard with --prefetch all and waits
// until every part is cached: reading every file afterwards must not GET
// anything. The bucket's root is the shard's index, so the open-time
// prefetch would put its heads and tails in the cache at mount too; it is
// off, so that the cache's parts count the fill's parts alone.
func TestPrefetchAll(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "")
	m := mountS3(t, srv, "s3://"+bucket, "--prefetch", "all", "--part-size", "1MiB", "--no-segment-prefetch")
	before := waitCached(t, m, partCount(shared.local, testPartSize))
	if before["started_background"] == 0 {
		t.Errorf("every part is cached but started_background = 0: %v", before)
	}
	checkObjects(t, m.Dir, shared.local)
	after := harness.WaitIdle(t, m)
	t.Logf("prefetched %d parts in the background (%d GETs); reading every file then made %d GETs, %d disk hits",
		before["started_background"], before["gets"], harness.Delta(before, after, "gets"), harness.Delta(before, after, "disk_hits"))
	if n := harness.Delta(before, after, "gets"); n != 0 {
		t.Errorf("reading the prefetched files made %d GETs; want 0", n)
	}
}

// TestBackgroundFetchesBound checks that --background-fetches bounds the
// fetches the background fill holds, however many parts --prefetch all
// queues, and that the fill still completes. The open-time prefetch is
// off, as in TestPrefetchAll, so that the cache counts the fill's parts.
func TestBackgroundFetchesBound(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "")
	const partSize, background = 256 << 10, 2
	m := mountS3(t, srv, "s3://"+bucket, "--prefetch", "all", "--part-size", "256KiB", "--no-segment-prefetch",
		"--max-fetches", "8", "--background-fetches", strconv.Itoa(background))
	sampler := startSampler(m)
	filled := waitCached(t, m, partCount(shared.local, partSize))
	peak := sampler.stop()
	t.Logf("%d parts fetched in the background; peak %d background fetches running over %d samples",
		filled["started_background"], peak.background, peak.samples)
	if peak.background > background {
		t.Errorf("%d background fetches ran at once; want at most --background-fetches %d", peak.background, background)
	}
	if peak.samples >= 3 && peak.background == 0 {
		t.Errorf("no background fetch seen running in %d samples while %d parts were fetched", peak.samples, filled["started_background"])
	}
	checkObjects(t, m.Dir, shared.local)
}

// TestSequentialReaderPausesFill opens a file with --prefetch open, reads
// its start sequentially and closes it. While the handle streams, segfs
// takes back the file's queued background fetches past its readahead's
// reach; after the close (a FUSE release) they must be queued again: the
// whole file ends up cached, each part fetched once, and read again it
// needs no GET.
func TestSequentialReaderPausesFill(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	data := randomBytes(95, 16<<20)
	objs := map[string][]byte{"_0.fdt": data}
	putObjects(t, srv, bucket, objs)
	const partSize = 256 << 10
	m := mountCached(t, srv, bucket, t.TempDir(), "--prefetch", "open", "--part-size", "256KiB", "--max-fetches", "4")
	path := filepath.Join(m.Dir, "_0.fdt")
	before := harness.MustStats(t, m)

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); off < 2<<20; off += 1 << 20 {
		if err := comparePread(f, data, off, 1<<20); err != nil {
			f.Close()
			t.Fatal(err)
		}
	}
	paused := harness.Delta(before, harness.MustStats(t, m), "fill_paused")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if paused == 0 {
		t.Logf("the fill was not taken back (it ran ahead of the first read): the pause was not tested this time")
	}
	after := waitCached(t, m, partCount(objs, partSize))
	t.Logf("%d background fetches taken back while streaming; %d GETs, %d parts fetched, %d range reads, %d held hits",
		paused, harness.Delta(before, after, "gets"), harness.Delta(before, after, "parts_fetched"),
		harness.Delta(before, after, "range_reads"), harness.Delta(before, after, "held_hits"))
	parts := partCount(objs, partSize)
	if n := harness.Delta(before, after, "parts_fetched"); n != parts {
		t.Errorf("%d parts fetched for a %d-part file; want each once", n, parts)
	}
	if err := readWhole(path, data); err != nil {
		t.Fatal(err)
	}
	if n := harness.Delta(after, harness.WaitIdle(t, m), "gets"); n != 0 {
		t.Errorf("%d GETs to read the file again after its fill; want 0", n)
	}
}

// TestPrefetchOpenFetchesTheSmallFilesAfter: with --prefetch open, opening
// a file queues the files of one part or less that follow it in its
// directory, in listing order; not the ones before it, not the larger
// ones, not another directory's.
func TestPrefetchOpenFetchesTheSmallFilesAfter(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := map[string][]byte{
		"d/_0.fdt": randomBytes(84, 1<<20+5000), // two parts, before
		"d/_0.fdx": randomBytes(85, 100<<10),    // opened
		"d/_0.fnm": randomBytes(86, 2000),       // small, after
		"d/_0.tim": randomBytes(87, 3<<20),      // large, after
		"d/_0.tip": randomBytes(88, 1<<20),      // small (one whole part), after
		"e/_1.si":  randomBytes(89, 500),        // small, another directory
	}
	putObjects(t, srv, bucket, objs)
	m := mountS3(t, srv, "s3://"+bucket, "--prefetch", "open", "--part-size", "1MiB")
	before := harness.MustStats(t, m)
	f, err := os.Open(filepath.Join(m.Dir, "d", "_0.fdx"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	after := harness.WaitIdle(t, m)
	// The opened file's own part and the two small files after it.
	if n := harness.Delta(before, after, "parts_fetched"); n != 3 {
		t.Errorf("%d parts fetched after the open, want 3: _0.fdx, _0.fnm, _0.tip", n)
	}
	cost := func(name string) int64 {
		t.Helper()
		s0 := harness.MustStats(t, m)
		if err := readWhole(filepath.Join(m.Dir, filepath.FromSlash(name)), objs[name]); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return harness.Delta(s0, harness.WaitIdle(t, m), "gets")
	}
	for _, name := range []string{"d/_0.fnm", "d/_0.tip"} {
		if n := cost(name); n != 0 {
			t.Errorf("%s cost %d GETs after the open of _0.fdx; want it fetched already", name, n)
		}
	}
	for _, name := range []string{"d/_0.fdt", "d/_0.tim", "e/_1.si"} {
		if n := cost(name); n == 0 {
			t.Errorf("%s was fetched by the open of _0.fdx; want only the small files after it in its directory", name)
		}
	}
}
