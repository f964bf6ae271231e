package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/osremote"
)

// OpenSearch's remote segment store, mounted as the Lucene directory it
// holds: shards written by tests/osremote in each path type, hash
// algorithm and metadata version, read through a real mount.

const osIndexUUID = "k2ijhe877d7yuhx7aBcDeF"

// osShard is a written shard: its bucket, the options it was written
// with, and its two refreshes (the second, newer, shares the first's
// segment and adds one).
type osShard struct {
	srv      *harness.Server
	bucket   string
	o        osremote.Options
	old, cur *osremote.Refresh
	oldFiles map[string][]byte
	curFiles map[string][]byte
}

// writeShard writes a shard in o's layout into a new bucket.
func writeShard(t *testing.T, srv *harness.Server, o osremote.Options) *osShard {
	t.Helper()
	bucket := newBucket(t, srv)
	ctx := context.Background()
	put := func(key string, data []byte) error {
		_, err := srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	r := osremote.New(put, o)
	s := &osShard{srv: srv, bucket: bucket, o: o}
	var err error
	if s.oldFiles, err = osremote.ShardFiles([]string{"_0"}, 3, 300<<10, o.Seed); err != nil {
		t.Fatal(err)
	}
	if s.old, err = r.Upload(s.oldFiles, 1, 3); err != nil {
		t.Fatal(err)
	}
	if s.curFiles, err = osremote.ShardFiles([]string{"_0", "_1"}, 4, 300<<10, o.Seed); err != nil {
		t.Fatal(err)
	}
	if s.cur, err = r.Upload(s.curFiles, 1, 4); err != nil {
		t.Fatal(err)
	}
	return s
}

// source returns the shard's repository as a segfs SOURCE.
func (s *osShard) source() string {
	if s.o.Base == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + s.o.Base
}

// args returns the layout flags naming the shard; with paths, also its
// path type and hash algorithm.
func (s *osShard) args(paths bool) []string {
	a := []string{"--layout", "opensearch", "--index-uuid", s.o.IndexUUID, "--shard", strconv.Itoa(s.o.Shard)}
	if paths {
		a = append(a, "--path-type", s.o.PathType.String(), "--hash-algorithm", s.o.HashAlgorithm.String())
	}
	return a
}

// want returns the files a mount of ref must show: its files by Lucene
// name, segments_N replaced by the metadata's SegmentInfos when it has
// them.
func want(files map[string][]byte, ref *osremote.Refresh) map[string][]byte {
	out := map[string][]byte{}
	for n, b := range files {
		out[n] = b
	}
	if ref.SegmentInfos != nil {
		out[layout.SegmentsFileName(ref.Metadata.Generation)] = ref.SegmentInfos
	}
	return out
}

// checkShardDir checks that dir holds exactly files, byte for byte.
func checkShardDir(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got, wantNames []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	for n := range files {
		wantNames = append(wantNames, n)
	}
	sort.Strings(wantNames)
	if !slices.Equal(got, wantNames) {
		t.Fatalf("the mount shows %q, want %q", got, wantNames)
	}
	for n, b := range files {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, b) {
			t.Fatalf("%s: %d bytes read, %d expected, first difference at %d", n, len(data), len(b), firstDiff(data, b))
		}
	}
}

// Each path type, both hash algorithms and every metadata version mount
// by index UUID and shard, and read byte-exact; the newest metadata wins;
// segments_N is the metadata's SegmentInfos (or, for the oldest body,
// the uploaded file); --metadata shows the older refresh.
func TestOpenSearchLayouts(t *testing.T) {
	srv := needServer(t)
	for _, tc := range []struct {
		name      string
		o         osremote.Options
		flagPaths bool // give --path-type and --hash-algorithm
	}{
		{"fixed/v1-2.10", osremote.Options{Base: "repo/base", PathType: layout.Fixed, Version: 1, Body: "2.10"}, false},
		{"hashed_prefix/composite/v2", osremote.Options{Base: "repo", PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1, Version: 2}, true},
		{"hashed_infix/base64/v3", osremote.Options{Base: "base", PathType: layout.HashedInfix, HashAlgorithm: layout.FNV1aBase64, Version: 3}, true},
		{"hashed_prefix/base64/v1-2.9/index-path-file", osremote.Options{PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aBase64, Version: 1, Body: "2.9", IndexPathFile: true}, false},
		{"fixed/v1-2.6", osremote.Options{Base: "b", PathType: layout.Fixed, Version: 1, Body: "2.6"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.IndexUUID, o.Shard, o.Seed = osIndexUUID, 3, uint64(len(tc.name))
			s := writeShard(t, srv, o)
			m := mountS3(t, srv, s.source(), s.args(tc.flagPaths)...)
			checkShardDir(t, m.Dir, want(s.curFiles, s.cur))
			if err := m.Unmount(); err != nil {
				t.Fatal(err)
			}
			old := mountS3(t, srv, s.source(), append(s.args(tc.flagPaths), "--metadata", s.old.MetadataName)...)
			checkShardDir(t, old.Dir, want(s.oldFiles, s.old))
		})
	}
}

