package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/localstore"
	"github.com/segfs/segfs/tests/osremote"
)

// The real client: Debian's Lucene 8 (tests/lucene/LuceneTool.java in a
// JVM, a child process, so the test process never reads the mount
// itself) builds an index with its own IndexWriter, and reads the
// uploaded copy through a segfs mount as a search engine does.

// luceneTestIndex is small (about 4.5 MB in 53 files) so that the test
// takes seconds; with testPartSize its larger files still span parts.
var luceneTestIndex = harness.LuceneIndex{Docs: 3000, Segments: 3, Seed: 34}

// testLucene returns Lucene for the tests, or skips or fails the test as
// RequireLucene does. The JVM stops at the first JIT tier: the tests
// measure nothing, and it starts faster.
func testLucene(t *testing.T) harness.Lucene {
	t.Helper()
	lu := harness.RequireLucene(t)
	lu.JVMArgs = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}
	return lu
}

// buildTestIndex has the real Lucene write luceneTestIndex into a new
// directory, and returns the directory and its files.
func buildTestIndex(ctx context.Context, t *testing.T, lu harness.Lucene) (string, map[string][]byte) {
	t.Helper()
	local := filepath.Join(t.TempDir(), "index")
	if err := lu.Build(ctx, local, luceneTestIndex); err != nil {
		t.Fatal(err)
	}
	return local, localstore.ReadTree(t, local)
}

// Through a mount of the uploaded index, Lucene's CheckIndex finds it
// clean, and DirectoryReader.open with MMapDirectory (page faults the
// kernel turns into FUSE reads) and with NIOFSDirectory (preads) sees
// the documents and segments of the local copy and the same results for
// the same seeded queries, stored fields included. Each kind reads
// through a mount of its own, so neither finds the other's pages.
func TestLuceneThroughMount(t *testing.T) {
	lu := testLucene(t)
	srv := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	local, _ := buildTestIndex(ctx, t, lu)
	bucket := newBucket(t, srv)
	if err := srv.UploadDir(ctx, bucket, "index", local); err != nil {
		t.Fatal(err)
	}

	t.Run("check", func(t *testing.T) {
		m := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB")
		if err := lu.Check(ctx, filepath.Join(m.Dir, "index")); err != nil {
			t.Fatalf("CheckIndex through the mount: %v\nsegfs log (tail):\n%s", err, tailString(m.Log(), 3000))
		}
	})
	for _, kind := range []string{"mmap", "nio"} {
		t.Run(kind, func(t *testing.T) {
			m := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB")
			compareOpen(ctx, t, lu, m, kind, local, filepath.Join(m.Dir, "index"))
		})
	}
	// The same index in OpenSearch's remote store layout (UUID-named
	// blobs, segments_N from the metadata file), read as the index
	// directory a node would open after a restore.
	t.Run("opensearch", func(t *testing.T) {
		files, gen := readLuceneDir(t, local)
		osBucket := uploadOpenSearch(ctx, t, srv, files, gen)
		m := mountS3(t, srv, "s3://"+osBucket+"/repo", "--part-size", "1MiB", "--layout", "opensearch", "--index-uuid", osIndexUUID, "--shard", "0")
		compareOpen(ctx, t, lu, m, "mmap", local, m.Dir)
	})
}

// After the mount-time prefetch of an OpenSearch-layout shard, a real
// Lucene open, MMapDirectory and NIOFSDirectory each through a mount of
// its own with the page cache dropped, takes no GET: the range tier
// holds every read as the kernel sends it (a page fault's read-around
// of --readahead, a buffered read's first window), not only the bytes
// Lucene asks for. With --prefetch none nothing else is fetched.
func TestLuceneOpenAfterPrefetchTakesNoGET(t *testing.T) {
	lu := testLucene(t)
	srv := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	local := filepath.Join(t.TempDir(), "index")
	ix := luceneTestIndex
	ix.Docs = 20000 // files of several MiB: heads and tails, not whole files
	if err := lu.Build(ctx, local, ix); err != nil {
		t.Fatal(err)
	}
	files, gen := readLuceneDir(t, local)
	var large int
	for _, b := range files {
		if len(b) > 2<<20 {
			large++
		}
	}
	if large == 0 {
		t.Fatal("the index has no file above 2 MiB: the test would check no head or tail")
	}
	bucket := uploadOpenSearch(ctx, t, srv, files, gen)
	for _, kind := range []string{"mmap", "nio"} {
		t.Run(kind, func(t *testing.T) {
			m := mountS3(t, srv, "s3://"+bucket+"/repo", "--prefetch", "none", "--layout", "opensearch", "--index-uuid", osIndexUUID, "--shard", "0")
			before := harness.WaitIdle(t, m)
			if before["ranges_prefetched"] == 0 {
				t.Fatal("no range prefetched at mount")
			}
			res, err := lu.Open(ctx, harness.LuceneOpen{Dirs: []string{m.Dir}, Kind: kind, NoQueries: true,
				BeforeOpen: func() error { harness.DropPageCache(t); return nil }})
			if err != nil {
				t.Fatalf("open through the mount: %v\nsegfs log (tail):\n%s", err, tailString(m.Log(), 3000))
			}
			after := harness.WaitIdle(t, m)
			t.Logf("%s: open %.1f ms, %d range-tier hits, %d joins", kind, res.Opens[0].Ms,
				harness.Delta(before, after, "range_tier_hits"), harness.Delta(before, after, "range_tier_joins"))
			if res.Opens[0].Docs != int64(ix.Docs) {
				t.Errorf("the open saw %d documents, built %d", res.Opens[0].Docs, ix.Docs)
			}
			if n := harness.Delta(before, after, "gets"); n != 0 {
				t.Errorf("%d GETs during the open after the prefetch; want 0", n)
			}
			if harness.Delta(before, after, "range_tier_hits") == 0 {
				t.Error("no read served by the range tier")
			}
		})
	}
}

