package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// --passthrough, seen from outside: objects whose parts are all cached get
// a whole-object file, later opens are served by the kernel from it (no
// read reaches segfs), the file survives a remount, a damaged one is found
// and the object fetched again, and a file open in the usual mode keeps
// every further open in that mode until it is closed.

// mountPassthrough mounts with --passthrough. Where the kernel, the
// privileges and the cache's file system allow passthrough
// (passthroughPossible), a mount that did not turn it on fails the test;
// elsewhere the test is skipped, saying why.
func mountPassthrough(t *testing.T, srv *harness.Server, bucket, cacheDir string, args ...string) *harness.Mount {
	t.Helper()
	why := passthroughPossible(cacheDir)
	m := mountCached(t, srv, bucket, cacheDir, append([]string{"--passthrough", "--part-size", "1MiB"}, args...)...)
	if harness.MustStats(t, m)["passthrough"] != 1 {
		if why != "" {
			t.Skipf("passthrough unavailable here (%s); segfs log:\n%s", why, m.Log())
		}
		t.Fatalf("passthrough is off, though the kernel, the privileges and the cache's file system allow it; segfs log:\n%s", m.Log())
	}
	return m
}

// overlayfsMagic is overlayfs's statfs type.
const overlayfsMagic = 0x794c7630

// passthroughPossible says why FUSE passthrough cannot work here, ""
// when it can: it needs Linux 6.9 or later, root (registering a backing
// file takes CAP_SYS_ADMIN), and a cache that is not on a stacked file
// system. It judges from outside segfs, so that segfs's own probe is
// what the test checks.
func passthroughPossible(cacheDir string) string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return fmt.Sprintf("uname: %v", err)
	}
	var rel []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	var major, minor int
	if _, err := fmt.Sscanf(string(rel), "%d.%d", &major, &minor); err != nil {
		return fmt.Sprintf("kernel release %q: %v", rel, err)
	}
	if major < 6 || major == 6 && minor < 9 {
		return fmt.Sprintf("Linux %d.%d, before 6.9", major, minor)
	}
	if os.Geteuid() != 0 {
		return "not root"
	}
	dir := cacheDir
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err == nil {
			if st.Type == overlayfsMagic {
				return "the cache is on overlayfs"
			}
			return ""
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		return "no file system found for " + cacheDir
	}
}

// waitWhole waits until n whole-object files are indexed and no fetch is
// in flight.
func waitWhole(t *testing.T, m *harness.Mount, n int64) map[string]int64 {
	t.Helper()
	return harness.WaitStats(t, m, "whole-object files of every object", func(s map[string]int64) bool {
		return harness.Idle(s) && s["promote_pending"] == 0 && s["whole_objects"] == n
	})
}

func TestPassthrough(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := cacheObjects()
	putObjects(t, srv, bucket, objs)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	n := int64(len(objs))

	m := mountPassthrough(t, srv, bucket, cacheDir)
	checkObjects(t, m.Dir, objs)
	filled := waitWhole(t, m, n)
	if filled["cache_parts"] != 0 {
		t.Errorf("%d part files left beside the whole-object files", filled["cache_parts"])
	}
	// Every object again: in passthrough mode, byte-exact, and not one
	// read reaches segfs.
	checkObjects(t, m.Dir, objs)
	after := harness.MustStats(t, m)
	if d := harness.Delta(filled, after, "passthrough_opens"); d != n {
		t.Errorf("%d passthrough opens, want %d", d, n)
	}
	if d := harness.Delta(filled, after, "reads"); d != 0 {
		t.Errorf("%d reads reached segfs from passthrough opens", d)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}

	// A remount serves every object from its whole-object file: no GET.
	harness.DropPageCache(t)
	m = mountPassthrough(t, srv, bucket, cacheDir)
	checkObjects(t, m.Dir, objs)
	s := harness.MustStats(t, m)
	if s["gets"] != 0 || s["reads"] != 0 || s["passthrough_opens"] != n {
		t.Errorf("remount: %d GETs, %d reads through segfs, %d passthrough opens; want 0, 0, %d",
			s["gets"], s["reads"], s["passthrough_opens"], n)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}

	// A byte flipped in the largest whole-object file: the next open finds
	// the seal broken, removes the file, and the object is fetched again.
	obj := largestFile(t, cacheDir, ".obj")
	flipByte(t, obj, 12345)
	m = mountPassthrough(t, srv, bucket, cacheDir)
	checkObjects(t, m.Dir, objs)
	s = waitWhole(t, m, n)
	if s["bad_whole_objects"] != 1 || s["gets"] == 0 {
		t.Errorf("after a flipped byte: %d bad whole-object files removed, %d GETs; want 1, > 0", s["bad_whole_objects"], s["gets"])
	}
	if s["passthrough_opens"] != n-1 {
		t.Errorf("%d passthrough opens, want %d (all but the damaged object)", s["passthrough_opens"], n-1)
	}
}

