package reliability

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
)

// Cases 4 to 8 of the plan share one shape: faults that spoil a response
// after or instead of good headers are injected at random into a share of
// the GETs while every file is read in the ways a search engine reads
// (random preads of all sizes, O_DIRECT and buffered, and whole files).
// Every read must return exactly the object's bytes or fail with EIO;
// every cached part must hold exactly the object's bytes and no error
// text; and once the faults stop, every byte must read right.

// bodyObjects are the objects of the body fault cases: one whose last part
// is short, one of whole parts, and one smaller than a part (read with one
// GET of the whole object, to which a 200 is a valid answer).
func bodyObjects(seed uint64) map[string][]byte {
	return map[string][]byte{
		"seg/_0.fdt": randomBytes(seed, 4<<20+12345),
		"seg/_0.doc": randomBytes(seed+1, 2<<20),
		"seg/_0.si":  randomBytes(seed+2, 100<<10),
	}
}

// bodyPartSize is the part size of the body fault cases: small, so that
// a few MiB take many GETs, each a chance for a fault.
const bodyPartSize = "256KiB"

// bodyRun is what runBodyFaults leaves for the case's own checks.
type bodyRun struct {
	e        *env
	m        *harness.Mount
	cacheDir string
	faulted  tally // reads while the faults were on
	before   map[string]int64
	after    map[string]int64 // segfs's counters once the faulted reads were done
	proxy    faults.Stats     // the proxy's counters then
}

// runBodyFaults mounts a fresh bucket of bodyObjects through the proxy with
// args, reads everything under rules, and checks what cases 4-8 share. Each
// rule must have fired at least once.
func runBodyFaults(t *testing.T, seed uint64, rules []faults.Rule, args ...string) *bodyRun {
	t.Helper()
	objs := bodyObjects(seed)
	r := &bodyRun{e: newEnv(t, nil, seed, objs), cacheDir: cacheDir(t)}
	r.m = r.e.mount(t, r.cacheDir, append([]string{"--part-size", bodyPartSize, "--prefetch", "none"}, args...)...)
	r.e.rules(rules...)
	r.before = harness.MustStats(t, r.m)
	rng := rand.New(rand.NewPCG(seed, 8))

	direct := openAll(t, r.m.Dir, objs, syscall.O_DIRECT)
	buffered := openAll(t, r.m.Dir, objs, 0)
	for _, key := range sortedKeys(objs) {
		want := objs[key]
		for i := range 24 {
			f := direct[key]
			if i%3 == 2 {
				f = buffered[key]
			}
			n := 1 + rng.IntN(300<<10)
			if i%4 == 0 {
				n = partSize
			}
			errno, err := readExact(f, want, rng.Int64N(int64(len(want))), n)
			if err != nil {
				t.Errorf("%s: %v", key, err)
				continue
			}
			r.faulted.add(errno)
		}
		r.faulted.add(readWhole(t, filepath.Join(r.m.Dir, key), want))
	}
	r.after = harness.WaitIdle(t, r.m)
	r.proxy = r.e.proxy.Stats()
	t.Logf("under faults: %v; %d GETs, faults %v; segfs: %d GETs, %d retries, %d ranged reads failed",
		&r.faulted, r.proxy.Requests["get"], r.proxy.Faults,
		harness.Delta(r.before, r.after, "gets"), harness.Delta(r.before, r.after, "retries"), harness.Delta(r.before, r.after, "read_errors"))
	if !r.faulted.only(syscall.EIO) {
		t.Errorf("reads failed with other errnos than EIO: %v", &r.faulted)
	}
	if r.faulted.ok == 0 {
		t.Errorf("no read succeeded under faults: %v", &r.faulted)
	}
	for _, rule := range rules {
		name := rule.Name
		if name == "" {
			name = rule.Fault.String()
		}
		if r.proxy.Fired[name] == 0 {
			t.Errorf("rule %s never fired: the case was not tested", name)
		}
	}
	if harness.Delta(r.before, r.after, "retries") == 0 {
		t.Errorf("segfs retried nothing under %d injected faults", r.proxy.TotalFaults())
	}
	checkCache(t, r.cacheDir, objs)

	// The faults stop: everything must read right, from the cache or the
	// remote, and what gets cached now must be right too.
	r.e.rules()
	harness.DropPageCache(t)
	for _, key := range sortedKeys(objs) {
		want := objs[key]
		for off := int64(0); off < int64(len(want)); off += partSize {
			if errno, err := readExact(direct[key], want, off, partSize); err != nil || errno != 0 {
				t.Errorf("%s at %d after the faults stopped: %v %v", key, off, errnoName(errno), err)
			}
		}
		if errno := readWhole(t, filepath.Join(r.m.Dir, key), want); errno != 0 {
			t.Errorf("%s after the faults stopped: %v", key, errnoName(errno))
		}
	}
	harness.WaitIdle(t, r.m)
	checkCache(t, r.cacheDir, objs)
	return r
}

