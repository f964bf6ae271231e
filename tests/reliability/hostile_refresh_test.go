package reliability

import (
	"bytes"
	"context"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/osremote"
)

// Plan case 25, hostile input at a refresh (issue 42): a newer metadata
// file of a shard names the blob of one of its files by a path out of
// the shard's data prefix, "../../../../<other index>/0/segments/data/
// <blob>", with the other blob's length and checksum. A segfs of 9c4c843
// refused such a name at mount (it must match the listing) but sent it
// at a refresh, in a HEAD and then in the GETs, with its dot elements;
// versitygw resolved them, and the shard's _0.fdt read as the other
// index's.

// hostileRefreshRepo is a remote-store repository (no base path, fixed
// path type) of two indices of one shard each, and what a hostile newer
// metadata file of the first looks like.
type hostileRefreshRepo struct {
	objs         map[string][]byte
	mine, other  string            // the index UUIDs
	mineFiles    map[string][]byte // the first shard's files, as a mount shows them
	otherFdt     []byte            // the second shard's _0.fdt
	metadataKey  string            // where the hostile metadata file goes
	metadataName string
	metadata     []byte // the hostile metadata file
}

// newHostileRefreshRepo writes the two shards and builds (not uploads)
// the hostile metadata file: the first shard's commit at generation 4,
// its _0.fdt uploaded as the second shard's _0.fdt blob, climbing out.
func newHostileRefreshRepo(t *testing.T) *hostileRefreshRepo {
	t.Helper()
	h := &hostileRefreshRepo{objs: map[string][]byte{}, mine: "mineIndexUUIDaaaaaaaaa", other: "otherIndexUUIDbbbbbbbb"}
	put := func(key string, data []byte) error {
		h.objs[key] = data
		return nil
	}
	upload := func(uuid string, seed uint64) (*osremote.Remote, map[string][]byte, *osremote.Refresh) {
		o := osremote.Options{IndexUUID: uuid, Shard: 0, PathType: layout.Fixed, Version: 2, Seed: seed}
		files, err := osremote.ShardFiles([]string{"_0"}, 3, 200<<10, seed)
		if err != nil {
			t.Fatal(err)
		}
		r := osremote.New(put, o)
		ref, err := r.Upload(files, 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		return r, files, ref
	}
	mineRemote, mineFiles, mineRef := upload(h.mine, 4201)
	_, otherFiles, otherRef := upload(h.other, 4202)
	h.mineFiles, h.otherFdt = mineFiles, otherFiles["_0.fdt"]
	if bytes.Equal(h.mineFiles["_0.fdt"], h.otherFdt) {
		t.Fatal("the two indices' _0.fdt are the same bytes: the test could not tell them apart")
	}
	dataPath := mineRemote.Path("data")
	climb := strings.Repeat("../", strings.Count(dataPath, "/")+1) + otherRef.Blobs["_0.fdt"]
	if got := path.Clean(path.Join(dataPath, climb)); got != otherRef.Blobs["_0.fdt"] {
		t.Fatalf("%s below %s resolves to %s, not to the other index's blob %s", climb, dataPath, got, otherRef.Blobs["_0.fdt"])
	}
	md := *mineRef.Metadata
	md.Files = slices.Clone(mineRef.Metadata.Files)
	var otherEntry layout.FileEntry
	for _, f := range otherRef.Metadata.Files {
		if f.Name == "_0.fdt" {
			otherEntry = f
		}
	}
	for i, f := range md.Files {
		if f.Name == "_0.fdt" {
			md.Files[i].Uploaded, md.Files[i].Length, md.Files[i].Checksum = climb, otherEntry.Length, otherEntry.Checksum
		}
	}
	cp := *md.Checkpoint
	cp.SegmentsGen = 4
	md.Checkpoint, md.Generation = &cp, 4
	raw, err := layout.EncodeMetadata(&md)
	if err != nil {
		t.Fatal(err)
	}
	h.metadata = raw
	h.metadataName = layout.FormatMetadataName(layout.MetadataName{PrimaryTerm: 1, Generation: 4, TranslogGeneration: 4,
		UploadCounter: 99, NodeHash: "-1234567", CreatedMillis: 1_700_000_000_004, Version: 2})
	h.metadataKey = path.Join(mineRemote.Path("metadata"), h.metadataName)
	return h
}

// TestPlan25RefreshBlobOutsideShard mounts the first index's shard with
// --refresh 1s, once as a one-shard mount and once through a repository
// mount, then uploads the hostile newer metadata file. The refresh must
// refuse it, saying so with the file's name, and _0.fdt must still read
// as the shard's own bytes, never the other index's; no segments_4
// shows. The mount goes straight to versitygw, which resolves the dot
// elements of a request's path.
func TestPlan25RefreshBlobOutsideShard(t *testing.T) {
	t.Parallel()
	h := newHostileRefreshRepo(t)
	e := newEnv(t, nil, 4200, h.objs)
	for _, c := range []struct {
		name string
		args []string
		dir  string // the shard's directory below the mountpoint
	}{
		{"shard", []string{"--layout", "opensearch", "--index-uuid", h.mine, "--shard", "0"}, ""},
		{"repository", []string{"--layout", "opensearch"}, filepath.Join(h.mine, "0")},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			// The next mount starts from the shard as uploaded; this
			// cleanup runs after the unmount.
			t.Cleanup(func() {
				if err := e.srv.Delete(context.Background(), e.bucket, h.metadataKey); err != nil {
					t.Error(err)
				}
			})
			opts := e.mountOptions(cacheDir(t), append(slices.Clone(c.args), "--refresh", "1s")...)
			opts.Endpoint = e.srv.Endpoint()
			m := harness.StartMountT(t, opts)
			shard := filepath.Join(m.Dir, c.dir)
			// _0.fdt is not read before the refresh: neither the page
			// cache nor segfs's may hold its bytes when it is read.
			if got, err := os.ReadFile(filepath.Join(shard, "_0.fdm")); err != nil || !bytes.Equal(got, h.mineFiles["_0.fdm"]) {
				t.Fatalf("_0.fdm before the refresh: %v (bytes equal: %v)", err, bytes.Equal(got, h.mineFiles["_0.fdm"]))
			}
			if _, err := os.Stat(filepath.Join(shard, layout.SegmentsFileName(3))); err != nil {
				t.Fatalf("segments_3 before the refresh: %v", err)
			}

			if _, err := e.srv.PutBytes(ctx, e.bucket, h.metadataKey, h.metadata); err != nil {
				t.Fatal(err)
			}
			line := waitRefreshOutcome(t, m, h.metadataName)
			t.Logf("segfs said: %s", line)
			if !strings.Contains(line, "failed") || !strings.Contains(line, "keeps its view") {
				t.Errorf("the refresh took the hostile metadata file %s:\n%s", h.metadataName, line)
			}
			got, err := os.ReadFile(filepath.Join(shard, "_0.fdt"))
			switch {
			case err != nil:
				t.Errorf("_0.fdt after the refresh: %v", err)
			case bytes.Equal(got, h.otherFdt):
				t.Errorf("_0.fdt after the refresh reads as the other index's _0.fdt (%d bytes)", len(got))
			case !bytes.Equal(got, h.mineFiles["_0.fdt"]):
				t.Errorf("_0.fdt after the refresh: %d bytes, not the shard's own (first difference at %d)", len(got), firstDiff(got, h.mineFiles["_0.fdt"]))
			}
			if _, err := os.Stat(filepath.Join(shard, layout.SegmentsFileName(4))); err == nil {
				t.Errorf("segments_4, the hostile commit, shows")
			}
			if strings.Contains(m.Log(), "newer metadata file") {
				t.Errorf("segfs logged the hostile metadata file as newer:\n%s", tail(m.Log(), 4096))
			}
			if crashed(m.Log()) {
				t.Errorf("segfs logged a panic:\n%s", tail(m.Log(), 4096))
			}
		})
	}
}

// waitRefreshOutcome waits until m's log tells what a refresh made of
// the metadata file name: a line naming it (a refusal), or one taking a
// newer metadata file, and returns that line.
func waitRefreshOutcome(t *testing.T, m *harness.Mount, name string) string {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		for _, l := range strings.Split(m.Log(), "\n") {
			if strings.Contains(l, "newer metadata file") || strings.Contains(l, "refresh") && strings.Contains(l, name) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refresh told of %s in %v; log:\n%s", name, hangGuard, tail(m.Log(), 4096))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