// TestPassthroughModeHeldWhileOpen: the kernel fails an open in one mode
// while the file is open in the other, so segfs must not switch a file's
// mode while any handle of it is open.
func TestPassthroughModeHeldWhileOpen(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	want := randomBytes(21, 5<<20+123)
	putObjects(t, srv, bucket, map[string][]byte{"f": want})
	m := mountPassthrough(t, srv, bucket, filepath.Join(t.TempDir(), "cache"))
	path := filepath.Join(m.Dir, "f")

	// Opened cold: served by segfs. Its whole-object file is built while
	// it stays open.
	served, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	readSequentially(t, served, want)
	waitWhole(t, m, 1)
	// A second open while the first lasts stays in the usual mode.
	second, err := os.Open(path)
	if err != nil {
		t.Fatalf("open while the file is open in the usual mode: %v", err)
	}
	readSequentially(t, second, want)
	if s := harness.MustStats(t, m); s["passthrough_opens"] != 0 {
		t.Errorf("%d passthrough opens while a usual-mode handle was open", s["passthrough_opens"])
	}
	second.Close()
	served.Close()
	// The kernel sends the releases after close returns; the last one
	// drops the file's page cache (it read the whole file) before segfs
	// stops counting it as open.
	harness.WaitStats(t, m, "both handles released", func(s map[string]int64) bool { return s["open_handles"] == 0 })

	// Closed everywhere: the next open is in passthrough mode, and so is
	// an open beside it.
	before := harness.MustStats(t, m)
	a, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := os.Open(path)
	if err != nil {
		t.Fatalf("second open beside a passthrough handle: %v", err)
	}
	defer b.Close()
	readSequentially(t, a, want)
	readSequentially(t, b, want)
	after := harness.MustStats(t, m)
	if d := harness.Delta(before, after, "passthrough_opens"); d != 1 {
		t.Errorf("%d whole-object files opened, want 1 (the second handle shares it)", d)
	}
	if d := harness.Delta(before, after, "reads"); d != 0 {
		t.Errorf("%d reads reached segfs from passthrough handles", d)
	}
}

// largestFile returns the largest file under dir whose name ends in suffix.
func largestFile(t *testing.T, dir, suffix string) string {
	t.Helper()
	var best string
	var size int64 = -1
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, suffix) && fi.Size() > size {
			best, size = p, fi.Size()
		}
		return nil
	})
	if err != nil || best == "" {
		t.Fatalf("no %s file under %s: %v", suffix, dir, err)
	}
	return best
}