// A shard the store does not hold whole never mounts: each failure is
// one line naming the file.
func TestOpenSearchMountFailures(t *testing.T) {
	srv := needServer(t)
	ctx := context.Background()
	base := osremote.Options{Base: "repo", IndexUUID: osIndexUUID, Shard: 0, PathType: layout.Fixed, Version: 2, Seed: 9}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, s *osShard)
		says   []string
	}{
		{"corrupt newest metadata", func(t *testing.T, s *osShard) {
			key := s.pathOf("metadata") + "/" + s.cur.MetadataName
			data := s.get(t, key)
			data[len(data)/2] ^= 0xff
			s.put(t, key, data)
		}, []string{"metadata__"}},
		{"missing blob", func(t *testing.T, s *osShard) {
			if err := srv.Delete(ctx, s.bucket, s.cur.Blobs["_1.tim"]); err != nil {
				t.Fatal(err)
			}
		}, []string{"_1.tim", "does not exist"}},
		{"blob of another length", func(t *testing.T, s *osShard) {
			key := s.cur.Blobs["_1.doc"]
			s.put(t, key, s.get(t, key)[:100])
		}, []string{"_1.doc", "bytes"}},
		{"no such shard", func(t *testing.T, s *osShard) { s.o.Shard = 7 }, []string{"metadata"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := writeShard(t, srv, base)
			tc.damage(t, s)
			out := mountFails(t, harness.MountOptions{Source: s.source(), Server: srv, Args: s.args(false)})
			lines := strings.Split(strings.TrimSpace(out), "\n")
			last := lines[len(lines)-1]
			for _, w := range tc.says {
				if !strings.Contains(last, w) {
					t.Errorf("the error line %q does not name %q", last, w)
				}
			}
		})
	}
}

