package reliability

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
)

// TestPlan22UnmountStalledReads has 64 reads waiting on a remote that
// sends headers and then nothing, and unmounts (SIGTERM): segfs must exit
// cleanly within its grace period and take its mount with it, and every
// read must return (with an error: the data never came).
func TestPlan22UnmountStalledReads(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{}
	for i := range 8 {
		objs[fmt.Sprintf("stall/_%d.fdt", i)] = randomBytes(2200+uint64(i), 2<<20)
	}
	keys := sortedKeys(objs)
	e := newEnv(t, nil, 22, objs)
	m := e.mount(t, cacheDir(t), "--part-size", partSizeFlag, "--prefetch", "none", "--max-fetches", "16")
	e.rules(faults.Rule{Fault: faults.Stall, Bytes: 0}) // until the client goes away
	before := harness.MustStats(t, m)

	const readers = 64
	type result struct {
		i     int
		errno syscall.Errno
		err   error
	}
	results := make(chan result, readers)
	for i := range readers {
		go func() {
			key := keys[i%len(keys)]
			f, err := os.OpenFile(filepath.Join(m.Dir, key), os.O_RDONLY|syscall.O_DIRECT, 0)
			if err != nil {
				results <- result{i: i, err: err}
				return
			}
			defer f.Close()
			rng := rand.New(rand.NewPCG(uint64(i), 22))
			errno, err := readExact(f, objs[key], rng.Int64N(2<<20), 4096+rng.IntN(1<<20))
			results <- result{i, errno, err}
		}()
	}
	s := harness.WaitStats(t, m, fmt.Sprintf("%d reads in flight", readers), func(s map[string]int64) bool {
		return harness.Delta(before, s, "reads") >= readers
	})
	t.Logf("%d reads in flight; %d fetches running, %d stalled bodies", harness.Delta(before, s, "reads"),
		s["running_demand"]+s["running_readahead"]+s["running_background"], e.proxy.Stats().Faults["stall_body"])

	start := time.Now()
	err := m.Unmount()
	took := time.Since(start)
	t.Logf("unmount with %d stalled reads took %v", readers, took.Round(time.Millisecond))
	if err != nil {
		t.Errorf("unmount: %v", err)
	}
	if ok, _ := harness.IsMounted(m.Dir); ok {
		t.Errorf("%s still mounted", m.Dir)
	}
	var failed tally
	deadline := time.After(hangGuard)
	for range readers {
		select {
		case r := <-results:
			if r.err != nil {
				t.Errorf("reader %d: %v", r.i, r.err)
			}
			failed.add(r.errno)
		case <-deadline:
			t.Fatalf("readers still blocked %v after the unmount", hangGuard)
		}
	}
	t.Logf("readers: %v", &failed)
	waitFor(t, "the proxy's stalled requests to end with segfs", func() bool { return e.proxy.Active() == 0 })
}

// TestPlan22KillAndRemount fills the cache, kills segfs with SIGKILL (its
// mount stays behind, dead), and mounts again on the same mountpoint: the
// new segfs must clear the dead mount, reuse the cache (no GET for the
// cached data, counted at the proxy) and read byte-exact.
func TestPlan22KillAndRemount(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{
		"kill/_0.fdt": randomBytes(2210, 3<<20+100),
		"kill/_0.tim": randomBytes(2211, 200<<10),
		"kill/_0.si":  randomBytes(2212, 500),
	}
	e := newEnv(t, nil, 2201, objs)
	dir := cacheDir(t)
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// It counts the parts its reads cached: no segment-aware prefetch.
	opts := e.mountOptions(dir, "--part-size", partSizeFlag, "--prefetch", "none", "--no-segment-prefetch")
	opts.Dir = mnt
	first, err := harness.StartMount(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	checkTree(t, mnt, objs)
	s := harness.WaitIdle(t, first)
	var parts int64
	for _, b := range objs {
		parts += (int64(len(b)) + partSize - 1) / partSize
	}
	if s["cache_parts"] != parts {
		t.Fatalf("%d parts cached, want %d", s["cache_parts"], parts)
	}
	if err := first.Crash(); err != nil {
		t.Fatal(err)
	}
	// Should the test end before a new mount clears the dead one, detach
	// it (this runs after the new mount's own cleanup).
	t.Cleanup(func() {
		if ok, _ := harness.IsMounted(mnt); !ok {
			return
		}
		err := unix.Unmount(mnt, unix.MNT_DETACH)
		if errors.Is(err, unix.EPERM) {
			err = exec.Command("fusermount3", "-u", "-z", mnt).Run()
		}
		if err != nil {
			t.Errorf("detach the dead mount %s: %v", mnt, err)
		}
	})
	if _, err := os.ReadDir(mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("listing the killed mount: %v; want ENOTCONN (a dead mount)", err)
	}

	before := e.proxy.Stats()
	opts.OverDeadMount = true
	second, err := harness.StartMount(t.Context(), opts)
	if err != nil {
		t.Fatalf("mount over the dead mount: %v", err)
	}
	t.Cleanup(func() {
		if err := second.Unmount(); err != nil {
			t.Error(err)
		}
	})
	if !strings.Contains(second.Log(), "clearing the dead mount") {
		t.Errorf("segfs did not say it cleared the dead mount:\n%s", second.Log())
	}
	if n := mountsAt(t, mnt); n != 1 {
		t.Errorf("%d mounts at %s; want exactly the new one (the dead one cleared, not stacked)", n, mnt)
	}
	harness.DropPageCache(t)
	checkTree(t, mnt, objs)
	after := harness.WaitIdle(t, second)
	p := e.proxy.Stats()
	t.Logf("after the kill: %d GETs, %d disk hits, %d corrupt parts removed", p.Requests["get"]-before.Requests["get"],
		after["disk_hits"], after["cache_corrupt_removed"])
	if n := p.Requests["get"] - before.Requests["get"]; n != 0 {
		t.Errorf("%d GETs after the restart; want 0, every part was cached", n)
	}
	if after["cache_corrupt_removed"] != 0 {
		t.Errorf("%d parts removed as corrupt", after["cache_corrupt_removed"])
	}
	checkCache(t, dir, objs)
}

// mountsAt counts the entries of /proc/self/mountinfo whose mount point is
// dir.
func mountsAt(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == dir {
			n++
		}
	}
	return n
}
