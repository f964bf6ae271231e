package reliability

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
)

// sdkAttempts is how many attempts segfs's S3 client makes at one request
// that fails before its headers (5xx, throttling, timeouts): the SDK's
// standard retryer, whose defaults segfs keeps.
var sdkAttempts = retry.DefaultMaxAttempts

// sdkBackoffBound is the longest the SDK's standard retryer can wait
// between the attempts of one request: before retry i (from 0) it waits
// at most min(base·2^i, DefaultMaxBackoff), where base is 1 s for
// throttling errors and less for others.
func sdkBackoffBound() time.Duration {
	var total time.Duration
	for i := range sdkAttempts - 1 {
		total += min(time.Second<<i, retry.DefaultMaxBackoff)
	}
	return total
}

// TestPlan01SlowDownBurst: every request's first k attempts (k below the
// SDK's attempts) get 503 SlowDown. Reads must be byte-exact, and each
// distinct request must have been sent exactly k+1 times: no attempt
// wasted, none given up early.
func TestPlan01SlowDownBurst(t *testing.T) {
	t.Parallel()
	const size = 6 << 20
	objs := map[string][]byte{"burst.fdt": randomBytes(101, size)}
	e := newEnv(t, nil, 1, objs)
	m := e.mount(t, cacheDir(t), "--part-size", partSizeFlag, "--prefetch", "none")
	k := sdkAttempts - 1
	e.rules(faults.Rule{Fault: faults.SlowDown, Times: k, PerRequest: true})
	path := filepath.Join(m.Dir, "burst.fdt")

	t.Run("one part", func(t *testing.T) {
		// One O_DIRECT read of a whole part: one FUSE request, one part
		// GET (not at offset 0, which would look sequential and start
		// readahead).
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pb, sb := e.proxy.Stats(), harness.MustStats(t, m)
		if errno, err := readExact(f, objs["burst.fdt"], 3*partSize, partSize); err != nil || errno != 0 {
			t.Fatalf("read under a burst of %d 503s: %v %v", k, errnoName(errno), err)
		}
		sa := harness.WaitIdle(t, m)
		pa := e.proxy.Stats()
		gets, distinct := pa.Requests["get"]-pb.Requests["get"], pa.DistinctGets-pb.DistinctGets
		t.Logf("%d GETs for %d distinct requests, %d 503s; segfs counted %d GETs, %d retries", gets, distinct,
			pa.Faults["slowdown_503"]-pb.Faults["slowdown_503"], harness.Delta(sb, sa, "gets"), harness.Delta(sb, sa, "retries"))
		if distinct != 1 || gets != int64(k+1) {
			t.Errorf("%d GETs of %d distinct requests; want exactly %d of 1", gets, distinct, k+1)
		}
		if harness.Delta(sb, sa, "gets") != gets || harness.Delta(sb, sa, "read_errors") != 0 {
			t.Errorf("segfs counted %d GETs and %d read errors; want %d and 0", harness.Delta(sb, sa, "gets"), harness.Delta(sb, sa, "read_errors"), gets)
		}
	})

	t.Run("whole file", func(t *testing.T) {
		pb, sb := e.proxy.Stats(), harness.MustStats(t, m)
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("sequential read under 503 bursts: %v", err)
		}
		if string(got) != string(objs["burst.fdt"]) {
			t.Fatalf("sequential read under 503 bursts: other bytes (first difference at %d)", firstDiff(got, objs["burst.fdt"]))
		}
		sa := harness.WaitIdle(t, m)
		pa := e.proxy.Stats()
		gets, distinct := pa.Requests["get"]-pb.Requests["get"], pa.DistinctGets-pb.DistinctGets
		t.Logf("%d GETs for %d distinct requests; segfs: %d GETs, %d retries, %d read errors",
			gets, distinct, harness.Delta(sb, sa, "gets"), harness.Delta(sb, sa, "retries"), harness.Delta(sb, sa, "read_errors"))
		if distinct == 0 || gets != int64(k+1)*distinct {
			t.Errorf("%d GETs for %d distinct requests; want %d each", gets, distinct, k+1)
		}
		if n := harness.Delta(sb, sa, "read_errors"); n != 0 {
			t.Errorf("%d ranged reads failed; a burst shorter than the SDK's attempts must be absorbed", n)
		}
	})
	checkCache(t, mustCacheDir(m), objs)
}

// mustCacheDir returns the --cache-dir a mount runs with.
func mustCacheDir(m interface{ Args() []string }) string {
	args := m.Args()
	for i, a := range args {
		if a == "--cache-dir" && i+1 < len(args) {
			return args[i+1]
		}
	}
	panic("reliability: mount without --cache-dir")
}