// TestPassthroughCrashLoop kills segfs (SIGKILL) at varying moments while
// it fills the cache with --prefetch all and builds whole-object files.
// The next mount must leave no temporary file and no data file without
// its seal (or seal without its file), serve every byte right, and count
// exactly the files on disk.
func TestPassthroughCrashLoop(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "")
	cacheDir := filepath.Join(t.TempDir(), "cache")
	rng := rand.New(rand.NewPCG(20261130, 5))
	files := int64(len(shared.local))

	const rounds = 6
	for round := range rounds {
		m := mountPassthrough(t, srv, bucket, cacheDir, "--prefetch", "all")
		have := harness.WaitStats(t, m, "the index loaded", func(s map[string]int64) bool { return s["cache_index_loaded"] == 1 })["whole_objects"]
		var s map[string]int64
		if round%2 == 0 {
			time.Sleep(time.Duration(50+rng.IntN(1000)) * time.Millisecond)
			s = harness.MustStats(t, m)
		} else {
			target := 1 + rng.Int64N(max(1, files-have))
			s = harness.WaitStats(t, m, fmt.Sprintf("%d whole-object files built", target), func(s map[string]int64) bool {
				return s["promotions"] >= target
			})
		}
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		objs, seals := wholeFiles(t, cacheDir)
		_, temps := mustScanCache(t, cacheDir)
		t.Logf("round %d: killed with %d parts fetched, %d whole-object files built; left %d data files, %d seals, %d temporary files",
			round, s["parts_fetched"], s["promotions"], len(objs), len(seals), len(temps))
		// Keep a third of the objects' files, so that the next round
		// has fetching and building to do.
		i := 0
		for name := range objs {
			if i++; i%3 != 0 {
				os.Remove(strings.TrimSuffix(name, ".obj") + ".seal")
				os.Remove(name)
			}
		}
		if round == 2 {
			// A crash between a data file's rename and its seal's, made
			// certain: a data file without its seal.
			for name := range seals {
				os.Remove(name)
				break
			}
		}
	}

	m := mountPassthrough(t, srv, bucket, cacheDir, "--prefetch", "none")
	if _, temps := mustScanCache(t, cacheDir); len(temps) > 0 {
		t.Errorf("after mounting, temporary files remain: %q", paths(temps))
	}
	harness.WaitStats(t, m, "the index loaded", func(s map[string]int64) bool { return s["cache_index_loaded"] == 1 })
	objs, seals := wholeFiles(t, cacheDir)
	for name := range objs {
		if _, ok := seals[strings.TrimSuffix(name, ".obj")+".seal"]; !ok {
			t.Errorf("data file without its seal after the load: %s", name)
		}
	}
	for name := range seals {
		if _, ok := objs[strings.TrimSuffix(name, ".seal")+".obj"]; !ok {
			t.Errorf("seal without its data file after the load: %s", name)
		}
	}
	checkObjects(t, m.Dir, shared.local)
	s := waitSettled(t, m)
	t.Logf("final mount: %d GETs, %d passthrough opens, %d bad whole-object files",
		s["gets"], s["passthrough_opens"], s["bad_whole_objects"])
	checkIndexMatchesDisk(t, s, cacheDir)
	if s["bad_whole_objects"] != 0 {
		t.Errorf("%d whole-object files found bad after kills; a kill must not break a seal", s["bad_whole_objects"])
	}
}

// wholeFiles returns the whole-object data files and seals under dir,
// with their sizes.
func wholeFiles(t *testing.T, dir string) (objs, seals map[string]int64) {
	t.Helper()
	objs, seals = make(map[string]int64), make(map[string]int64)
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(p, ".obj"):
			objs[p] = fi.Size()
		case strings.HasSuffix(p, ".seal"):
			seals[p] = fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs, seals
}

