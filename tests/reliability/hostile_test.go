package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/osremote"
)

// Plan case 25, hostile input: keys no file system can hold, listings
// whose sizes lie, and a listing far longer than any real index.

// TestPlan25HostilePaths mounts a bucket whose listing holds keys with
// "..", "." and empty elements, absolute keys, over-long names, a key
// that is also a directory, a directory marker with content, names that
// differ only by case, and very long names and paths (NUL bytes:
// TestPlan25NULKeys). Most
// are real objects; those the server cannot hold are added to its
// listing by the proxy. Beside the unusable keys are real files whose
// names are their first elements ("a" beside "a//b", "a/." and "a/..").
// segfs must show exactly the usable names, read them byte-exact, skip
// each of the rest with exactly one warning, and keep every file it
// writes inside its cache directory, under hashed names.
func TestPlan25HostilePaths(t *testing.T) {
	t.Parallel()
	long255 := strings.Repeat("l", 251) + ".fdt"
	var longPath strings.Builder
	for i := range 4 {
		fmt.Fprintf(&longPath, "%s/", strings.Repeat(string(rune('p'+i)), 200))
	}
	longPath.WriteString("deep.fdt")
	real := map[string][]byte{
		"case/Seg.fdt":     randomBytes(2510, 3000),
		"case/seg.fdt":     randomBytes(2511, 3001),
		"case/SEG.FDT":     randomBytes(2512, 3002),
		"long/" + long255:  randomBytes(2513, 70<<10),
		longPath.String():  randomBytes(2514, 1<<20+3),
		"odd/a..b":         randomBytes(2515, 10),
		"odd/...":          randomBytes(2516, 11),
		"odd/sp ace":       randomBytes(2517, 12),
		"odd/uni-é":        randomBytes(2518, 13),
		"odd/per%cent":     randomBytes(2519, 14),
		`odd/back\slash`:   randomBytes(2520, 15),
		"odd/q?mark":       randomBytes(2521, 16),
		"odd/hash#":        randomBytes(2522, 17),
		"conflict/f/child": randomBytes(2523, 18),
		"trail/file":       randomBytes(2524, 19),
		// Files named by the first element of unusable keys: each must
		// stay a file, not become a directory of nothing.
		"a":    randomBytes(2525, 70<<10),
		"e":    randomBytes(2526, 20),
		"dots": randomBytes(2527, 21),
		"x":    randomBytes(2528, 22),
	}
	// Keys the server cannot hold, listed by the proxy; none is usable.
	hostile := []string{
		"../escape.fdt", "..", ".", "a/../../escape2.fdt", "./dot.fdt", "x//y.fdt", "/abs.fdt",
		"a//b", "a/.", "a/..", "e/.", "dots/..", "../evil.fdt.zst", "long/" + strings.Repeat("m", 256),
		"conflict/f",  // also a directory
		"trail/file/", // a directory marker with content
	}
	// segfs drops a directory marker ("trail/file/") silently, as S3
	// consoles make them for empty folders; every other one is warned of.
	wantWarned := map[string]int{}
	for _, k := range hostile {
		if !strings.HasSuffix(k, "/") {
			wantWarned[k] = 1
		}
	}
	var entries []faults.ListEntry
	for i, k := range hostile {
		entries = append(entries, faults.ListEntry{Key: k, Size: int64(100 + i)})
	}
	e := newEnv(t, nil, 2502, real)
	base := t.TempDir()
	dir := filepath.Join(base, "cache")
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	e.rules(faults.Rule{Ops: faults.OpList, Fault: faults.ListAppend, Entries: entries})
	opts := e.mountOptions(dir, "--part-size", "64KiB", "--prefetch", "all")
	opts.Dir = mnt
	m := harness.StartMountT(t, opts)
	if n := e.proxy.Stats().Fired["list_append"]; n == 0 {
		t.Fatal("the hostile listing was not served")
	}
	checkTree(t, mnt, real)
	s := harness.WaitIdle(t, m)
	warned := skipWarnings(t, m.Log())
	t.Logf("%d hostile keys listed; segfs warned of %d; %d parts cached", len(hostile), len(warned), s["cache_parts"])
	if !maps.Equal(warned, wantWarned) {
		for _, k := range slices.Sorted(maps.Keys(wantWarned)) {
			if warned[k] != 1 {
				t.Errorf("key %q: warned %d times, want once", k, warned[k])
			}
		}
		for _, k := range slices.Sorted(maps.Keys(warned)) {
			if wantWarned[k] == 0 {
				t.Errorf("key %q: warned %d times, want never (it is not an unusable key)", k, warned[k])
			}
		}
	}
	checkCache(t, dir, real)
	siblings, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range siblings {
		if d.Name() != "cache" && d.Name() != "mnt" {
			t.Errorf("%s appeared beside the cache directory and the mountpoint", filepath.Join(base, d.Name()))
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(base), "escape.fdt")); err == nil {
		t.Errorf("a file escaped to %s", filepath.Dir(base))
	}
}

