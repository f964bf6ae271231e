package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/localstore"
	"github.com/segfs/segfs/tests/snaprepo"
	"github.com/segfs/segfs/view"
)

// A shard of a snapshot repository on versitygw, written as real
// clusters write them (tests/snaprepo: compressed Smile metadata, the
// .si and segments_N files virtual, the rest data blobs), of an index
// the real Lucene wrote: the mount shows exactly the shard's files by
// their Lucene names, byte-exact, and CheckIndex finds the index clean
// through it. The newest snapshot holding the index is the default; a
// named one is shown as it was.
func TestSnapshotLayoutMount(t *testing.T) {
	lu := testLucene(t)
	srv := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	local, first := buildTestIndex(ctx, t, lu)
	bucket := newBucket(t, srv)
	put := func(key string, data []byte) error {
		_, err := srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	r := snaprepo.New(put, snaprepo.Options{Base: "repo", Seed: 36, Compress: true})
	if _, err := r.Snapshot("nightly-1", snaprepo.Shard{Index: "logs", Shard: 0, Files: first},
		snaprepo.Shard{Index: "other", Shard: 0, Files: map[string][]byte{"x": []byte("not logs")}}); err != nil {
		t.Fatal(err)
	}
	more := harness.LuceneIndex{Docs: 500, Segments: 1, Seed: 37, Append: true}
	if err := lu.Build(ctx, local, more); err != nil {
		t.Fatal(err)
	}
	second := localstore.ReadTree(t, local)
	if _, err := r.Snapshot("nightly-2", snaprepo.Shard{Index: "logs", Shard: 0, Files: second}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name  string
		args  []string
		files map[string][]byte
	}{
		{"newest", nil, second},
		{"named", []string{"--snapshot", "nightly-1"}, first},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := mountS3(t, srv, "s3://"+bucket+"/repo", append([]string{"--layout", "snapshot", "--index", "logs", "--shard", "0"}, c.args...)...)
			ents, err := os.ReadDir(m.Dir)
			if err != nil {
				t.Fatal(err)
			}
			var names, want []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			for n := range c.files {
				want = append(want, n)
			}
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Fatalf("the mount lists %q, want %q", names, want)
			}
			for n, data := range c.files {
				got, err := os.ReadFile(filepath.Join(m.Dir, n))
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("%s: %d bytes, %v; want the shard's %d", n, len(got), err, len(data))
				}
			}
			if err := lu.Check(ctx, m.Dir); err != nil {
				t.Errorf("CheckIndex through the mount: %v", err)
			}
		})
	}

	// segfs snapshots lists both snapshots and the shard of each index
	// they hold, with its files and bytes.
	list := func(extra ...string) (int, string) {
		return runSegfs(t, srv.Env(), "snapshots", "s3://"+bucket+"/repo",
			append([]string{"--endpoint", srv.Endpoint(), "--path-style", "--region", harness.Region}, extra...)...)
	}
	code, out := list("--json")
	var cat view.Catalog
	if err := json.Unmarshal([]byte(out), &cat); code != 0 || err != nil {
		t.Fatalf("segfs snapshots --json: exit %d, %v:\n%s", code, err, out)
	}
	type row struct {
		snap, index string
		files       int
		size        int64
	}
	var got []row
	for _, s := range cat.Snapshots {
		for _, ix := range s.Indices {
			for _, sh := range ix.Shards {
				got = append(got, row{s.Name, ix.Name, sh.Files, sh.Bytes})
			}
		}
	}
	total := func(files map[string][]byte) (n int64) {
		for _, b := range files {
			n += int64(len(b))
		}
		return n
	}
	wantRows := []row{{"nightly-1", "logs", len(first), total(first)}, {"nightly-1", "other", 1, 8}, {"nightly-2", "logs", len(second), total(second)}}
	if !slices.Equal(got, wantRows) {
		t.Errorf("segfs snapshots --json lists %+v, want %+v", got, wantRows)
	}
	if code, out := list("--index", "other"); code != 0 || !strings.Contains(out, "nightly-1") || strings.Contains(out, "nightly-2") ||
		!strings.Contains(out, "SUCCESS") || !strings.Contains(out, "1 shard snapshots") {
		t.Errorf("segfs snapshots --index other: exit %d, want nightly-1's shard alone:\n%s", code, out)
	}

	// segfs restore of the newest snapshot writes the shard's files.
	dest := t.TempDir()
	mustRestore(t, srv, "s3://"+bucket+"/repo", dest, "--layout", "snapshot", "--index", "logs", "--shard", "0")
	sameFiles(t, localstore.ReadTree(t, dest), second)

	// segfs verify checks each file against the snapshot's checksum: a
	// flipped byte in a blob (its Lucene footer left as it was) is found.
	verify := func(extra ...string) (int, string) {
		args := append([]string{"--layout", "snapshot", "--index", "logs", "--shard", "0", "--endpoint", srv.Endpoint(), "--path-style",
			"--region", harness.Region, "--cache-dir", filepath.Join(t.TempDir(), "cache")}, extra...)
		return runVerify(t, srv.Env(), "s3://"+bucket+"/repo", args...)
	}
	if code, out := verify("--deep"); code != 0 {
		t.Fatalf("verify of the intact snapshot: exit %d:\n%s", code, out)
	}

	// A blob gone from the repository: the mount refuses the shard,
	// naming the file.
	// A file of the segment the second snapshot added: its blob is the
	// only one with its bytes (snapshots of a segment upload it again).
	var victim string
	for n := range second {
		if _, old := first[n]; !old && strings.HasSuffix(n, ".fdt") {
			victim = n
		}
	}
	dir := filepath.Join(srv.Dir(), "root", bucket, "repo", "indices")
	var blobOf string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "__") {
			if data, err := os.ReadFile(p); err == nil && bytes.Equal(data, second[victim]) {
				blobOf = p
			}
		}
		return nil
	})
	if blobOf == "" {
		t.Fatalf("no blob of %s in the repository", victim)
	}
	good := second[victim]
	for _, c := range []struct {
		what string
		at   int
		args []string
	}{
		// The footer's checksum, as a valid footer: only the snapshot's
		// record tells it is not the file's.
		{"a flipped bit of the footer's checksum", len(good) - 1, nil},
		{"a flipped byte of the body", 100, []string{"--deep"}},
	} {
		bad := bytes.Clone(good)
		bad[c.at] ^= 0x01
		if err := os.WriteFile(blobOf, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out := verify(c.args...); code != 1 || !strings.Contains(out, victim) {
			t.Errorf("verify %v with %s in %s: exit %d, want 1 naming it:\n%s", c.args, c.what, victim, code, out)
		}
	}
	if err := os.Remove(blobOf); err != nil {
		t.Fatal(err)
	}
	if code, out := verify(); code != 1 || !strings.Contains(out, victim) || !strings.Contains(out, "missing") {
		t.Errorf("verify with the blob of %s gone: exit %d, want 1 naming it missing:\n%s", victim, code, out)
	}
	out = mountFails(t, harness.MountOptions{Source: "s3://" + bucket + "/repo", Server: srv,
		Args: []string{"--layout", "snapshot", "--index", "logs", "--shard", "0"}})
	if !strings.Contains(out, victim) || !strings.Contains(out, "does not exist") {
		t.Errorf("the refusal does not name %s as missing:\n%s", victim, out)
	}
}
