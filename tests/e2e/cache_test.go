package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"

	"github.com/segfs/segfs/tests/harness"

	"github.com/segfs/segfs/tests/treesnap"
)

// The persistent part cache, seen from outside: each test mounts with an
// explicit --cache-dir, unmounts, kills or damages what is on disk, mounts
// again on the same directory and checks the bytes read and the counters.

// cacheObjects are the objects of the remount and damage tests: one of
// many parts, one of exactly one part, and a few small ones.
func cacheObjects() map[string][]byte {
	return map[string][]byte{
		"_0.fdt":     randomBytes(11, 24<<20),
		"_0.si":      randomBytes(12, 371),
		"_0.fnm":     randomBytes(13, 5000),
		"seg/_1.tip": randomBytes(14, 700<<10),
		"seg/_1.doc": randomBytes(15, 1<<20),
	}
}

// fillCache mounts bucket on cacheDir with the given part size and args,
// reads every object byte-exact, waits until all their parts are cached
// and nothing is in flight, and unmounts. It returns the last counters.
func fillCache(t *testing.T, srv *harness.Server, bucket, cacheDir string, objs map[string][]byte, partSize int64, args ...string) map[string]int64 {
	t.Helper()
	m := mountCached(t, srv, bucket, cacheDir, append([]string{"--part-size", strconv.FormatInt(partSize, 10)}, args...)...)
	checkObjects(t, m.Dir, objs)
	s := waitCached(t, m, partCount(objs, partSize))
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCacheRemountNoGets reads a bucket through one mount, then through a
// second on the same cache directory: the second must not GET anything.
func TestCacheRemountNoGets(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := cacheObjects()
	putObjects(t, srv, bucket, objs)
	cacheDir := filepath.Join(t.TempDir(), "cache")

	first := fillCache(t, srv, bucket, cacheDir, objs, testPartSize)
	t.Logf("first mount: %d GETs, %d parts fetched, %d cached parts of %d bytes",
		first["gets"], first["parts_fetched"], first["cache_parts"], first["cache_bytes"])
	harness.DropPageCache(t)

	m := mountCached(t, srv, bucket, cacheDir, "--part-size", "1MiB")
	before := harness.MustStats(t, m)
	checkObjects(t, m.Dir, objs)
	after := harness.WaitIdle(t, m)
	t.Logf("second mount: %d GETs, %d disk hits, %d memory hits, %d corrupt parts removed",
		harness.Delta(before, after, "gets"), harness.Delta(before, after, "disk_hits"),
		harness.Delta(before, after, "memory_hits"), after["cache_corrupt_removed"])
	if n := harness.Delta(before, after, "gets"); n != 0 {
		t.Errorf("second mount made %d GETs (%d bytes); want 0, every part was cached", n, harness.Delta(before, after, "get_bytes"))
	}
	if after["disk_hits"] == 0 {
		t.Errorf("second mount served no read from the disk cache: %v", after)
	}
	if n := after["cache_corrupt_removed"]; n != 0 {
		t.Errorf("second mount removed %d parts as corrupt; none was damaged", n)
	}
}

// TestCacheDamagedParts damages five part files in four ways while nothing
// is mounted. The next mount must notice each one, remove it, fetch it
// again and return the right bytes; the mount after that must fetch
// nothing.
func TestCacheDamagedParts(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := cacheObjects()
	putObjects(t, srv, bucket, objs)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	fillCache(t, srv, bucket, cacheDir, objs, testPartSize)

	parts, _ := mustScanCache(t, cacheDir)
	var victims []partInfo
	// The first five of at least 64 KiB in path order; which parts those
	// are depends on the bucket's random name.
	for _, f := range parts {
		p, err := readPartInfo(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if p.dataLen >= 64<<10 && len(victims) < 5 {
			victims = append(victims, p)
		}
	}
	if len(victims) < 5 {
		t.Fatalf("found %d part files of at least 64 KiB among %d; want 5", len(victims), len(parts))
	}
	damageParts(t, victims)
	damaged := map[string]bool{}
	for _, v := range victims {
		damaged[v.path] = true
	}
	parts, _ = mustScanCache(t, cacheDir)
	ids := fileIDs(t, parts)
	harness.DropPageCache(t)

	m := mountCached(t, srv, bucket, cacheDir, "--part-size", "1MiB")
	before := harness.MustStats(t, m)
	checkObjects(t, m.Dir, objs)
	after := waitCached(t, m, partCount(objs, testPartSize))
	removed, gets := after["cache_corrupt_removed"], harness.Delta(before, after, "gets")
	t.Logf("mount over damaged parts: %d corrupt parts removed, %d GETs, %d parts fetched, %d disk hits",
		removed, gets, harness.Delta(before, after, "parts_fetched"), harness.Delta(before, after, "disk_hits"))
	if removed != int64(len(victims)) {
		t.Errorf("cache_corrupt_removed = %d; want %d, one per damaged part file", removed, len(victims))
	}
	if gets < int64(len(victims)) {
		t.Errorf("%d GETs; want at least %d, one per damaged part", gets, len(victims))
	}
	// Exactly the damaged files have been replaced, each by the part its
	// name stands for.
	parts, _ = mustScanCache(t, cacheDir)
	for path, id := range fileIDs(t, parts) {
		if replaced := ids[path] != id; replaced != damaged[path] {
			t.Errorf("%s: replaced %v, damaged %v", path, replaced, damaged[path])
		}
	}
	for _, v := range victims {
		p, err := readPartInfo(v.path)
		if err != nil {
			t.Errorf("%s: %v", v, err)
		} else if p.object != v.object || p.index != v.index || p.dataLen != v.dataLen {
			t.Errorf("%s now holds %s (%d bytes); want the part refetched", v.path, p, p.dataLen)
		}
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	harness.DropPageCache(t)

	m = mountCached(t, srv, bucket, cacheDir, "--part-size", "1MiB")
	before = harness.MustStats(t, m)
	checkObjects(t, m.Dir, objs)
	after = harness.WaitIdle(t, m)
	if n := harness.Delta(before, after, "gets"); n != 0 {
		t.Errorf("third mount made %d GETs; want 0, the damaged parts were cached again", n)
	}
	if n := after["cache_corrupt_removed"]; n != 0 {
		t.Errorf("third mount removed %d corrupt parts; want 0", n)
	}
}

// damageParts spoils five part files: a flipped data byte, a flipped
// header byte (in the block checksum table), a truncation, and two files
// swapped with each other, each then holding another part's header.
func damageParts(t *testing.T, v []partInfo) {
	t.Helper()
	flipByte(t, v[0].path, v[0].hdrLen+v[0].dataLen/2)
	flipByte(t, v[1].path, v[1].hdrLen-6)
	if err := os.Truncate(v[2].path, v[2].hdrLen+v[2].dataLen/2); err != nil {
		t.Fatal(err)
	}
	swap := v[3].path + ".swap"
	for _, mv := range [][2]string{{v[3].path, swap}, {v[4].path, v[3].path}, {swap, v[4].path}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("damaged: data byte of %s; header byte of %s; truncated %s; swapped %s and %s",
		v[0], v[1], v[2], v[3], v[4])
}

// fileID tells a file from the one that replaced it at the same path.
type fileID struct {
	ino   uint64
	mtime int64 // ns; an inode number may be reused
}

// fileIDs returns the identity of each file, by path.
func fileIDs(t *testing.T, files []cacheFile) map[string]fileID {
	t.Helper()
	ids := make(map[string]fileID, len(files))
	for _, f := range files {
		var st unix.Stat_t
		if err := unix.Lstat(f.path, &st); err != nil {
			t.Fatal(err)
		}
		ids[f.path] = fileID{ino: st.Ino, mtime: st.Mtim.Nano()}
	}
	return ids
}

// flipByte inverts the byte at off in the file at path.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestCacheCrashLoop kills segfs (SIGKILL) at varying moments while it
// fills the cache in the background, several times over one cache
// directory. The next mount must sweep the temporary files and serve every
// byte right, whatever the killed processes left.
func TestCacheCrashLoop(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "")
	cacheDir := filepath.Join(t.TempDir(), "cache")
	rng := rand.New(rand.NewPCG(20240607, 3))
	total := partCount(shared.local, testPartSize)

	const rounds = 8
	tempsSeen, midFill := 0, 0
	kept := 0
	for round := range rounds {
		m := mountCached(t, srv, bucket, cacheDir, "--part-size", "1MiB", "--prefetch", "all")
		start := time.Now()
		var s map[string]int64
		if round%2 == 0 {
			// A delay: on a fast machine the fill may be over by then.
			time.Sleep(time.Duration(50+rng.IntN(751)) * time.Millisecond)
			s = harness.MustStats(t, m)
		} else {
			// A point in the fill, whatever the machine's speed.
			target := 1 + rng.Int64N(max(1, total-int64(kept)-1))
			s = harness.WaitStats(t, m, fmt.Sprintf("%d parts fetched", target), func(s map[string]int64) bool {
				return s["parts_fetched"] >= target
			})
		}
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		if s["inflight_parts"] > 0 {
			midFill++
		}
		parts, temps := mustScanCache(t, cacheDir)
		tempsSeen += len(temps)
		t.Logf("round %d: killed after %v with %d parts fetched, %d in flight; left %d parts and %d temporary files",
			round, time.Since(start).Round(time.Millisecond), s["parts_fetched"], s["inflight_parts"], len(parts), len(temps))
		// Keep a quarter of the parts, so that the next round has writing
		// to do and some parts outlive several crashes.
		kept = 0
		for i, p := range parts {
			if i%4 == round%4 {
				kept++
			} else if err := os.Remove(p.path); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d of %d rounds killed with fetches in flight", midFill, rounds)
	// One temporary file of our own, so that the sweep is tested even if
	// no kill happened to leave one.
	planted := filepath.Join(cacheDir, "tmp", "0123456789abcdef.1.tmp")
	if err := os.WriteFile(planted, []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d temporary files left by the kills, plus one planted", tempsSeen)

	// No prefetch: nothing is written before the first read, so whatever
	// is in tmp/ now was left from before.
	m := mountCached(t, srv, bucket, cacheDir, "--part-size", "1MiB", "--prefetch", "none")
	if _, temps := mustScanCache(t, cacheDir); len(temps) > 0 {
		t.Errorf("after mounting, temporary files remain: %q", paths(temps))
	}
	checkObjects(t, m.Dir, shared.local)
	s := harness.WaitStats(t, m, "idle with the index loaded", func(s map[string]int64) bool {
		return harness.Idle(s) && s["cache_index_loaded"] == 1
	})
	parts, temps := mustScanCache(t, cacheDir)
	if len(temps) > 0 {
		t.Errorf("after reading, temporary files remain: %q", paths(temps))
	}
	t.Logf("final mount: %d GETs, %d disk hits, %d corrupt parts removed; %d parts on disk",
		s["gets"], s["disk_hits"], s["cache_corrupt_removed"], len(parts))
	if s["cache_parts"] != int64(len(parts)) || s["cache_bytes"] != totalSize(parts) {
		t.Errorf("index counts %d parts of %d bytes; the directory holds %d of %d",
			s["cache_parts"], s["cache_bytes"], len(parts), totalSize(parts))
	}
}

// TestCacheDiskFull runs the cache on a 64 MiB tmpfs with no free-space
// floor and a size bound larger than the file system, and reads a 256 MiB
// file through it: writes fail with ENOSPC, and every read must still
// succeed with the right bytes.
func TestCacheDiskFull(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	const size = 256 << 20
	data := randomBytes(41, size)
	putObjects(t, srv, bucket, map[string][]byte{"_0.fdt": data})
	const fsSize = 64 << 20
	fsDir := mountTmpfs(t, fsSize)
	cacheDir := filepath.Join(fsDir, "cache")
	m := mountCached(t, srv, bucket, cacheDir, "--cache-min-free", "0", "--cache-size", "1GiB")

	f, err := os.Open(filepath.Join(m.Dir, "_0.fdt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readSequentially(t, f, data)
	// Drop the pages the sequential pass left, so that the random reads
	// reach segfs.
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Logf("fadvise: %v", err)
	}
	harness.DropPageCache(t)
	rng := rand.New(rand.NewPCG(41, 42))
	for range 64 {
		n := 1 + rng.IntN(2<<20)
		if rng.IntN(2) == 0 {
			n = 4096
		}
		if err := comparePread(f, data, rng.Int64N(size), n); err != nil {
			t.Error(err)
		}
	}

	s := harness.WaitIdle(t, m)
	t.Logf("no_space %d, cache_no_space %d, cache_puts %d, evictions %d, memory hits %d, GETs %d",
		s["no_space"], s["cache_no_space"], s["cache_puts"], s["cache_evictions"], s["memory_hits"], s["gets"])
	if s["no_space"]+s["cache_no_space"] == 0 {
		t.Errorf("no_space and cache_no_space are 0 after caching %d bytes on a %d byte file system", size, fsSize)
	}
	checkTmpfsWithin(t, fsDir, fsSize)
	parts, temps := mustScanCache(t, cacheDir)
	if len(temps) > 0 {
		t.Errorf("temporary files left on the full file system: %q", paths(temps))
	}
	t.Logf("%d parts of %d bytes on the tmpfs", len(parts), totalSize(parts))
}

// mountTmpfs mounts a tmpfs of size bytes (mode 0700) on a new directory,
// unmounted at cleanup after anything registered later, and returns the
// directory. It skips the test without root.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	switch err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); {
	case errors.Is(err, syscall.EPERM):
		t.Skipf("mount tmpfs: %v (root without CAP_SYS_ADMIN?)", err)
	case err != nil:
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// checkTmpfsWithin fails the test if the file system at dir holds more
// than size bytes.
func checkTmpfsWithin(t *testing.T, dir string, size int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if used := int64(st.Blocks-st.Bfree) * st.Bsize; used > size {
		t.Errorf("tmpfs holds %d bytes, more than its %d", used, size)
	}
}

// readSequentially reads f from the start in 1 MiB reads and compares
// each with want.
func readSequentially(t *testing.T, f *os.File, want []byte) {
	t.Helper()
	buf := make([]byte, 1<<20)
	var off int
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 && !bytes.Equal(buf[:n], want[off:off+n]) {
			t.Fatalf("sequential read at %d: bytes differ (first difference at +%d)", off, firstDiff(buf[:n], want[off:]))
		}
		off += n
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			t.Fatalf("sequential read at %d: %v", off, err)
		}
	}
	if off != len(want) {
		t.Fatalf("sequential read returned %d bytes, want %d", off, len(want))
	}
}

// TestCacheSizeBound reads three times --cache-size through the mount
// while watching the cache directory: the part and temporary files may
// exceed the bound only by the parts being written, and not at all once
// nothing is in flight.
func TestCacheSizeBound(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := map[string][]byte{}
	for i := range 6 {
		objs["_"+strconv.Itoa(i)+".fdt"] = randomBytes(uint64(50+i), 4<<20+512<<10)
	}
	putObjects(t, srv, bucket, objs)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	const (
		limit      = 8 << 20
		maxFetches = 4
		// Each Put in progress may briefly write beside a part being
		// evicted: one part plus its header (about 300 bytes at 1 MiB;
		// 4 KiB is generous).
		slack = maxFetches * (testPartSize + 4<<10)
	)
	m := mountCached(t, srv, bucket, cacheDir, "--cache-size", "8MiB", "--part-size", "1MiB",
		"--max-fetches", strconv.Itoa(maxFetches))

	done := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var most int64
		defer func() { peak <- most }()
		for {
			if parts, temps, err := scanCache(cacheDir); err == nil {
				most = max(most, totalSize(parts)+totalSize(temps))
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	checkObjects(t, m.Dir, objs)
	s := harness.WaitIdle(t, m)
	close(done)
	churnPeak := <-peak

	parts, temps := mustScanCache(t, cacheDir)
	onDisk := totalSize(parts) + totalSize(temps)
	t.Logf("read %d bytes: peak %d bytes on disk while reading, %d now in %d parts; %d evictions, %d puts",
		totalLen(objs), churnPeak, onDisk, len(parts), s["cache_evictions"], s["cache_puts"])
	if churnPeak > limit+slack {
		t.Errorf("while reading, the cache directory held %d bytes; want at most %d + %d", churnPeak, limit, slack)
	}
	if onDisk > limit {
		t.Errorf("with nothing in flight, the cache directory holds %d bytes; want at most %d", onDisk, limit)
	}
	if s["cache_bytes"] != totalSize(parts) || s["cache_parts"] != int64(len(parts)) {
		t.Errorf("index counts %d parts of %d bytes; the directory holds %d of %d",
			s["cache_parts"], s["cache_bytes"], len(parts), totalSize(parts))
	}
	if s["cache_evictions"] == 0 {
		t.Errorf("no eviction after reading %d bytes through a cache of %d", totalLen(objs), limit)
	}
}

func totalLen(objs map[string][]byte) int64 {
	var n int64
	for _, b := range objs {
		n += int64(len(b))
	}
	return n
}

// TestCacheNewETagSameSize overwrites an object with other bytes of the
// same length (and, most likely, the same LastModified second) between
// two mounts on one cache directory: the second mount must return the new
// bytes only.
func TestCacheNewETagSameSize(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	const size = 3<<20 + 123
	oldObjs := map[string][]byte{"_0.fdt": randomBytes(61, size)}
	newObjs := map[string][]byte{"_0.fdt": randomBytes(62, size)}
	putObjects(t, srv, bucket, oldObjs)
	cacheDir := filepath.Join(t.TempDir(), "cache")
	oldMtime := lastModified(t, srv, bucket, "_0.fdt")
	fillCache(t, srv, bucket, cacheDir, oldObjs, testPartSize)
	putObjects(t, srv, bucket, newObjs)
	newMtime := lastModified(t, srv, bucket, "_0.fdt")
	t.Logf("LastModified %v, then %v (same: %v)", oldMtime, newMtime, oldMtime.Equal(newMtime))
	harness.DropPageCache(t)

	m := mountCached(t, srv, bucket, cacheDir, "--part-size", "1MiB")
	before := harness.MustStats(t, m)
	// Small reads first, at each part's start and end: each may be served
	// by the disk cache or by a GET of its own range.
	f, err := os.Open(filepath.Join(m.Dir, "_0.fdt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for off := int64(0); off < size; off += testPartSize {
		for _, c := range []preadCase{{off, 512}, {min(off+testPartSize, size) - 512, 512}} {
			if err := comparePread(f, newObjs["_0.fdt"], c.off, c.n); err != nil {
				t.Errorf("after the overwrite: %v (old bytes: %v)", err, isOld(f, oldObjs["_0.fdt"], c))
			}
		}
	}
	checkObjects(t, m.Dir, newObjs)
	after := harness.WaitIdle(t, m)
	t.Logf("after the overwrite: %d GETs, %d disk hits", harness.Delta(before, after, "gets"), harness.Delta(before, after, "disk_hits"))
	if harness.Delta(before, after, "gets") == 0 {
		t.Errorf("no GET after the object changed: the new bytes cannot have been read")
	}
}

// lastModified returns the object's LastModified as the server reports it.
func lastModified(t *testing.T, srv *harness.Server, bucket, key string) time.Time {
	t.Helper()
	out, err := srv.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToTime(out.LastModified)
}

// isOld reports whether the read c of f returns the old object's bytes.
func isOld(f *os.File, old []byte, c preadCase) bool {
	return comparePread(f, old, c.off, c.n) == nil
}

// TestCacheDirSymlinkRefused gives --cache-dir a symlink to a directory
// holding tmp/work/notes.txt, as a home directory may: the mount must
// fail with one line naming the directory and why, and leave everything
// in the directory as it was.
func TestCacheDirSymlinkRefused(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	putObjects(t, srv, bucket, map[string][]byte{"_0.si": randomBytes(71, 371)})
	home := t.TempDir()
	notes := filepath.Join(home, "tmp", "work", "notes.txt")
	writeTestFile(t, notes, "notes")
	link := filepath.Join(t.TempDir(), "cache")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	before := treesnap.Take(t, home)
	out := mountFails(t, harness.MountOptions{Source: "s3://" + bucket, Server: srv, Dir: t.TempDir(),
		Args: []string{"--cache-dir", link}})
	wantLine(t, out, "segfs: --cache-dir "+link+": is a symlink; give a real directory")
	if b, err := os.ReadFile(notes); err != nil || string(b) != "notes" {
		t.Errorf("notes.txt: %q, %v; want it untouched", b, err)
	}
	treesnap.Same(t, before, treesnap.Take(t, home))
}

// TestCacheDirForeignRefused gives --cache-dir a directory of someone
// else's files, one of them named as segfs names its temporary files: the
// mount must fail with one line, and remove or create nothing.
func TestCacheDirForeignRefused(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	putObjects(t, srv, bucket, map[string][]byte{"_0.si": randomBytes(72, 371)})
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "notes.txt"), "notes")
	writeTestFile(t, filepath.Join(dir, "tmp", "0123456789abcdef.1.tmp"), "not segfs's")
	before := treesnap.Take(t, dir)
	out := mountFails(t, harness.MountOptions{Source: "s3://" + bucket, Server: srv, Dir: t.TempDir(),
		Args: []string{"--cache-dir", dir}})
	wantLine(t, out, "segfs: --cache-dir "+dir+`: is not empty and not a segfs cache directory (it holds "notes.txt"); give an empty or new directory`)
	treesnap.Same(t, before, treesnap.Take(t, dir))
}