// TestPlan25NULKeys mounts a bucket whose listing holds keys with a NUL
// byte beside real files, one of them named by such a key's first
// element. XML cannot carry a NUL, so such a listing decodes only if it
// is URL encoded, which a client asks for with encoding-type=url (S3
// honours it; versitygw ignores it, and the proxy then encodes the
// answer as S3 does). One such key must not keep the bucket from
// mounting: segfs must show the real files byte-exact and skip each of
// those keys with exactly one warning.
func TestPlan25NULKeys(t *testing.T) {
	t.Parallel()
	real := map[string][]byte{
		"ctl":       randomBytes(2570, 30),
		"ok/ok.fdt": randomBytes(2571, 70<<10),
		"sp ace+%&": randomBytes(2572, 31), // a key URL encoding changes
	}
	hostile := []string{"ctl/a\x00b.fdt", "\x00"}
	wantWarned := map[string]int{}
	var entries []faults.ListEntry
	for i, k := range hostile {
		entries = append(entries, faults.ListEntry{Key: k, Size: int64(100 + i)})
		wantWarned[k] = 1
	}
	e := newEnv(t, nil, 2570, real)
	e.rules(faults.Rule{Ops: faults.OpList, Fault: faults.ListAppend, Entries: entries})
	m := e.mount(t, cacheDir(t))
	checkTree(t, m.Dir, real)
	if warned := skipWarnings(t, m.Log()); !maps.Equal(warned, wantWarned) {
		t.Errorf("segfs warned of %q; want once of each key with a NUL, %q", slices.Sorted(maps.Keys(warned)), hostile)
	}
}

// skipWarnings returns, by key, how often segfs's log warned that it
// skipped a listed object.
func skipWarnings(t *testing.T, log string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "level=WARN") || !strings.Contains(line, `msg="skipping object`) {
			continue
		}
		key, ok := logAttr(line, "key")
		if !ok {
			t.Errorf("a skip warning without a key: %s", line)
			continue
		}
		out[key]++
	}
	return out
}

// logAttr returns the value of the attribute name in a line of slog's
// text format, unquoted.
func logAttr(line, name string) (string, bool) {
	_, rest, ok := strings.Cut(line, " "+name+"=")
	if !ok {
		return "", false
	}
	if !strings.HasPrefix(rest, `"`) {
		v, _, _ := strings.Cut(rest, " ")
		return v, true
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", false
	}
	v, err := strconv.Unquote(q)
	return v, err == nil
}

