package reliability

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
)

// TestSplitPartUnder503s: a cold part fetched as several GETs in parallel
// (--split-size) on an idle mount, every one of which first gets a 503
// SlowDown. Each GET is retried on its own, the read is byte-exact, no
// fetch fails, and the cache holds the part whole.
func TestSplitPartUnder503s(t *testing.T) {
	t.Parallel()
	const part = 4 << 20
	objs := map[string][]byte{"split.fdt": randomBytes(131, 2*part)}
	e := newEnv(t, nil, 1, objs)
	m := e.mount(t, cacheDir(t), "--part-size", "4MiB", "--split-size", "1MiB", "--prefetch", "none")
	e.rules(faults.Rule{Fault: faults.SlowDown, Times: 1, PerRequest: true})

	f, err := os.OpenFile(filepath.Join(m.Dir, "split.fdt"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pb, sb := e.proxy.Stats(), harness.MustStats(t, m)
	// 1 MiB of the second part: more than a small read, so it waits for
	// its whole part, whose fetch splits into four 1 MiB GETs.
	if errno, err := readExact(f, objs["split.fdt"], part, 1<<20); err != nil || errno != 0 {
		t.Fatalf("read of a split part under 503s: %v %v", errnoName(errno), err)
	}
	sa := harness.WaitIdle(t, m)
	pa := e.proxy.Stats()
	gets, distinct := pa.Requests["get"]-pb.Requests["get"], pa.DistinctGets-pb.DistinctGets
	t.Logf("%d GETs for %d distinct requests; segfs: %d parts split into %d GETs, %d retries, %d fetch errors",
		gets, distinct, harness.Delta(sb, sa, "parts_split"), harness.Delta(sb, sa, "split_gets"), harness.Delta(sb, sa, "retries"), harness.Delta(sb, sa, "fetch_errors"))
	if harness.Delta(sb, sa, "parts_split") != 1 || harness.Delta(sb, sa, "split_gets") != 4 {
		t.Errorf("%d parts split into %d GETs; want 1 into 4", harness.Delta(sb, sa, "parts_split"), harness.Delta(sb, sa, "split_gets"))
	}
	if distinct != 4 || gets != 8 {
		t.Errorf("%d GETs of %d distinct requests; want each of the 4 ranges sent twice", gets, distinct)
	}
	if n := harness.Delta(sb, sa, "fetch_errors"); n != 0 {
		t.Errorf("%d part fetches failed; a 503 per range must be retried", n)
	}
	if rep := checkCache(t, mustCacheDir(m), objs); rep.parts != 1 {
		t.Errorf("%d parts in the cache, want the one read", rep.parts)
	}
}