// TestPassthroughDiskFull builds whole-object files on a 24 MiB tmpfs
// while reading 48 MiB of objects through the mount, twice: builds that
// find no room fail without a temporary file left, every read returns
// the right bytes, the tmpfs never holds more than its size, and the
// index counts exactly the files on it.
func TestPassthroughDiskFull(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := make(map[string][]byte)
	for i := range 16 {
		objs[fmt.Sprintf("seg/_%d.fdt", i)] = randomBytes(uint64(60+i), 3<<20+i*1000)
	}
	putObjects(t, srv, bucket, objs)

	const fsSize = 24 << 20
	fsDir := mountTmpfs(t, fsSize)
	cacheDir := filepath.Join(fsDir, "cache")
	m := mountPassthrough(t, srv, bucket, cacheDir, "--cache-min-free", "0", "--cache-size", "1GiB")
	for range 2 {
		checkObjects(t, m.Dir, objs)
	}
	s := waitSettled(t, m)
	checkTmpfsWithin(t, fsDir, fsSize)
	t.Logf("promotions %d, whole objects %d, passthrough opens %d, no_space %d, cache_no_space %d, evictions %d",
		s["promotions"], s["whole_objects"], s["passthrough_opens"], s["no_space"], s["cache_no_space"], s["cache_evictions"])
	if s["promotions"] == 0 {
		t.Error("no whole-object file was built")
	}
	checkIndexMatchesDisk(t, s, cacheDir)
}

// waitSettled waits until no fetch and no whole-object build is queued or
// running, and returns the counters then.
func waitSettled(t *testing.T, m *harness.Mount) map[string]int64 {
	t.Helper()
	return harness.WaitStats(t, m, "no fetch or build in flight", func(s map[string]int64) bool {
		return harness.Idle(s) && s["promote_pending"] == 0
	})
}

// checkIndexMatchesDisk compares the mount's counters s with the cache
// directory: part files, whole-object files and their bytes, seals
// included, and no temporary file.
func checkIndexMatchesDisk(t *testing.T, s map[string]int64, cacheDir string) {
	t.Helper()
	parts, temps := mustScanCache(t, cacheDir)
	if len(temps) > 0 {
		t.Errorf("temporary files left: %q", paths(temps))
	}
	objs, seals := wholeFiles(t, cacheDir)
	bytes := totalSize(parts)
	for _, m := range []map[string]int64{objs, seals} {
		for _, n := range m {
			bytes += n
		}
	}
	if s["cache_parts"] != int64(len(parts)) || s["whole_objects"] != int64(len(objs)) || s["cache_bytes"] != bytes {
		t.Errorf("index counts %d parts, %d whole-object files, %d bytes; the directory holds %d, %d, %d",
			s["cache_parts"], s["whole_objects"], s["cache_bytes"], len(parts), len(objs), bytes)
	}
}

// TestPassthroughOffOnStackedCache puts the cache on an overlayfs, which
// the kernel refuses as a passthrough backing file system: the mount must
// come up with passthrough off, say why in its log, and serve every byte.
func TestPassthroughOffOnStackedCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount an overlayfs")
	}
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := map[string][]byte{"_0.fdt": randomBytes(31, 3<<20), "_0.si": randomBytes(32, 300)}
	putObjects(t, srv, bucket, objs)

	base := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		dirs[d] = filepath.Join(base, d)
		if err := os.Mkdir(dirs[d], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", dirs["lower"], dirs["upper"], dirs["work"])
	if err := syscall.Mount("overlay", dirs["merged"], "overlay", 0, opts); err != nil {
		t.Skipf("mount overlayfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dirs["merged"], 0); err != nil {
			t.Errorf("unmount overlayfs: %v", err)
		}
	})
	m := mountCached(t, srv, bucket, filepath.Join(dirs["merged"], "cache"), "--passthrough")
	if s := harness.MustStats(t, m); s["passthrough"] != 0 {
		t.Fatalf("passthrough on with the cache on an overlayfs; log:\n%s", m.Log())
	}
	if !strings.Contains(m.Log(), "passthrough is off") || !strings.Contains(m.Log(), "stacked") {
		t.Errorf("the log does not say why passthrough is off:\n%s", m.Log())
	}
	for range 2 {
		checkObjects(t, m.Dir, objs)
	}
	if s := waitSettled(t, m); s["passthrough_opens"] != 0 || s["promotions"] != 0 {
		t.Errorf("%d passthrough opens, %d builds with passthrough off", s["passthrough_opens"], s["promotions"])
	}
}
