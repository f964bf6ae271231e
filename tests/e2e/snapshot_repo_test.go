package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/snaprepo"
)

// One mount of a whole snapshot repository (issue 37's shape for issue
// 36's layout): MOUNTPOINT/<snapshot>/<index>/<shard>/, each shard as a
// one-shard snapshot mount shows it (files in parts joined), a shard
// whose blob is missing failing alone, and a snapshot taken after the
// mount opened by name.
func TestSnapshotRepositoryMount(t *testing.T) {
	srv := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bucket := newBucket(t, srv)
	var blobs []string
	put := func(key string, data []byte) error {
		if strings.Contains(filepath.Base(key), "__") && !strings.HasPrefix(filepath.Base(key), "v__") {
			blobs = append(blobs, key)
		}
		_, err := srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	file := func(seed byte, n int) []byte { return bytes.Repeat([]byte{seed}, n) }
	logs0 := map[string][]byte{"_0.cfs": file('a', 10_000), "_0.cfe": file('b', 300), "_0.si": file('c', 40), "segments_1": file('d', 50)}
	logs1 := map[string][]byte{"_0.cfs": file('e', 5000), "_0.si": file('f', 40), "segments_1": file('g', 50)}
	metrics0 := map[string][]byte{"_0.fdt": file('h', 9000), "segments_2": file('i', 60)}
	r := snaprepo.New(put, snaprepo.Options{Base: "repo", Seed: 7, PartSize: 4096, Compress: true})
	if _, err := r.Snapshot("daily-1", snaprepo.Shard{Index: "logs", Shard: 0, Files: logs0}, snaprepo.Shard{Index: "logs", Shard: 1, Files: logs1}); err != nil {
		t.Fatal(err)
	}
	n := len(blobs)
	if _, err := r.Snapshot("daily-2", snaprepo.Shard{Index: "metrics", Shard: 0, Files: metrics0}, snaprepo.Shard{Index: "logs", Shard: 1, Files: logs0}); err != nil {
		t.Fatal(err)
	}
	// daily-2's logs shard 1 loses a blob: that shard fails alone.
	victim := slices.IndexFunc(blobs[n:], func(k string) bool { return strings.Contains(k, "/1/") })
	if victim < 0 {
		t.Fatal("no blob of daily-2's logs shard 1")
	}
	if err := srv.Delete(ctx, bucket, blobs[n+victim]); err != nil {
		t.Fatal(err)
	}
	m := mountS3(t, srv, "s3://"+bucket+"/repo", "--layout", "snapshot")
	for dir, want := range map[string][]string{
		"": {"daily-1", "daily-2"}, "daily-1": {"logs"}, "daily-2": {"logs", "metrics"},
		"daily-1/logs": {"0", "1"}, "daily-2/metrics": {"0"},
	} {
		if got := dirNames(t, filepath.Join(m.Dir, dir)); !slices.Equal(got, want) {
			t.Errorf("%s/ lists %q, want %q", dir, got, want)
		}
	}
	for dir, files := range map[string]map[string][]byte{"daily-1/logs/0": logs0, "daily-1/logs/1": logs1, "daily-2/metrics/0": metrics0} {
		for n, data := range files {
			got, err := os.ReadFile(filepath.Join(m.Dir, dir, n))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s/%s: %d bytes, %v; want %d", dir, n, len(got), err, len(data))
			}
		}
	}
	if _, err := os.ReadDir(filepath.Join(m.Dir, "daily-2/logs/1")); !errors.Is(err, syscall.EIO) {
		t.Errorf("the shard missing a blob: %v, want EIO", err)
	}
	if got, err := os.ReadFile(filepath.Join(m.Dir, "daily-1/logs/0/_0.cfe")); err != nil || !bytes.Equal(got, logs0["_0.cfe"]) {
		t.Errorf("another shard after the failure: %v", err)
	}

	// A snapshot taken after the mount opens by name, once the root is
	// read again.
	if _, err := r.Snapshot("daily-3", snaprepo.Shard{Index: "metrics", Shard: 0, Files: logs1}); err != nil {
		t.Fatal(err)
	}
	waitExists(t, filepath.Join(m.Dir, "daily-3"))
	got, err := os.ReadFile(filepath.Join(m.Dir, "daily-3/metrics/0/_0.cfs"))
	if err != nil || !bytes.Equal(got, logs1["_0.cfs"]) {
		t.Errorf("a file of the snapshot taken after the mount: %d bytes, %v", len(got), err)
	}
}
