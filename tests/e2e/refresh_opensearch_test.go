package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/osremote"
)

// TestOpenSearchRefreshFollowsTheShard mounts a shard at its newest
// metadata file with --refresh and writes new refreshes under it, as a
// node does: a new segment, then a merge that drops the old one. Each
// new commit shows within two refreshes, with every file it names
// visible before its segments_N (a reader lists and opens in a loop
// during the refreshes); the files the newer commit drops stay for
// --keep-removed, then go; a handle held across the refreshes reads
// byte-exact; a corrupt newer metadata file keeps the view.
func TestOpenSearchRefreshFollowsTheShard(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	ctx := context.Background()
	put := func(key string, data []byte) error {
		_, err := srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	o := osremote.Options{IndexUUID: osIndexUUID, PathType: layout.Fixed, Version: 2, Seed: 35}
	r := osremote.New(put, o)
	files3, err := osremote.ShardFiles([]string{"_0"}, 3, 200<<10, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Upload(files3, 1, 3); err != nil {
		t.Fatal(err)
	}
	m := mountS3(t, srv, "s3://"+bucket, "--layout", "opensearch", "--index-uuid", osIndexUUID, "--shard", "0",
		"--refresh", "200ms", "--keep-removed", "3s")
	name0 := firstNonCommit(files3)
	held, err := os.Open(filepath.Join(m.Dir, name0))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	// The reader: whenever it lists a segments_N it has not seen, every
	// file that commit names must open.
	commits := map[string]map[string][]byte{}
	var mu sync.Mutex
	var violations, checked atomic.Int64
	var lastViolation atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ents, err := os.ReadDir(m.Dir)
			if err != nil {
				continue
			}
			for _, e := range ents {
				mu.Lock()
				want := commits[e.Name()]
				mu.Unlock()
				for n := range want {
					if strings.HasPrefix(n, "segments_") {
						continue
					}
					checked.Add(1)
					if _, err := os.Stat(filepath.Join(m.Dir, n)); err != nil {
						violations.Add(1)
						lastViolation.Store(e.Name() + " listed while " + n + ": " + err.Error())
					}
				}
			}
		}
	}()

	files4, err := osremote.ShardFiles([]string{"_0", "_1"}, 4, 200<<10, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	files5, err := osremote.ShardFiles([]string{"_2"}, 5, 200<<10, o.Seed+1) // the merge of _0 and _1
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	commits[layout.SegmentsFileName(4)], commits[layout.SegmentsFileName(5)] = files4, files5
	mu.Unlock()

	var atMerge map[string]int64
	prev := files3
	for _, step := range []struct {
		gen   int64
		files map[string][]byte
	}{{4, files4}, {5, files5}} {
		st := harness.MustStats(t, m)
		before := st["refreshes"]
		// The new files are small: the range tier takes each whole
		// (head and tail meet), before the commit shows.
		var fresh int64
		for n, data := range step.files {
			if _, ok := prev[n]; !ok && !strings.HasPrefix(n, "segments_") {
				fresh += int64(len(data))
			}
		}
		prev = step.files
		if _, err := r.Upload(step.files, 1, step.gen); err != nil {
			t.Fatal(err)
		}
		seg := layout.SegmentsFileName(step.gen)
		s := waitName(t, m, seg)
		atMerge = s
		if n := s["refreshes"] - before; n > 2 {
			t.Errorf("%s showed after %d refreshes, want at most 2", seg, n)
		}
		if got := s["range_tier_bytes"] - st["range_tier_bytes"]; got < fresh {
			t.Errorf("when %s showed, the range tier had fetched %d bytes of the commit's %d new; want its open prefetched first", seg, got, fresh)
		}
		for n, data := range step.files {
			if strings.HasPrefix(n, "segments_") {
				continue
			}
			if got, err := os.ReadFile(filepath.Join(m.Dir, n)); err != nil || !bytes.Equal(got, data) {
				t.Errorf("commit %d: %s: %d bytes, %v", step.gen, n, len(got), err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if checked.Load() == 0 {
		t.Errorf("the reader never listed a new segments_N: it checked nothing")
	}
	t.Logf("the reader checked %d files of listed commits", checked.Load())
	if n := violations.Load(); n > 0 {
		t.Errorf("%d times a segments_N was listed before a file it names; the last: %v", n, lastViolation.Load())
	}

	// The files commit 5 no longer names were kept when it showed (the
	// grace is 3 s), then went.
	if atMerge["files_kept"] == 0 {
		t.Errorf("when segments_5 showed, no file of the commits before was kept (files_kept 0)")
	}
	harness.WaitStats(t, m, "the end of the grace", func(s map[string]int64) bool { return s["files_kept"] == 0 && s["files_removed"] > 0 })
	if _, err := os.Stat(filepath.Join(m.Dir, name0)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after the grace: %v, want ENOENT", name0, err)
	}
	got := make([]byte, 1000)
	if _, err := held.ReadAt(got, 0); err != nil || !bytes.Equal(got, files3[name0][:1000]) {
		t.Errorf("the handle held across the refreshes: %v, or not its bytes", err)
	}

	// A newer metadata file that does not parse: the view stays.
	failures := harness.MustStats(t, m)["refresh_failures"]
	bad := layout.FormatMetadataName(layout.MetadataName{PrimaryTerm: 1, Generation: 9, TranslogGeneration: 9, UploadCounter: 99,
		NodeHash: "-1234567", CreatedMillis: 1_700_000_000_009, Version: o.Version})
	if err := put(path.Join(r.Path("metadata"), bad), []byte("not a metadata file")); err != nil {
		t.Fatal(err)
	}
	harness.WaitStats(t, m, "a failed refresh", func(s map[string]int64) bool { return s["refresh_failures"] > failures })
	if _, err := os.Stat(filepath.Join(m.Dir, layout.SegmentsFileName(5))); err != nil {
		t.Errorf("segments_5 after a corrupt newer metadata file: %v (the view must stay)", err)
	}
	waitLog(t, m, "refresh failed; the mount keeps its view")
}

// waitName waits until name is in the mount's root and returns the
// stats then.
func waitName(t *testing.T, m *harness.Mount, name string) map[string]int64 {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		if _, err := os.Stat(filepath.Join(m.Dir, name)); err == nil {
			return harness.MustStats(t, m)
		} else if !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("stat %s: %v", name, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear in %v; log:\n%s", name, hangGuard, tailString(m.Log(), 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstNonCommit returns the first file of files, by name, that is not
// a segments_N.
func firstNonCommit(files map[string][]byte) string {
	best := ""
	for n := range files {
		if !strings.HasPrefix(n, "segments_") && (best == "" || n < best) {
			best = n
		}
	}
	return best
}
