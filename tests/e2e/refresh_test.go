package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/segfs/segfs/tests/harness"
)

// TestRefreshFollowsTheStore mounts a bucket with --refresh and changes
// the bucket under it: a new object appears within two refreshes, a
// deleted one goes (its lookups fail), an overwritten one becomes a new
// file with a new inode and the new bytes, and a handle opened before the
// overwrite reads the old version's cached part byte-exact; its uncached
// parts fail with ESTALE, never with the new bytes.
func TestRefreshFollowsTheStore(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	const part = 1 << 20
	oldA, b, c := randomBytes(1, 3*part), randomBytes(2, 5000), randomBytes(3, 7000)
	putObjects(t, srv, bucket, map[string][]byte{"a": oldA, "b": b, "dir/c": c})
	m := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB", "--refresh", "200ms", "--prefetch", "none")

	held, err := os.Open(filepath.Join(m.Dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	got := make([]byte, 4096)
	if _, err := held.ReadAt(got, 0); err != nil || !bytes.Equal(got, oldA[:4096]) {
		t.Fatalf("read of a before the change: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(m.Dir, "a"), &st); err != nil {
		t.Fatal(err)
	}
	oldIno := st.Ino
	dirBefore, err := os.Stat(filepath.Join(m.Dir, "dir"))
	if err != nil {
		t.Fatal(err)
	}

	newA, d := randomBytes(4, 2*part+17), randomBytes(5, 3000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := harness.MustStats(t, m)["refreshes"]
	putObjects(t, srv, bucket, map[string][]byte{"a": newA, "dir/d": d})
	if err := srv.Delete(ctx, bucket, "b"); err != nil {
		t.Fatal(err)
	}
	// The change shows at the first refresh that lists after it: at most
	// the one already running and the next.
	s := harness.WaitStats(t, m, "a refresh that saw the change", func(s map[string]int64) bool { return s["files_added"] >= 1 })
	if n := s["refreshes"] - before; n > 2 {
		t.Errorf("the change showed after %d refreshes, want at most 2", n)
	}
	if s["files_added"] != 1 || s["files_changed"] != 1 || s["files_removed"] != 1 {
		t.Errorf("files added %d, changed %d, removed %d; want 1 each", s["files_added"], s["files_changed"], s["files_removed"])
	}

	if data, err := os.ReadFile(filepath.Join(m.Dir, "dir/d")); err != nil || !bytes.Equal(data, d) {
		t.Errorf("the new object dir/d: %d bytes, %v", len(data), err)
	}
	ents, err := os.ReadDir(filepath.Join(m.Dir, "dir"))
	if err != nil || len(ents) != 2 {
		t.Errorf("dir lists %v (%v), want c and d", ents, err)
	}
	if fi, err := os.Stat(filepath.Join(m.Dir, "dir")); err != nil || !fi.ModTime().After(dirBefore.ModTime()) {
		t.Errorf("dir's time after a refresh added to it: %v (%v), before %v; want later", fi.ModTime(), err, dirBefore.ModTime())
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of the deleted b: %v, want ENOENT", err)
	}
	if err := syscall.Stat(filepath.Join(m.Dir, "a"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Ino == oldIno || st.Size != int64(len(newA)) {
		t.Errorf("a after the overwrite: inode %d (was %d), size %d; want a new inode and size %d", st.Ino, oldIno, st.Size, len(newA))
	}
	if data, err := os.ReadFile(filepath.Join(m.Dir, "a")); err != nil || !bytes.Equal(data, newA) {
		t.Errorf("a after the overwrite: %d bytes, %v; want the new %d", len(data), err, len(newA))
	}

	// The handle opened before reads the old version: its cached part,
	// and ESTALE for the parts only the old object held.
	if _, err := held.ReadAt(got, 100); err != nil || !bytes.Equal(got, oldA[100:4196]) {
		t.Errorf("the held handle's cached part: %v, or not the old bytes", err)
	}
	_, err = held.ReadAt(got, 2*part+10)
	if !errors.Is(err, syscall.ESTALE) {
		t.Errorf("the held handle's uncached part of the overwritten object: %v, want ESTALE", err)
	}
	// Each such read fails alike and is counted (each FUSE read: the
	// kernel's readahead sends some of its own); the file is logged once.
	if _, err := held.ReadAt(got, part+10); !errors.Is(err, syscall.ESTALE) {
		t.Errorf("a second uncached part: %v, want ESTALE", err)
	}
	if n := harness.MustStats(t, m)["stale_reads"]; n < 2 {
		t.Errorf("stale_reads = %d after two failed reads, want at least 2", n)
	}
	if n := strings.Count(m.Log(), "the store no longer holds this version of the file"); n != 1 {
		t.Errorf("the stale file is logged %d times at warn, want once", n)
	}
}

// TestRefreshOnSIGHUP: without --refresh the view stays as mounted until
// a SIGHUP, which lists the store again at once.
func TestRefreshOnSIGHUP(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	putObjects(t, srv, bucket, map[string][]byte{"a": randomBytes(1, 100)})
	m := mountS3(t, srv, "s3://"+bucket)
	if _, err := os.Stat(filepath.Join(m.Dir, "a")); err != nil {
		t.Fatal(err)
	}
	lists := harness.MustStats(t, m)["lists"] // the mount's: its bucket check and its listing
	late := randomBytes(2, 200)
	putObjects(t, srv, bucket, map[string][]byte{"late": late})
	if _, err := os.Stat(filepath.Join(m.Dir, "late")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new object before any refresh: %v, want ENOENT (the view is fixed without --refresh)", err)
	}
	if s := harness.MustStats(t, m); s["refreshes"] != 0 || s["lists"] != lists {
		t.Fatalf("without --refresh or SIGHUP: %d refreshes, %d listings; want 0 and the mount's %d", s["refreshes"], s["lists"], lists)
	}
	signalSegfs(t, m, syscall.SIGHUP)
	harness.WaitStats(t, m, "the SIGHUP's refresh", func(s map[string]int64) bool { return s["refreshes"] == 1 })
	if data, err := os.ReadFile(filepath.Join(m.Dir, "late")); err != nil || !bytes.Equal(data, late) {
		t.Errorf("the new object after SIGHUP: %d bytes, %v", len(data), err)
	}
}

// TestRefreshFailureKeepsTheView: a refresh that cannot list the store
// (its bucket gone from the S3 server) changes nothing, is counted, and
// the next one, once the store lists again, applies what changed.
func TestRefreshFailureKeepsTheView(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	a := randomBytes(1, 5000)
	putObjects(t, srv, bucket, map[string][]byte{"a": a})
	m := mountS3(t, srv, "s3://"+bucket)
	if data, err := os.ReadFile(filepath.Join(m.Dir, "a")); err != nil || !bytes.Equal(data, a) {
		t.Fatalf("read a: %v", err)
	}
	// versitygw's posix backend keeps a bucket as a directory of its
	// root (harness.Server.Dir).
	dir, away := filepath.Join(srv.Dir(), "root", bucket), filepath.Join(srv.Dir(), bucket+"-away")
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	signalSegfs(t, m, syscall.SIGHUP)
	harness.WaitStats(t, m, "the failed refresh", func(s map[string]int64) bool { return s["refresh_failures"] == 1 })
	if s := harness.MustStats(t, m); s["refreshes"] != 0 {
		t.Errorf("a failed listing counted as %d refreshes applied", s["refreshes"])
	}
	if data, err := os.ReadFile(filepath.Join(m.Dir, "a")); err != nil || !bytes.Equal(data, a) {
		t.Errorf("a after the failed refresh: %v (the view must stay, served from the cache)", err)
	}
	waitLog(t, m, "refresh failed; the mount keeps its view")

	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	putObjects(t, srv, bucket, map[string][]byte{"b": a})
	signalSegfs(t, m, syscall.SIGHUP)
	harness.WaitStats(t, m, "the refresh after the store came back", func(s map[string]int64) bool { return s["refreshes"] == 1 })
	if _, err := os.Stat(filepath.Join(m.Dir, "b")); err != nil {
		t.Errorf("b after the store came back: %v", err)
	}
	waitLog(t, m, "refresh works again")
}

// TestLuceneOpenIfChangedAfterARefresh: a real Lucene holds a reader
// open on the mounted index while its writer commits again, as a
// search engine's store changes under it. The new commit is uploaded as
// a writer's upload would be (the new segment's files first, then the
// new segments_N, then the old segments_N deleted); after SIGHUP,
// DirectoryReader.openIfChanged through the mount sees the new
// documents, and CheckIndex finds the new commit clean.
func TestLuceneOpenIfChangedAfterARefresh(t *testing.T) {
	lu := testLucene(t)
	srv := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	local := filepath.Join(t.TempDir(), "index")
	first := harness.LuceneIndex{Docs: 2000, Segments: 2, Seed: 35}
	if err := lu.Build(ctx, local, first); err != nil {
		t.Fatal(err)
	}
	bucket := newBucket(t, srv)
	if err := srv.UploadDir(ctx, bucket, "index", local); err != nil {
		t.Fatal(err)
	}
	m := mountS3(t, srv, "s3://"+bucket)
	for _, kind := range []string{"mmap", "nio"} {
		f, err := lu.Follow(ctx, filepath.Join(m.Dir, "index"), kind)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.Opened.Docs < int64(first.Docs) {
			t.Fatalf("%s: the first open shows %d documents, want at least %d", kind, f.Opened.Docs, first.Docs)
		}
		before := f.Opened

		more := harness.LuceneIndex{Docs: 500, Segments: 1, Seed: 36, Append: true}
		if err := lu.Build(ctx, local, more); err != nil {
			t.Fatal(err)
		}
		mirrorCommit(ctx, t, srv, bucket, "index", local)
		refreshes := harness.MustStats(t, m)["refreshes"]
		signalSegfs(t, m, syscall.SIGHUP)
		harness.WaitStats(t, m, "the refresh", func(s map[string]int64) bool { return s["refreshes"] > refreshes })
		r, err := f.Reopen()
		if err != nil {
			t.Fatal(err)
		}
		if !r.Changed || r.Docs != before.Docs+int64(more.Docs) || r.Segments != before.Segments+more.Segments || r.Hits == 0 {
			t.Errorf("%s: openIfChanged after the refresh: %+v; want changed, %d documents in %d segments, hits",
				kind, r, before.Docs+int64(more.Docs), before.Segments+more.Segments)
		}
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}
	if err := lu.Check(ctx, filepath.Join(m.Dir, "index")); err != nil {
		t.Errorf("CheckIndex of the new commit through the mount: %v", err)
	}
}

// mirrorCommit makes bucket/prefix hold dir as a writer's upload does:
// the files the bucket lacks first, segments_N last, then the objects
// dir no longer holds deleted.
func mirrorCommit(ctx context.Context, t *testing.T, srv *harness.Server, bucket, prefix, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	local := map[string]bool{}
	var commits []string
	for _, e := range ents {
		local[e.Name()] = true
		if strings.HasPrefix(e.Name(), "segments_") {
			commits = append(commits, e.Name())
			continue
		}
		if _, err := srv.GetBytes(ctx, bucket, prefix+"/"+e.Name()); err == nil {
			continue // a segment's files never change
		}
		if _, err := srv.PutFile(ctx, bucket, prefix+"/"+e.Name(), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range commits {
		if _, err := srv.PutFile(ctx, bucket, prefix+"/"+n, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix + "/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		if name := strings.TrimPrefix(aws.ToString(o.Key), prefix+"/"); !local[name] {
			if err := srv.Delete(ctx, bucket, aws.ToString(o.Key)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
