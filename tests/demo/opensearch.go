package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/osremote"
)

// openSearchDemo shows the other layout segfs mounts: a shard as
// OpenSearch's remote segment store writes it (UUID-named blobs under
// hashed prefixes, a metadata file naming them), written by
// tests/osremote into bucket demo-os, mounted by index UUID and shard,
// read and compared byte for byte, then checked by segfs verify --deep.
func openSearchDemo(ctx context.Context, bins harness.Binaries, srv *harness.Server, work string) error {
	const bucket, base, uuid, shardID = "demo-os", "remote-store", "oVqWn4LXTtKVNzUuG9yj4A", 0
	fmt.Println()
	fmt.Println("segfs demo, part 2: a shard in OpenSearch's remote segment store layout")
	fmt.Println()
	if err := srv.CreateBucket(ctx, bucket); err != nil {
		return err
	}
	o := osremote.Options{Base: base, IndexUUID: uuid, Shard: shardID, PathType: layout.HashedPrefix,
		HashAlgorithm: layout.FNV1aComposite1, Version: 2, IndexPathFile: true, Seed: 7}
	put := func(key string, data []byte) error {
		_, err := srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	files, err := osremote.ShardFiles([]string{"_0", "_1", "_2"}, 5, 2<<20, 7)
	if err != nil {
		return err
	}
	r := osremote.New(put, o)
	ref, err := r.Upload(files, 1, 5)
	if err != nil {
		return err
	}
	var total int64
	for _, b := range files {
		total += int64(len(b))
	}
	info("upload", "%d files (%s) as blobs under s3://%s/%s", len(files), mb(total), bucket, r.Path("data"))
	info("", "metadata %s", ref.MetadataName)

	source := "s3://" + bucket + "/" + base
	args := []string{"--layout", "opensearch", "--index-uuid", uuid, "--shard", fmt.Sprint(shardID)}
	m, err := harness.StartMount(ctx, harness.MountOptions{Bin: bins.Segfs, Source: source, Server: srv, Args: args, TempDir: work})
	if err != nil {
		return err
	}
	defer m.Unmount()
	info("mount", "%s %s at %s", source, strings.Join(args, " "), m.Dir)

	want := map[string][]byte{}
	for n, b := range files {
		want[n] = b
	}
	want[layout.SegmentsFileName(ref.Metadata.Generation)] = ref.SegmentInfos
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	start := time.Now()
	for _, n := range names {
		got, err := os.ReadFile(filepath.Join(m.Dir, n))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want[n]) {
			return fmt.Errorf("%s read through the mount differs from the file uploaded", n)
		}
	}
	info("read", "%d Lucene files by their own names, byte-exact, in %v (segments_N from the metadata)", len(names), since(start))
	if err := m.Unmount(); err != nil {
		return err
	}

	cmd := exec.CommandContext(ctx, bins.Segfs, append(append([]string{"verify", "--deep",
		"--endpoint", srv.Endpoint(), "--path-style", "--region", harness.Region,
		"--cache-dir", filepath.Join(work, "verify-cache")}, args...), source)...)
	cmd.Env = harness.ChildEnv(srv.Env()...)
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	info("verify", "segfs verify --deep: %s", lines[len(lines)-1])
	if err != nil {
		return fmt.Errorf("segfs verify: %w\n%s", err, out)
	}
	return nil
}