// TestPlan25LyingSize mounts, with the default flags, a bucket whose
// listing claims 1 TiB for an object of 300 KiB. The file shows 1 TiB;
// opening it must cost what opening any file costs (its background fill
// queues a window of parts, not 131,072 of them, and stops at the first
// that fails); its reads fail, with ESTALE where the server's answer
// shows another size than the listed one (the file is not the object
// the tree shows) or EIO where it refuses a range past the true end,
// and never return other bytes; and the
// daemon serves the file beside it byte-exact.
func TestPlan25LyingSize(t *testing.T) {
	t.Parallel()
	const (
		claimed    = 1 << 40
		maxFetches = 16        // segfs's default --max-fetches
		heapBound  = 256 << 20 // the pool's part buffers (16 x 8 MiB) and an idle mount's heap, with room
	)
	objs := map[string][]byte{
		"lie/huge.bin":  randomBytes(2540, 300<<10),
		"lie/aside.bin": randomBytes(2541, 200<<10+7),
	}
	e := newEnv(t, nil, 2540, objs)
	e.rules(faults.Rule{Ops: faults.OpList, Fault: faults.ListResize,
		Entries: []faults.ListEntry{{Key: "lie/huge.bin", Size: claimed}}})
	m := e.mount(t, cacheDir(t))
	if n := e.proxy.Stats().Fired["list_resize"]; n == 0 {
		t.Fatal("the lying listing was not served")
	}
	big := filepath.Join(m.Dir, "lie", "huge.bin")
	info, err := os.Stat(big)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() != claimed {
		t.Fatalf("%s shows %d bytes, want the listed %d", big, info.Size(), int64(claimed))
	}

	f, err := os.Open(big)
	if err != nil {
		t.Fatalf("open the file listed at 1 TiB: %v", err)
	}
	defer f.Close()
	// The first part (readahead, started by the open) and the fill's
	// window of --max-fetches parts; "lie/aside.bin" sorts before the
	// file, so the open prefetches no small file after it.
	cheap := func(when string) map[string]int64 {
		t.Helper()
		s := harness.MustStats(t, m)
		t.Logf("%s: inflight_parts %d, heap %d MiB, %d GETs of it at the proxy", when, s["inflight_parts"], s["heap_bytes"]>>20,
			e.proxy.Stats().GetsByKey["lie/huge.bin"])
		if s["inflight_parts"] > maxFetches+1 {
			t.Errorf("%s: %d part fetches queued or running; want at most --max-fetches+1 = %d", when, s["inflight_parts"], maxFetches+1)
		}
		return s
	}
	// Later the fill's garbage makes the heap grow until the collector
	// runs (the Go memory limit is segfs's bound), so the heap is
	// checked only here.
	if s := cheap("right after the open"); s["heap_bytes"] > heapBound {
		t.Errorf("right after the open: heap %d bytes; want at most %d", s["heap_bytes"], heapBound)
	}

	data := objs["lie/huge.bin"]
	for _, off := range []int64{0, int64(len(data)) + 4096, claimed - 4096} {
		errno, err := readExact(f, data, off, 4096)
		if err != nil {
			t.Errorf("read at %d: %v", off, err)
		} else if errno != syscall.ESTALE && errno != syscall.EIO {
			t.Errorf("read at %d: errno %d (%s); want ESTALE (the server's answer shows another size than the listed one) or EIO (it refuses the range)", off, errno, errnoName(errno))
		}
	}
	cheap("after the reads")
	// The fill stopped at its first failed part: the object cost a
	// window of GETs and the reads' own, not one per part it claims
	// (131,072; a segfs that went on fetching sent thousands a second).
	harness.WaitStats(t, m, "no fetch queued or running", func(s map[string]int64) bool { return s["inflight_parts"] == 0 })
	// The reads cost more than one GET each: the kernel retries a failed
	// readahead page by page. 256 is far from one per claimed part.
	if gets := e.proxy.Stats().GetsByKey["lie/huge.bin"]; gets > 256 {
		t.Errorf("%d GETs of the object listed at 1 TiB; want at most 256 (the fill's window, the first part and the reads), not one per part it claims", gets)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "lie", "aside.bin")); err != nil || !bytes.Equal(b, objs["lie/aside.bin"]) {
		t.Errorf("the neighbour: read %v (bytes equal: %v)", err, bytes.Equal(b, objs["lie/aside.bin"]))
	}
	harness.MustStats(t, m) // the daemon still answers
}