// TestPlan02Persistent500 makes every GET of one object fail with 500:
// reads of it must fail with EIO within a bound computed from the retry
// settings, leave nothing in the cache, and succeed once the remote
// recovers.
func TestPlan02Persistent500(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{"dead.fdt": randomBytes(201, 3<<20), "alive.fdt": randomBytes(202, 1<<20)}
	e := newEnv(t, nil, 2, objs)
	dir := cacheDir(t)
	m := e.mount(t, dir, "--part-size", partSizeFlag, "--prefetch", "none")
	e.rules(faults.Rule{Fault: faults.InternalError, Key: "dead.fdt"})
	// A read may wait on two requests in turn (its own range, then the
	// part); each is bounded by the SDK's attempts and backoff. The slack
	// only turns a hang into a failure.
	bound := 2*sdkBackoffBound() + 30*time.Second

	f, err := os.OpenFile(filepath.Join(m.Dir, "dead.fdt"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reads := []struct {
		name string
		off  int64
		n    int
	}{
		{"small read (own range GET)", 12345, 4096},
		{"whole part (part GET)", partSize, partSize},
	}
	for _, r := range reads {
		start := time.Now()
		errno, err := readExact(f, objs["dead.fdt"], r.off, r.n)
		took := time.Since(start)
		t.Logf("%s: %v after %v (bound %v)", r.name, errnoName(errno), took.Round(time.Millisecond), bound)
		switch {
		case err != nil:
			t.Errorf("%s: %v", r.name, err)
		case errno != syscall.EIO:
			t.Errorf("%s: errno %v, want EIO", r.name, errnoName(errno))
		case took > bound:
			t.Errorf("%s: EIO after %v, more than the bound %v", r.name, took, bound)
		}
	}
	s := harness.WaitIdle(t, m)
	p := e.proxy.Stats()
	if n := p.Faults["internal_500"]; n < int64(sdkAttempts) {
		t.Errorf("%d 500s injected; want at least one request's %d attempts", n, sdkAttempts)
	}
	if s["cache_puts"] != 0 || s["read_errors"] == 0 {
		t.Errorf("cache_puts %d, read_errors %d; want nothing cached and the failures counted", s["cache_puts"], s["read_errors"])
	}
	if rep := checkCache(t, dir, objs); rep.byKey["dead.fdt"] != 0 {
		t.Errorf("%d parts of the failing object cached", rep.byKey["dead.fdt"])
	}
	// The other object is not affected.
	if got, err := os.ReadFile(filepath.Join(m.Dir, "alive.fdt")); err != nil || string(got) != string(objs["alive.fdt"]) {
		t.Errorf("the healthy object beside it: %v", err)
	}

	e.rules() // the remote recovers
	for _, r := range reads {
		if errno, err := readExact(f, objs["dead.fdt"], r.off, r.n); err != nil || errno != 0 {
			t.Errorf("%s after recovery: %v %v", r.name, errnoName(errno), err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(m.Dir, "dead.fdt")); err != nil || string(got) != string(objs["dead.fdt"]) {
		t.Errorf("whole file after recovery: %v", err)
	}
	harness.WaitIdle(t, m)
	if rep := checkCache(t, dir, objs); rep.byKey["dead.fdt"] == 0 {
		t.Errorf("nothing of the recovered object was cached")
	}
}

// TestPlan03RetryStorm has 64 readers read at once while 30% of GET
// attempts fail with 500, each request failing at most as often as the
// SDK can retry it. A client-wide retry quota would turn such a storm into
// failed reads; segfs must return every byte, and retry once per fault.
func TestPlan03RetryStorm(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{}
	for i := range 8 {
		objs[fmt.Sprintf("storm/_%d.fdt", i)] = randomBytes(300+uint64(i), 4<<20)
	}
	keys := sortedKeys(objs)
	e := newEnv(t, nil, 3, objs)
	m := e.mount(t, cacheDir(t), "--part-size", partSizeFlag, "--prefetch", "none", "--max-fetches", "32")
	e.rules(faults.Rule{Fault: faults.InternalError, Prob: 0.3, Times: sdkAttempts - 1, PerRequest: true})
	before := harness.MustStats(t, m)

	const readers, readsEach = 64, 8
	var results tally
	var wg sync.WaitGroup
	for i := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 3))
			key := keys[i%len(keys)]
			f, err := os.OpenFile(filepath.Join(m.Dir, key), os.O_RDONLY|syscall.O_DIRECT, 0)
			if err != nil {
				t.Errorf("reader %d: %v", i, err)
				return
			}
			defer f.Close()
			want := objs[key]
			for range readsEach {
				n := 1 + rng.IntN(256<<10)
				errno, err := readExact(f, want, rng.Int64N(int64(len(want))), n)
				if err != nil {
					t.Errorf("reader %d on %s: %v", i, key, err)
					return
				}
				results.add(errno)
			}
		})
	}
	wg.Wait()
	after := harness.WaitIdle(t, m)
	p := e.proxy.Stats()
	faultsN := p.Faults["internal_500"]
	t.Logf("%d readers: %v; %d GETs, %d 500s injected; segfs: %d retries, %d read errors", readers, &results,
		p.Requests["get"], faultsN, harness.Delta(before, after, "retries"), harness.Delta(before, after, "read_errors"))
	if results.failures() != 0 {
		t.Errorf("reads failed (%v); every request could succeed within the SDK's attempts", &results)
	}
	if faultsN == 0 {
		t.Fatalf("no fault injected: the test tested nothing")
	}
	if r := harness.Delta(before, after, "retries"); r != faultsN {
		t.Errorf("segfs retried %d times for %d injected 500s; want one retry per fault", r, faultsN)
	}
	if n := harness.Delta(before, after, "read_errors"); n != 0 {
		t.Errorf("%d ranged reads failed inside segfs", n)
	}
}
