package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/osremote"
)

// openReads makes the reads a Lucene open makes of every file in dir, as
// BufferedIndexInput sends them: the codec header (1 KiB at offset 0) and
// the footer (the last 16 bytes); a small file whole.
func openReads(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		want := files[n]
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		size := int64(len(want))
		reads := [][2]int64{{0, min(1024, size)}, {max(0, size-16), min(16, size)}}
		if size <= prefetch.LuceneWhole {
			reads = [][2]int64{{0, size}}
		}
		for _, rd := range reads {
			if err := comparePread(f, want, rd[0], int(rd[1])); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
		}
		f.Close()
	}
}

// After one listing of an index directory (a plain layout), the mount of
// a plain prefix that is the index, or the mount of a shard (the
// OpenSearch layout), the reads of a Lucene open take no
// GET: the small files were fetched whole and the heads and tails of the
// large ones into the range tier, and with --prefetch none nothing of
// their bodies. A remount on the same cache serves the same reads with
// no GET either.
func TestSegmentPrefetchServesAnOpen(t *testing.T) {
	srv := needServer(t)
	files, err := osremote.ShardFiles([]string{"_0", "_1"}, 3, 6<<20, 51)
	if err != nil {
		t.Fatal(err)
	}
	// What the tier may fetch: of each file the kernel's reads of a
	// mount of the default --readahead and --max-read (1 MiB): the first
	// MiB and the last 512 KiB and a page, rounded out to range-tier
	// blocks; a smaller file whole.
	var budget int64
	for _, b := range files {
		budget += min(int64(len(b)), 1<<20+512<<10+prefetch.Page+2*64<<10)
	}

	check := func(t *testing.T, source, sub string, seen func(dir string), args ...string) {
		cacheDir := filepath.Join(t.TempDir(), "cache")
		for round := range 2 {
			m := mountS3(t, srv, source, append([]string{"--cache-dir", cacheDir, "--prefetch", "none"}, args...)...)
			dir := filepath.Join(m.Dir, sub)
			before := harness.MustStats(t, m)
			seen(dir)
			idle := harness.WaitIdle(t, m)
			openReads(t, dir, files)
			after := harness.WaitIdle(t, m)
			if n := harness.Delta(idle, after, "gets"); n != 0 {
				t.Errorf("round %d: %d GETs for the reads of an open after the directory was seen; want 0", round, n)
			}
			fetched := harness.Delta(before, after, "get_bytes")
			t.Logf("round %d: %d ranges prefetched, %d range-tier hits, %d bytes fetched (budget %d), open prefetch %d ns",
				round, harness.Delta(before, after, "ranges_prefetched"), harness.Delta(before, after, "range_tier_hits"),
				fetched, budget, after["open_prefetch_ns"])
			if fetched > budget {
				t.Errorf("round %d: %d bytes fetched; with --prefetch none the bodies must stay remote (budget %d)", round, fetched, budget)
			}
			if round == 1 && harness.Delta(before, after, "gets") != 0 {
				t.Errorf("remount: %d GETs; want 0, the range tier is on disk", harness.Delta(before, after, "gets"))
			}
			if err := m.Unmount(); err != nil {
				t.Fatal(err)
			}
			harness.DropPageCache(t)
		}
	}
	// A plain layout's index directory is seen when it is listed, or
	// when it is only looked up.
	for name, seen := range map[string]func(dir string) error{
		"plain, a listing": func(dir string) error { _, err := os.ReadDir(dir); return err },
		"plain, a lookup":  func(dir string) error { _, err := os.Stat(dir); return err },
	} {
		t.Run(name, func(t *testing.T) {
			bucket := newBucket(t, srv)
			objs := map[string][]byte{}
			for n, b := range files {
				objs["index/"+n] = b
			}
			putObjects(t, srv, bucket, objs)
			check(t, "s3://"+bucket, "index", func(dir string) {
				if err := seen(dir); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
	// A plain mount whose root is the index's directory is seen at
	// mount: the open's ranges are fetched before anything is listed.
	t.Run("plain, the mount's root", func(t *testing.T) {
		bucket := newBucket(t, srv)
		objs := map[string][]byte{}
		for n, b := range files {
			objs["index/"+n] = b
		}
		putObjects(t, srv, bucket, objs)
		check(t, "s3://"+bucket+"/index", "", func(string) {})
	})
	t.Run("opensearch", func(t *testing.T) {
		bucket := newBucket(t, srv)
		o := osremote.Options{Base: "repo", IndexUUID: osIndexUUID, Shard: 0, PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1, Version: 2, Seed: 51}
		put := func(key string, data []byte) error {
			_, err := srv.PutBytes(context.Background(), bucket, key, data)
			return err
		}
		ref, err := osremote.New(put, o).Upload(files, 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		files[layout.SegmentsFileName(3)] = ref.SegmentInfos
		check(t, "s3://"+bucket+"/repo", "", func(string) {}, "--layout", "opensearch", "--index-uuid", osIndexUUID, "--shard", "0",
			"--path-type", "hashed_prefix")
	})
}

// An open that reads more of a file's end than the kernel's tail window
// is learned: the remount loads the profile (counted) and, after one
// listing, serves those reads with no GET. A cold mount on a new cache
// directory of the same source does not have it.
func TestLearnedOpenSurvivesARemount(t *testing.T) {
	srv := needServer(t)
	files, err := osremote.ShardFiles([]string{"_0"}, 2, 6<<20, 61)
	if err != nil {
		t.Fatal(err)
	}
	bucket := newBucket(t, srv)
	objs := map[string][]byte{}
	for n, b := range files {
		objs["index/"+n] = b
	}
	putObjects(t, srv, bucket, objs)
	fdt := files["_0.fdt"]
	if len(fdt) < 2<<20+800<<10 {
		t.Fatalf("_0.fdt is %d bytes: too small for a head, a deep tail and a body between", len(fdt))
	}
	// O_DIRECT: every read reaches segfs, none is the kernel's readahead.
	deepTail := func(dir string) {
		f, err := os.OpenFile(filepath.Join(dir, "index", "_0.fdt"), os.O_RDONLY|syscall.O_DIRECT, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		size := int64(len(fdt))
		// Back to 800 KiB from the end: past the tail the kernel's
		// read-around asks for (about 516 KiB), within ProfileMax.
		for off := size - 4096; off > size-800<<10; off -= 64 << 10 { // jumps back, as a footer-first open does
			if err := comparePread(f, fdt, off, 4096); err != nil {
				t.Fatal(err)
			}
		}
	}
	cacheDir := filepath.Join(t.TempDir(), "cache")
	m := mountS3(t, srv, "s3://"+bucket, "--cache-dir", cacheDir, "--prefetch", "none")
	if _, err := os.ReadDir(filepath.Join(m.Dir, "index")); err != nil {
		t.Fatal(err)
	}
	harness.WaitIdle(t, m)
	deepTail(m.Dir)
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	harness.DropPageCache(t)

	// The remount on the same cache loads the profile; a new cache
	// directory has none. On a new cache the deep tail costs GETs.
	for _, tc := range []struct {
		cache  string
		loaded int64
	}{{cacheDir, 1}, {filepath.Join(t.TempDir(), "cache"), 0}} {
		m := mountS3(t, srv, "s3://"+bucket, "--cache-dir", tc.cache, "--prefetch", "none")
		s := harness.MustStats(t, m)
		if s["open_profile_loaded"] != tc.loaded {
			t.Errorf("cache %s: open_profile_loaded %d, want %d", tc.cache, s["open_profile_loaded"], tc.loaded)
		}
		if tc.loaded == 1 {
			if _, err := os.ReadDir(filepath.Join(m.Dir, "index")); err != nil {
				t.Fatal(err)
			}
			before := harness.WaitIdle(t, m)
			if before["open_profile_ranges"] == 0 {
				t.Errorf("the listing's plan used no learned range: %v", before)
			}
			deepTail(m.Dir)
			after := harness.WaitIdle(t, m)
			if n := harness.Delta(before, after, "gets"); n != 0 {
				t.Errorf("the learned reads took %d GETs after the listing; want 0", n)
			}
		}
		if err := m.Unmount(); err != nil {
			t.Fatal(err)
		}
	}
}