// readWhole reads the file at path from start to end with a fresh
// buffered descriptor and returns 0 if it got exactly want, or the errno
// it failed with; other bytes or errors fail the test.
func readWhole(t *testing.T, path string, want []byte) syscall.Errno {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("open %s: %v", path, err)
		return 0
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil {
		if errno := errnoOf(err); errno != 0 {
			// What came before the failure must still be right.
			if len(got) > len(want) || string(got) != string(want[:len(got)]) {
				t.Errorf("%s: %d bytes before %v are not the object's", path, len(got), errnoName(errno))
			}
			return errno
		}
		t.Errorf("%s: %v", path, err)
		return 0
	}
	if len(got) != len(want) || string(got) != string(want) {
		t.Errorf("%s: read %d bytes, want %d; first difference at %d", path, len(got), len(want), firstDiff(got, want))
	}
	return 0
}

// TestPlan04ErrorBodies: 500s with S3 XML error bodies, and 200s whose
// body is an XML error document; also a 200/206 body that fails mid-way.
// Error bytes must never reach a reader or the cache.
func TestPlan04ErrorBodies(t *testing.T) {
	t.Parallel()
	runBodyFaults(t, 4, []faults.Rule{
		{Fault: faults.ErrorBody200, Prob: 0.25},
		{Fault: faults.InternalError, Prob: 0.25},
		{Fault: faults.Reset, Bytes: -1, Prob: 0.15},
	})
}

// TestPlan05Resets: TCP resets at a random byte of the body. The missing
// remainder is re-requested with If-Match; reads are never short or
// zero-filled.
func TestPlan05Resets(t *testing.T) {
	t.Parallel()
	runBodyFaults(t, 5, []faults.Rule{{Fault: faults.Reset, Bytes: -1, Prob: 0.4}})
}

// TestPlan06ShortBodies: bodies that end cleanly before their
// Content-Length. The partial part is never cached.
func TestPlan06ShortBodies(t *testing.T) {
	t.Parallel()
	runBodyFaults(t, 6, []faults.Rule{{Fault: faults.Short, Bytes: -1, Prob: 0.4}})
}

// TestPlan07WrongRanges: answers that ignore Range (200 with the whole
// object) or carry another range than the one asked for.
func TestPlan07WrongRanges(t *testing.T) {
	t.Parallel()
	runBodyFaults(t, 7, []faults.Rule{
		{Fault: faults.WholeObject, Prob: 0.25},
		{Fault: faults.ShiftRange, Bytes: -1, Prob: 0.3},
	})
}

// TestPlan08Stalls: bodies that stop after a random byte, and answers
// that never send their headers, for longer than --idle-timeout. The
// stalled request is abandoned and the rest re-requested; no connection
// or goroutine is left behind.
func TestPlan08Stalls(t *testing.T) {
	t.Parallel()
	const maxFetches = 8
	r := runBodyFaults(t, 8, []faults.Rule{
		// Stall 0: until segfs gives up and closes the connection.
		{Fault: faults.Stall, Bytes: -1, Prob: 0.25},
		{Fault: faults.StallHeaders, Prob: 0.15},
	}, "--idle-timeout", "1s", "--max-fetches", "8")
	waitFor(t, "the proxy to see every stalled request abandoned", func() bool { return r.e.proxy.Active() == 0 })
	// Idle keep-alive connections hold two goroutines each, and segfs
	// keeps at most two per fetch worker; anything beyond that was left
	// by an abandoned request.
	bound := r.before["goroutines"] + 2*2*maxFetches
	s := harness.WaitStats(t, r.m, "segfs's goroutines back near where they were", func(s map[string]int64) bool {
		return harness.Idle(s) && s["goroutines"] <= bound
	})
	t.Logf("goroutines: %d before the reads, %d after (bound %d)", r.before["goroutines"], s["goroutines"], bound)
}