// uploadOpenSearch uploads the index files, of commit generation gen, to
// a new bucket in OpenSearch's remote store layout under "repo" (shard 0
// of osIndexUUID, segments_N from the metadata file), and returns the
// bucket.
func uploadOpenSearch(ctx context.Context, t *testing.T, srv *harness.Server, files map[string][]byte, gen int64) string {
	t.Helper()
	bucket := newBucket(t, srv)
	put := func(key string, data []byte) error {
		_, err := srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	o := osremote.Options{Base: "repo", IndexUUID: osIndexUUID, PathType: layout.Fixed, Version: 2, SegmentInfosFromFiles: true, Seed: 34}
	if _, err := osremote.New(put, o).Upload(files, 1, gen); err != nil {
		t.Fatal(err)
	}
	return bucket
}

// compareOpen opens and searches the local index and its copy at mounted
// in one JVM with the Directory kind, and fails the test unless both
// show the built documents and segments and the same query results.
func compareOpen(ctx context.Context, t *testing.T, lu harness.Lucene, m *harness.Mount, kind, local, mounted string) {
	t.Helper()
	res, err := lu.Open(ctx, harness.LuceneOpen{Dirs: []string{local, mounted}, Kind: kind, Queries: 100, Seed: 7})
	if err != nil {
		t.Fatalf("open through the mount: %v\nsegfs log (tail):\n%s", err, tailString(m.Log(), 3000))
	}
	lo, mo := res.Opens[0], res.Opens[1]
	lq, mq := res.Queries[0], res.Queries[1]
	t.Logf("%s: open local %.1f ms, mount %.1f ms; queries local p50 %.2f ms p99 %.2f ms, mount p50 %.2f ms p99 %.2f ms; %d hits",
		kind, lo.Ms, mo.Ms, lq.P50, lq.P99, mq.P50, mq.P99, mq.Hits)
	if int64(luceneTestIndex.Docs) != lo.Docs || lo.Segments != luceneTestIndex.Segments {
		t.Errorf("local index: %d documents in %d segments, built %d in %d", lo.Docs, lo.Segments, luceneTestIndex.Docs, luceneTestIndex.Segments)
	}
	if mo.Docs != lo.Docs || mo.Segments != lo.Segments {
		t.Errorf("through the mount: %d documents in %d segments, local %d in %d", mo.Docs, mo.Segments, lo.Docs, lo.Segments)
	}
	if lq.Hits == 0 {
		t.Errorf("the queries found nothing on the local index: they test nothing")
	}
	if mq.N != lq.N || mq.Hits != lq.Hits || mq.Digest != lq.Digest {
		t.Errorf("through the mount: %d queries, %d hits, digest %s; local %d, %d, %s", mq.N, mq.Hits, mq.Digest, lq.N, lq.Hits, lq.Digest)
	}
}

// readLuceneDir returns the files of the index in dir by name, and the
// generation of its segments_N.
func readLuceneDir(t *testing.T, dir string) (map[string][]byte, int64) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	gen := int64(-1)
	for _, e := range ents {
		if files[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
		if g, ok := strings.CutPrefix(e.Name(), "segments_"); ok {
			if gen, err = strconv.ParseInt(g, 36, 64); err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
		}
	}
	if gen < 0 {
		t.Fatalf("%s holds no segments_N", dir)
	}
	return files, gen
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