// segfs verify finds what is damaged: the default check (lengths and
// footers against the metadata) a truncated or missing blob; --deep a
// flipped byte inside a blob, which the default check does not read and
// says so; the same on a local copy of the mounted directory.
func TestVerifyOpenSearch(t *testing.T) {
	srv := needServer(t)
	ctx := context.Background()
	o := osremote.Options{Base: "repo", IndexUUID: osIndexUUID, Shard: 1, PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1, Version: 2, Seed: 21}
	s := writeShard(t, srv, o)
	args := s.args(true)

	code, out := s.verify(t, args...)
	if code != 0 || !strings.Contains(out, "--deep also checks") {
		t.Fatalf("intact shard: exit %d, want 0 and a word about --deep:\n%s", code, out)
	}
	if code, out := s.verify(t, append(args, "--deep")...); code != 0 {
		t.Fatalf("intact shard, --deep: exit %d:\n%s", code, out)
	}

	// A copy of the mounted directory verifies too, and a flipped byte in
	// it is found by --deep only.
	m := mountS3(t, srv, s.source(), args...)
	copyDir := t.TempDir()
	if out, err := exec.Command("cp", "-r", m.Dir+"/.", copyDir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if code, out := runVerify(t, nil, copyDir, "--deep"); code != 0 {
		t.Fatalf("copy of the mount, --deep: exit %d:\n%s", code, out)
	}
	flipByte(t, filepath.Join(copyDir, "_1.fdt"), 1000)
	if code, out := runVerify(t, nil, copyDir); code != 0 {
		t.Errorf("copy with a flipped byte, default check: exit %d, want 0 (it reads footers only):\n%s", code, out)
	}
	if code, out := runVerify(t, nil, copyDir, "--deep"); code != 1 || !strings.Contains(out, "_1.fdt") {
		t.Errorf("copy with a flipped byte, --deep: exit %d, want 1 naming _1.fdt:\n%s", code, out)
	}

	// A flipped byte in a data blob.
	key := s.cur.Blobs["_1.fdt"]
	data := s.get(t, key)
	data[5000] ^= 0x01
	s.put(t, key, data)
	if code, out := s.verify(t, args...); code != 0 {
		t.Errorf("flipped byte, default check: exit %d, want 0:\n%s", code, out)
	}
	if code, out := s.verify(t, append(args, "--deep", "--cache-dir", filepath.Join(t.TempDir(), "c2"))...); code != 1 || !strings.Contains(out, "_1.fdt") {
		t.Errorf("flipped byte, --deep: exit %d, want 1 naming _1.fdt:\n%s", code, out)
	}
	// A truncated blob and a missing one: the default check.
	key = s.cur.Blobs["_1.tim"]
	s.put(t, key, s.get(t, key)[:500])
	if err := srv.Delete(ctx, s.bucket, s.cur.Blobs["_1.doc"]); err != nil {
		t.Fatal(err)
	}
	code, out = s.verify(t, append(args, "--json")...)
	if code != 1 || !strings.Contains(out, `"_1.tim"`) || !strings.Contains(out, `"_1.doc"`) || !strings.Contains(out, `"missing"`) {
		t.Errorf("truncated and missing blobs: exit %d, want 1 naming _1.tim and _1.doc (missing):\n%s", code, out)
	}
}

// verify runs segfs verify on the shard's repository.
func (s *osShard) verify(t *testing.T, args ...string) (int, string) {
	t.Helper()
	a := append([]string{"--endpoint", s.srv.Endpoint(), "--path-style", "--region", harness.Region}, args...)
	if !slices.Contains(a, "--cache-dir") {
		a = append(a, "--cache-dir", filepath.Join(t.TempDir(), "cache"))
	}
	return runVerify(t, s.srv.Env(), s.source(), a...)
}

// runVerify runs segfs verify SOURCE with args and returns its exit code
// and output.
func runVerify(t *testing.T, env []string, source string, args ...string) (int, string) {
	t.Helper()
	return runSegfs(t, env, "verify", source, args...)
}

// runSegfs runs segfs CMD args SOURCE and returns its exit code and
// output (stdout and stderr).
func runSegfs(t *testing.T, env []string, command, source string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(needSegfs(t), append(append([]string{command}, args...), source)...)
	cmd.Env = harness.ChildEnv(env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("segfs %s: %v", command, err)
	return 0, ""
}

func (s *osShard) pathOf(kind string) string {
	return layout.ShardPath(s.o.PathType, s.o.HashAlgorithm, s.o.Base, s.o.IndexUUID, s.o.Shard, "segments", kind)
}

func (s *osShard) get(t *testing.T, key string) []byte {
	t.Helper()
	data, err := s.srv.GetBytes(context.Background(), s.bucket, key)
	if err != nil {
		t.Fatal(fmt.Errorf("get %s: %w", key, err))
	}
	return data
}

func (s *osShard) put(t *testing.T, key string, data []byte) {
	t.Helper()
	if _, err := s.srv.PutBytes(context.Background(), s.bucket, key, data); err != nil {
		t.Fatal(err)
	}
}

// A local directory holding a repository mounts the same way: the
// directory is the repository's root.
func TestOpenSearchLayoutFromADirectory(t *testing.T) {
	root := t.TempDir()
	put := osremote.DirPut(root)
	o := osremote.Options{IndexUUID: osIndexUUID, Shard: 2, PathType: layout.HashedInfix, HashAlgorithm: layout.FNV1aComposite1, Version: 3, Seed: 31}
	r := osremote.New(put, o)
	files, err := osremote.ShardFiles([]string{"_0", "_1"}, 9, 200<<10, 31)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Upload(files, 2, 9)
	if err != nil {
		t.Fatal(err)
	}
	m := mountFile(t, root, "--layout", "opensearch", "--index-uuid", osIndexUUID, "--shard", "2", "--path-type", "hashed_infix")
	checkShardDir(t, m.Dir, want(files, ref))
}