// TestPlan25ZstdHugeSize mounts a bucket whose listing claims 2^62 bytes
// for a seekable zstd object (a segfs of commit 42377c0 sized the tail it
// fetches as a 4096th of that and died allocating it): a real object
// whose listed size lies, and a key listed with no object behind it.
// segfs must not crash, and one such object must not keep the shard
// from mounting: it mounts, shows the object as it is, fails its reads
// with EIO or ESTALE (never other bytes), and serves the plain file
// beside it byte-exact.
func TestPlan25ZstdHugeSize(t *testing.T) {
	t.Parallel()
	const claimed = 1 << 62
	var packed bytes.Buffer
	logical := randomBytes(2550, 512<<10)
	if _, _, err := compress.Encode(context.Background(), &packed, bytes.NewReader(logical), compress.EncoderOptions{FrameSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rule faults.Rule
	}{
		{"size lies", faults.Rule{Ops: faults.OpList, Fault: faults.ListResize,
			Entries: []faults.ListEntry{{Key: "z/huge.fdt.zst", Size: claimed}}}},
		{"listed only", faults.Rule{Ops: faults.OpList, Fault: faults.ListAppend,
			Entries: []faults.ListEntry{{Key: "z/ghost.fdt.zst", Size: claimed}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := map[string][]byte{
				"z/huge.fdt.zst": packed.Bytes(),
				"z/plain.fdt":    randomBytes(2551, 100<<10),
			}
			e := newEnv(t, nil, 2550, objs)
			e.rules(tc.rule)
			key := tc.rule.Entries[0].Key
			opts := e.mountOptions(cacheDir(t))
			opts.ReadyTimeout = hangGuard
			m, err := harness.StartMount(context.Background(), opts)
			if n := e.proxy.Stats().Fired[tc.rule.Fault.String()]; n == 0 {
				t.Fatal("the lying listing was not served")
			}
			if err != nil {
				t.Fatalf("one object whose listed size lies kept the shard from mounting: %v", err)
			}
			t.Cleanup(func() {
				if err := m.Unmount(); err != nil {
					t.Error(err)
				}
			})
			t.Log("segfs mounted")
			if b, err := os.ReadFile(filepath.Join(m.Dir, "z", "plain.fdt")); err != nil || !bytes.Equal(b, objs["z/plain.fdt"]) {
				t.Errorf("the plain file: read %v (bytes equal: %v)", err, bytes.Equal(b, objs["z/plain.fdt"]))
			}
			// Shown as it is (or, were a table read, under its name
			// without .zst): a read gives the true bytes, EIO or
			// ESTALE (the object is not what was listed), nothing else.
			name := strings.TrimPrefix(key, "z/")
			truth := map[string][]byte{name: objs[key], strings.TrimSuffix(name, ".zst"): logical}
			found := 0
			for name, want := range truth {
				f, err := os.Open(filepath.Join(m.Dir, "z", name))
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				found++
				errno, err := readExact(f, want, 0, 4096)
				f.Close()
				t.Logf("z/%s is shown; a read at 0 gives errno %d (%s)", name, errno, errnoName(errno))
				if err != nil {
					t.Errorf("z/%s: %v", name, err)
				} else if errno != 0 && errno != syscall.EIO && errno != syscall.ESTALE {
					t.Errorf("z/%s: a read failed with errno %d (%s); want the true bytes, EIO or ESTALE", name, errno, errnoName(errno))
				}
			}
			if found != 1 {
				t.Errorf("%s is shown under %d names; want one", key, found)
			}
			harness.MustStats(t, m)
			if crashed(m.Log()) {
				t.Errorf("segfs logged a panic:\n%s", tail(m.Log(), 4096))
			}

			// segfs restore of the same listing: the lying object fails
			// alone, named, and the plain file beside it is restored.
			restoreFailsAlone(t, e, []string{key}, "z/plain.fdt", objs["z/plain.fdt"])
		})
	}
}

// crashed reports whether a segfs log shows a Go panic or fatal error.
func crashed(log string) bool {
	return strings.Contains(log, "panic:") || strings.Contains(log, "fatal error:") || strings.Contains(log, "goroutine 1 [")
}

// TestPlan25HugeListing mounts a bucket whose listing the proxy makes
// 200,000 keys longer ("bulk/NNNNNN", small sizes). The mount must show
// every one of them, and segfs's peak resident set (VmHWM) must stay
// within the memory bound it logs at mount for that many keys.
func TestPlan25HugeListing(t *testing.T) {
	// Not parallel: listing, parsing and mounting this many keys takes
	// both CPUs for seconds, and the mount's start is bounded (a hang
	// guard) like every other.
	const bulk = 200_000
	objs := map[string][]byte{"real/one.fdt": randomBytes(2560, 300<<10)}
	entries := make([]faults.ListEntry, bulk)
	for i := range entries {
		entries[i] = faults.ListEntry{Key: fmt.Sprintf("bulk/%06d", i), Size: int64(1 + i%4096)}
	}
	e := newEnv(t, nil, 2560, objs)
	e.rules(faults.Rule{Ops: faults.OpList, Fault: faults.ListAppend, Entries: entries})
	// Small fixed terms, so that the tree's term (per key) is most of
	// the bound.
	m := e.mount(t, cacheDir(t), "--part-size", "1MiB", "--max-fetches", "4", "--memory-cache", "0", "--frame-cache", "0", "--cache-size", "256MiB")
	if n := e.proxy.Stats().Fired["list_append"]; n == 0 {
		t.Fatal("the long listing was not served")
	}
	d, err := os.Open(filepath.Join(m.Dir, "bulk"))
	if err != nil {
		t.Fatal(err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != bulk {
		t.Errorf("bulk/ lists %d names, want %d", len(names), bulk)
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "real", "one.fdt")); err != nil || !bytes.Equal(b, objs["real/one.fdt"]) {
		t.Errorf("real/one.fdt: read %v (bytes equal: %v)", err, bytes.Equal(b, objs["real/one.fdt"]))
	}
	bound := memoryBound(t, m.Log())
	st, err := harness.ReadProcStatus(m.Pid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d keys listed: peak RSS %d MiB, RSS %d MiB, memory bound %d MiB", bulk+len(objs), st.VmHWM>>20, st.VmRSS>>20, bound>>20)
	if st.VmHWM > bound {
		t.Errorf("segfs's peak resident set %d bytes is above the memory bound it logged, %d", st.VmHWM, bound)
	}
}

// memoryBound returns the bytes of the "memory bound" line segfs logs at
// mount.
func memoryBound(t *testing.T, log string) int64 {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="memory bound"`) {
			continue
		}
		v, ok := logAttr(line, "bytes")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n <= 0 {
			t.Fatalf("memory bound line without a byte count: %s", line)
		}
		terms, _ := logAttr(line, "terms")
		t.Logf("memory bound %d bytes: %s", n, terms)
		return n
	}
	t.Fatalf("segfs logged no memory bound; log:\n%s", tail(log, 4096))
	return 0
}

// TestPlan25NegativeSize mounts a bucket whose listing gives a plain
// object and a seekable zstd one sizes below zero. Neither may keep the
// shard from mounting or crash segfs: each fails on its own (a stat or
// a read gives an error, never bytes), the file beside them is served
// byte-exact, and segfs restore fails the two by name and restores it.
func TestPlan25NegativeSize(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{
		"n/neg.bin":     randomBytes(2560, 1000),
		"n/neg.fdt.zst": randomBytes(2561, 1000),
		"n/ok.bin":      randomBytes(2562, 70<<10),
	}
	e := newEnv(t, nil, 2560, objs)
	e.rules(faults.Rule{Ops: faults.OpList, Fault: faults.ListResize,
		Entries: []faults.ListEntry{{Key: "n/neg.bin", Size: -1}, {Key: "n/neg.fdt.zst", Size: -5}}})
	m := e.mount(t, cacheDir(t))
	if n := e.proxy.Stats().Fired["list_resize"]; n == 0 {
		t.Fatal("the lying listing was not served")
	}
	for _, name := range []string{"neg.bin", "neg.fdt.zst"} {
		b, err := os.ReadFile(filepath.Join(m.Dir, "n", name))
		t.Logf("n/%s: %d bytes, %v", name, len(b), err)
		if err == nil && len(b) > 0 {
			t.Errorf("n/%s, listed below zero bytes: read %d bytes; want an error", name, len(b))
		}
	}
	if b, err := os.ReadFile(filepath.Join(m.Dir, "n", "ok.bin")); err != nil || !bytes.Equal(b, objs["n/ok.bin"]) {
		t.Errorf("the file beside them: %v (bytes equal: %v)", err, bytes.Equal(b, objs["n/ok.bin"]))
	}
	harness.MustStats(t, m)
	if crashed(m.Log()) {
		t.Errorf("segfs logged a panic:\n%s", tail(m.Log(), 4096))
	}

	restoreFailsAlone(t, e, []string{"n/neg.bin", "n/neg.fdt.zst"}, "n/ok.bin", objs["n/ok.bin"])
}

// restoreFailsAlone runs segfs restore of e's bucket through its proxy
// and fails the test unless it exits 1 naming each of bad, leaves none
// of them under its name, and restores good byte-exact (want), without
// a panic.
func restoreFailsAlone(t *testing.T, e *env, bad []string, good string, want []byte) {
	t.Helper()
	dest := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, binaries.Segfs, "restore", "--endpoint", e.proxy.URL(), "--path-style", "--region", harness.Region,
		"--no-cache", "s3://"+e.bucket, dest)
	cmd.Env = harness.ChildEnv(e.srv.Env()...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("segfs restore: %v; want exit 1:\n%s", err, out)
	}
	for _, key := range bad {
		if !strings.Contains(string(out), "restore: "+key+": ") {
			t.Errorf("segfs restore does not name %s as failed:\n%s", key, out)
		}
		if _, err := os.Stat(filepath.Join(dest, filepath.FromSlash(key))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("restore left %s under its name: %v", key, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(good))); err != nil || !bytes.Equal(b, want) {
		t.Errorf("restore of %s beside them: %v (bytes equal: %v)", good, err, bytes.Equal(b, want))
	}
	if crashed(string(out)) {
		t.Errorf("segfs restore panicked:\n%s", tail(string(out), 4096))
	}
}

// TestPlan25NamesReachNoTerminal mounts a bucket holding an object whose
// key has a newline ("a\nsegfs: forged") beside a Lucene file, and a key
// holding an escape sequence ("b\x1b[31mred") that the proxy adds to the
// listing: versitygw's XML, which cannot carry an ESC, would list it as
// U+FFFD, while S3 lists it URL encoded. segfs status --all, segfs warm
// (which fails the listed-only key) and segfs verify must print each
// file on one line, the two keys quoted as Go strings and the Lucene
// name as it is, no line the newline forged and no ESC byte, nor may the
// daemon's log; status --json names each key exactly.
func TestPlan25NamesReachNoTerminal(t *testing.T) {
	t.Parallel()
	const forged, red = "a\nsegfs: forged", "b\x1b[31mred"
	objs := map[string][]byte{
		forged:   randomBytes(2580, 70<<10),
		"_0.cfs": randomBytes(2581, 50<<10),
	}
	e := newEnv(t, nil, 2580, objs)
	e.rules(faults.Rule{Ops: faults.OpList, Fault: faults.ListAppend, Entries: []faults.ListEntry{{Key: red, Size: 100}}})
	m := e.mount(t, cacheDir(t), "--prefetch", "none")
	if n := e.proxy.Stats().Fired["list_append"]; n == 0 {
		t.Fatal("the listing with the escape sequence was not served")
	}
	names, err := os.ReadDir(m.Dir)
	if err != nil || len(names) != 3 {
		t.Fatalf("the mount lists %v (%v), want the 3 keys", names, err)
	}

	// run runs segfs with args and returns its stdout, its stderr and
	// its exit code, failing the test if either output has an ESC byte
	// or a line that the key's newline began.
	run := func(args ...string) (string, string, int) {
		t.Helper()
		stdout, stderr, code := segfsRun(t, e, args...)
		noForgery(t, "segfs "+args[0]+"'s stdout", stdout)
		noForgery(t, "segfs "+args[0]+"'s stderr", stderr)
		return stdout, stderr, code
	}
	text, errs, code := run("status", "--all", m.Dir)
	if code != 0 {
		t.Fatalf("segfs status --all: exit %d: %s", code, errs)
	}
	for _, want := range []string{` "a\nsegfs: forged"` + "\n", ` "b\x1b[31mred"` + "\n", " _0.cfs\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("segfs status --all has no line ending in %q:\n%s", want, text)
		}
	}
	js, _, code := run("status", "--all", "--json", m.Dir)
	var rep struct{ Files []struct{ Name string } }
	if err := json.Unmarshal([]byte(js), &rep); code != 0 || err != nil {
		t.Fatalf("segfs status --json: exit %d, %v:\n%s", code, err, js)
	}
	listed := map[string]bool{}
	for _, f := range rep.Files {
		listed[f.Name] = true
	}
	if !listed[forged] || !listed[red] || !listed["_0.cfs"] {
		t.Errorf("segfs status --json lists %q, want the 3 keys exactly", slices.Sorted(maps.Keys(listed)))
	}

	out, errs, code := run("warm", m.Dir)
	if code != 1 {
		t.Errorf("segfs warm: exit %d, want 1 (the listed-only key fails)\n%s%s", code, out, errs)
	}
	for _, want := range []string{`cached "a\nsegfs: forged"` + "\n", "cached _0.cfs\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("segfs warm printed no line %q:\n%s", want, out)
		}
	}
	t.Logf("segfs warm:\n%s%s", out, errs)
	if !strings.Contains(errs, "segfs: warm: "+`"b\x1b[31mred"`+": ") {
		t.Errorf("segfs warm does not name the key that failed, quoted:\n%s", errs)
	}

	out, errs, code = run("verify", "--endpoint", e.proxy.URL(), "--path-style", "--region", harness.Region,
		"--cache-dir", cacheDir(t), "s3://"+e.bucket)
	if code != 1 {
		t.Errorf("segfs verify: exit %d, want 1 (none of the objects is a Lucene file)\n%s%s", code, out, errs)
	}
	if rows := strings.Count(out, "\n"); rows != 1+3+1 {
		t.Errorf("segfs verify printed %d lines, want 5 (heading, a row a file, summary):\n%s", rows, out)
	}
	t.Logf("segfs verify:\n%s", out)
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	noForgery(t, "the daemon's log", m.Log())
}

// noForgery fails the test if out has an ESC byte, or a line that the
// key "a\nsegfs: forged" began.
func noForgery(t *testing.T, what, out string) {
	t.Helper()
	if strings.ContainsRune(out, 0x1b) {
		t.Errorf("%s has an ESC byte:\n%q", what, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "segfs: forged") {
			t.Errorf("%s has a line a key forged:\n%q", what, out)
			return
		}
	}
}

// segfsRun runs segfs with args and the credentials of e's server, and
// returns its stdout, its stderr and its exit code.
func segfsRun(t *testing.T, e *env, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, binaries.Segfs, args...)
	cmd.Env = harness.ChildEnv(e.srv.Env()...)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("segfs %s: %v\n%s", args[0], err, errs.String())
	}
	return out.String(), errs.String(), code
}

// TestPlan25IndexPathNegativeSize lists an OpenSearch index's
// remote-index-path file at -1 bytes. segfs mount, verify and restore
// with --layout opensearch must each refuse the shard with an error
// naming the file and the size, and none may panic (a segfs of
// c454fcf died in makeslice sizing the file's buffer).
func TestPlan25IndexPathNegativeSize(t *testing.T) {
	t.Parallel()
	const uuid = "negIndexPathUUIDaBcDeF"
	objs := map[string][]byte{}
	put := func(key string, data []byte) error {
		objs[key] = data
		return nil
	}
	o := osremote.Options{IndexUUID: uuid, Shard: 0, PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1,
		Version: 2, IndexPathFile: true, Seed: 2590}
	files, err := osremote.ShardFiles([]string{"_0"}, 3, 50<<10, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := osremote.New(put, o).Upload(files, 1, 3); err != nil {
		t.Fatal(err)
	}
	var indexFile string
	for k := range objs {
		if strings.HasPrefix(k, layout.IndexPathDir+"/remote_path_") {
			indexFile = k
		}
	}
	if indexFile == "" {
		t.Fatalf("osremote wrote no remote-index-path file: %q", slices.Sorted(maps.Keys(objs)))
	}
	e := newEnv(t, nil, 2590, objs)
	e.rules(faults.Rule{Ops: faults.OpList, Fault: faults.ListResize, Entries: []faults.ListEntry{{Key: indexFile, Size: -1}}})
	layoutArgs := []string{"--layout", "opensearch", "--index-uuid", uuid, "--shard", "0"}
	// refused fails the test unless out refuses the file by name and
	// size, without a panic.
	refused := func(what, out string) {
		t.Helper()
		name := strings.TrimPrefix(indexFile, layout.IndexPathDir+"/")
		if !strings.Contains(out, name) || !strings.Contains(out, "listed with -1 bytes") {
			t.Errorf("%s does not refuse %s, listed with -1 bytes, by name:\n%s", what, indexFile, tail(out, 4096))
		}
		if crashed(out) {
			t.Errorf("%s panicked:\n%s", what, tail(out, 4096))
		}
	}

	refused("segfs mount", mountFails(t, e, cacheDir(t), layoutArgs...))
	if n := e.proxy.Stats().Fired["list_resize"]; n == 0 {
		t.Fatal("the lying listing was not served")
	}
	store := []string{"--endpoint", e.proxy.URL(), "--path-style", "--region", harness.Region}
	out, errs, code := segfsRun(t, e, slices.Concat([]string{"verify"}, store, layoutArgs, []string{"--cache-dir", cacheDir(t), "s3://" + e.bucket})...)
	if code != 2 {
		t.Errorf("segfs verify: exit %d, want 2 (the store cannot be read as a shard)", code)
	}
	refused("segfs verify", out+errs)
	out, errs, code = segfsRun(t, e, slices.Concat([]string{"restore"}, store, layoutArgs, []string{"--no-cache", "s3://" + e.bucket, t.TempDir()})...)
	if code == 0 {
		t.Errorf("segfs restore: exit 0, want it to refuse the shard")
	}
	refused("segfs restore", out+errs)
}
