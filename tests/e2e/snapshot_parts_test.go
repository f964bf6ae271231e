package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/snapshot"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/localstore"
	"github.com/segfs/segfs/tests/snaprepo"
)

// A repository with a chunk_size below its files' lengths (each data
// file in __<uuid>.part0 ... .partN) and hashed shard paths (the shard's
// directory under a hash before the base path, as OpenSearch's
// shard_path_type hashed_prefix puts it): the mount shows each file as its
// parts joined, byte-exact, CheckIndex finds the real Lucene's index
// clean through it, and restore and verify --deep read it whole.
func TestSnapshotLayoutParts(t *testing.T) {
	lu := testLucene(t)
	srv := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, files := buildTestIndex(ctx, t, lu)
	const partSize = 64 << 10
	many := 0
	for _, b := range files {
		if len(b) > partSize {
			many++
		}
	}
	if many < 2 {
		t.Fatalf("only %d files of the index are above %d bytes; the test needs files in parts", many, partSize)
	}
	bucket := newBucket(t, srv)
	var parts, outside int
	put := func(key string, data []byte) error {
		if strings.Contains(key, ".part") {
			parts++
		}
		if !strings.HasPrefix(key, "repo/") {
			outside++ // a shard's blob under its hash
		}
		_, err := srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	r := snaprepo.New(put, snaprepo.Options{Base: "repo", Seed: 38, Compress: true, PartSize: partSize, ShardPathType: layout.HashedPrefix})
	if _, err := r.Snapshot("s1", snaprepo.Shard{Index: "logs", Files: files}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files, %d of them above %d bytes, in %d parts", len(files), many, partSize, parts)
	if outside == 0 {
		t.Fatal("no blob outside the base path: the shard paths are not hashed")
	}
	args := []string{"--layout", "snapshot", "--index", "logs", "--shard", "0"}
	m := mountS3(t, srv, "s3://"+bucket+"/repo", args...)
	for n, data := range files {
		got, err := os.ReadFile(filepath.Join(m.Dir, n))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes, %v; want the shard's %d (first difference at %d)", n, len(got), err, len(data), firstDiff(got, data))
		}
	}
	if err := lu.Check(ctx, m.Dir); err != nil {
		t.Errorf("CheckIndex through the mount: %v", err)
	}
	dest := t.TempDir()
	mustRestore(t, srv, "s3://"+bucket+"/repo", dest, args...)
	sameFiles(t, localstore.ReadTree(t, dest), files)
	vargs := append(slices.Clone(args), "--deep", "--endpoint", srv.Endpoint(), "--path-style", "--region", harness.Region,
		"--cache-dir", filepath.Join(t.TempDir(), "cache"))
	if code, out := runVerify(t, srv.Env(), "s3://"+bucket+"/repo", vargs...); code != 0 {
		t.Errorf("verify --deep: exit %d:\n%s", code, out)
	}
}

// Hostile snapshot repositories: each refused by the mount before it
// mounts, with a line naming what is wrong, and nothing read outside the
// repository.
func TestSnapshotHostileRepositories(t *testing.T) {
	srv := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bucket := newBucket(t, srv)
	files := map[string][]byte{
		"_0.cfs":     bytes.Repeat([]byte("segfs"), 3000), // 15,000 bytes: 4 parts of 4 KiB
		"_0.cfe":     bytes.Repeat([]byte("e"), 500),
		"_0.si":      []byte("si bytes"),
		"segments_1": []byte("segments bytes"),
	}
	// A secret beside the repository, which a name with .. would reach.
	if _, err := srv.PutBytes(ctx, bucket, "secret", []byte("not the repository's")); err != nil {
		t.Fatal(err)
	}
	deep := []byte{':', ')', '\n', 0x00}
	for range 10_000 {
		deep = append(deep, 0xF8) // start an array
	}
	hugeBinary := []byte{':', ')', '\n', 0x04, 0xFD, 0x7F, 0x7F, 0x7F, 0x7F, 0xBF} // a raw binary of 2^34 bytes claimed
	for i, c := range []struct {
		name string
		// edit changes the shard's snap-<uuid>.dat (its bytes and its
		// parsed form) before it is stored; drop names a blob not stored.
		edit func(raw []byte, s *snapshot.ShardSnapshot) []byte
		drop string
		want []string
	}{
		{name: "a name with dot-dot", want: []string{"snap-", `is not a file name`},
			edit: func(_ []byte, s *snapshot.ShardSnapshot) []byte {
				s.Files[0].Name = "../../secret"
				return snapshot.EncodeShardSnapshot(s, true)
			}},
		{name: "a lying length", want: []string{"_0.cfe", "says _0.cfe is 600 bytes"},
			edit: func(_ []byte, s *snapshot.ShardSnapshot) []byte {
				for i := range s.Files {
					if s.Files[i].Name == "_0.cfe" {
						s.Files[i].Length = 600
					}
				}
				return snapshot.EncodeShardSnapshot(s, true)
			}},
		{name: "a missing part", drop: ".part2", want: []string{"part 2 of _0.cfs", "does not exist"}},
		{name: "a checksum mismatch", want: []string{"snap-", "checksum"},
			edit: func(raw []byte, _ *snapshot.ShardSnapshot) []byte {
				raw = bytes.Clone(raw)
				raw[len(raw)/2] ^= 0x10
				return raw
			}},
		{name: "a Smile body nested deep", want: []string{"snap-", "nesting deeper than"},
			edit: func([]byte, *snapshot.ShardSnapshot) []byte {
				return snapshot.EncodeBlob(snapshot.ShardSnapshotCodec, deep, true)
			}},
		{name: "a Smile body claiming a huge binary", want: []string{"snap-", "more than the input holds"},
			edit: func([]byte, *snapshot.ShardSnapshot) []byte {
				return snapshot.EncodeBlob(snapshot.ShardSnapshotCodec, hugeBinary, false)
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := fmt.Sprintf("repo%d", i)
			put := func(key string, data []byte) error {
				switch {
				case c.drop != "" && strings.HasSuffix(key, c.drop):
					return nil
				case c.edit != nil && strings.HasSuffix(key, ".dat"):
					s, err := snapshot.ParseShardSnapshot(data)
					if err != nil {
						return err
					}
					data = c.edit(data, s)
				}
				_, err := srv.PutBytes(ctx, bucket, key, data)
				return err
			}
			r := snaprepo.New(put, snaprepo.Options{Base: base, Seed: uint64(i), PartSize: 4096, Compress: true})
			if _, err := r.Snapshot("s1", snaprepo.Shard{Index: "logs", Files: files}); err != nil {
				t.Fatal(err)
			}
			out := mountFails(t, harness.MountOptions{Source: "s3://" + bucket + "/" + base, Server: srv,
				Args: []string{"--layout", "snapshot", "--index", "logs", "--shard", "0"}})
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the refusal does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
				t.Errorf("segfs crashed:\n%s", out)
			}
		})
	}
}
