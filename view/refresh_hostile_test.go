package view_test

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/osremote"
	"github.com/segfs/segfs/view"
)

// hidingStore lists its store without the names in hide, as a listing
// that lags behind an upload (or follows a deletion) does.
type hidingStore struct {
	fetcher.Store
	hide map[string]bool
}

func (s hidingStore) List(ctx context.Context) ([]fetcher.Object, error) {
	objs, err := s.Store.List(ctx)
	var out []fetcher.Object
	for _, o := range objs {
		if !s.hide[o.Key] {
			out = append(out, o)
		}
	}
	return out, err
}

// resolvingStore is a sub-store at sub of top that resolves the dot
// elements of the keys it is asked for, as a server resolves those of a
// request's path: "../x" reaches beside sub.
type resolvingStore struct {
	top fetcher.Store
	sub string
}

func (s resolvingStore) key(k string) string { return path.Clean(path.Join(s.sub, k)) }

func (s resolvingStore) List(ctx context.Context) ([]fetcher.Object, error) {
	return nil, errors.New("resolvingStore: no listing")
}

func (s resolvingStore) Stat(ctx context.Context, key string) (fetcher.Object, error) {
	o, err := s.top.Stat(ctx, s.key(key))
	o.Key = key
	return o, err
}

func (s resolvingStore) ReadRange(ctx context.Context, obj fetcher.Object, off int64, p []byte) error {
	obj.Key = s.key(obj.Key)
	return s.top.ReadRange(ctx, obj, off, p)
}

func (s resolvingStore) Counters() *fetcher.Counters { return s.top.Counters() }
func (s resolvingStore) String() string              { return "resolving " + s.sub }

// A listing that lacks the newest metadata file does not take the view
// back: segments_p (generation 25) stays when only segments_5's file is
// listed, and stays when segments_p's is listed again; a later refresh
// of the same commit, and a newer commit, replace it.
func TestNewerNeverGoesBack(t *testing.T) {
	o := osremote.Options{IndexUUID: "idx", Shard: 0, PathType: layout.Fixed, Version: 2, Seed: 7}
	root := t.TempDir()
	r := osremote.New(osremote.DirPut(root), o)
	upload := func(segs []string, gen int64) *osremote.Refresh {
		t.Helper()
		files, err := osremote.ShardFiles(segs, gen, 20<<10, o.Seed)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := r.Upload(files, 1, gen)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	old := upload([]string{"_0"}, 5)
	newest := upload([]string{"_0", "_1"}, 25)
	if layout.SegmentsFileName(25) != "segments_p" {
		t.Fatalf("generation 25 is %s", layout.SegmentsFileName(25))
	}
	open := func(ctx context.Context, sub string) (fetcher.Store, error) {
		return fetcher.Open(ctx, "file://"+filepath.Join(root, sub), fetcher.Config{})
	}
	ctx := context.Background()
	cur, err := view.OpenSearch{IndexUUID: "idx", Shard: 0}.Resolve(ctx, open, "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Err() != nil || cur.MetadataFile != newest.MetadataName {
		t.Fatalf("resolve: %v, %s", cur.Err(), cur.MetadataFile)
	}
	md, err := open(ctx, cur.MetadataPath)
	if err != nil {
		t.Fatal(err)
	}
	lagging := hidingStore{md, map[string]bool{newest.MetadataName: true}}
	for i, l := range []struct {
		what string
		st   fetcher.Store
	}{{"without the newest", lagging}, {"whole", md}, {"without the newest", lagging}} {
		next, err := view.Newer(ctx, l.st, cur, 4)
		if err != nil || next != nil {
			got := "nothing"
			if next != nil {
				got = next.MetadataFile + " (" + layout.SegmentsFileName(next.Metadata.Generation) + ")"
			}
			t.Fatalf("refresh %d (listing %s): %s, %v; want nothing: the view is at segments_p, %s is older",
				i, l.what, got, err, old.MetadataName)
		}
	}

	again := upload([]string{"_0", "_1", "_2"}, 25) // a refresh of the same commit: upload counter 3
	next, err := view.Newer(ctx, md, cur, 4)
	if err != nil || next == nil || next.MetadataFile != again.MetadataName {
		t.Fatalf("a later refresh of the same commit: %v, %v; want %s", next, err, again.MetadataName)
	}
	later := upload([]string{"_3"}, 26)
	if next, err = view.Newer(ctx, md, next, 4); err != nil || next == nil || next.MetadataFile != later.MetadataName {
		t.Fatalf("a newer commit: %v, %v; want %s", next, err, later.MetadataName)
	}
}

// A newer metadata file naming a blob by a path out of the shard's data
// prefix ("../../../../<other index>/0/segments/data/<blob>", of the
// other blob's length and checksum) is refused, and no HEAD goes out:
// a server that resolves the path would serve the other index's blob as
// this shard's file (issue 42). The mount refuses it the same way.
func TestNewerRefusesBlobPaths(t *testing.T) {
	root := t.TempDir()
	put := osremote.DirPut(root)
	mine := osremote.Options{IndexUUID: "mineIdx", Shard: 0, PathType: layout.Fixed, Version: 2, Seed: 8}
	other := osremote.Options{IndexUUID: "otherIdx", Shard: 0, PathType: layout.Fixed, Version: 2, Seed: 9}
	r := osremote.New(put, mine)
	files, err := osremote.ShardFiles([]string{"_0"}, 3, 20<<10, mine.Seed)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Upload(files, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	otherFiles, err := osremote.ShardFiles([]string{"_0"}, 3, 20<<10, other.Seed)
	if err != nil {
		t.Fatal(err)
	}
	otherRef, err := osremote.New(put, other).Upload(otherFiles, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	top, err := fetcher.Open(ctx, "file://"+root, fetcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	open := func(ctx context.Context, sub string) (fetcher.Store, error) { return fetcher.Sub(top, sub) }
	cur, err := view.OpenSearch{IndexUUID: mine.IndexUUID, Shard: 0}.Resolve(ctx, open, "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Err() != nil {
		t.Fatal(cur.Err())
	}
	cur.Data = resolvingStore{top: top, sub: cur.DataPath}

	// The hostile newer metadata file: _0.fdt's blob is the other
	// index's, named by a path that climbs out of this shard's data.
	md := *ref.Metadata
	md.Files = append([]layout.FileEntry(nil), ref.Metadata.Files...)
	climb := "../../../../" + path.Join(other.IndexUUID, "0", "segments", "data", path.Base(otherRef.Blobs["_0.fdt"]))
	for i, f := range md.Files {
		if f.Name == "_0.fdt" {
			o := otherRef.Metadata.Files[slicesIndex(otherRef.Metadata.Files, "_0.fdt")]
			md.Files[i].Uploaded, md.Files[i].Length, md.Files[i].Checksum = climb, o.Length, o.Checksum
		}
	}
	if got := path.Clean(path.Join(cur.DataPath, climb)); got != otherRef.Blobs["_0.fdt"] {
		t.Fatalf("the climbing name resolves to %s, not the other index's blob %s", got, otherRef.Blobs["_0.fdt"])
	}
	md.Generation, md.Checkpoint = 4, &layout.Checkpoint{}
	*md.Checkpoint = *ref.Metadata.Checkpoint
	md.Checkpoint.SegmentsGen = 4
	raw, err := layout.EncodeMetadata(&md)
	if err != nil {
		t.Fatal(err)
	}
	name := layout.FormatMetadataName(layout.MetadataName{PrimaryTerm: 1, Generation: 4, TranslogGeneration: 4,
		UploadCounter: 9, NodeHash: "-1234567", CreatedMillis: 1_700_000_000_004, Version: 2})
	if err := os.WriteFile(filepath.Join(root, cur.MetadataPath, name), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	mdStore, err := open(ctx, cur.MetadataPath)
	if err != nil {
		t.Fatal(err)
	}
	heads := top.Counters().Stats.Load()
	next, err := view.Newer(ctx, mdStore, cur, 4)
	if err == nil && next != nil && next.Err() == nil {
		for _, e := range next.Entries {
			if e.Name == "_0.fdt" {
				t.Fatalf("the newer metadata file was taken: _0.fdt is now %s (%d bytes)", e.Obj.Key, e.Obj.Size)
			}
		}
	}
	if !errors.Is(err, view.ErrLayout) || !strings.Contains(err.Error(), name) {
		t.Errorf("Newer: %v; want an ErrLayout naming %s", err, name)
	}
	if n := top.Counters().Stats.Load() - heads; n != 0 {
		t.Errorf("%d HEADs for the refused metadata file; want none", n)
	}

	// A mount at that metadata file refuses it as well.
	_, err = view.OpenSearch{IndexUUID: mine.IndexUUID, Shard: 0, Metadata: name}.Resolve(ctx, open, "", quiet)
	if !errors.Is(err, view.ErrLayout) {
		t.Errorf("a mount at the hostile metadata file: %v; want ErrLayout", err)
	}
}

func slicesIndex(files []layout.FileEntry, name string) int {
	for i, f := range files {
		if f.Name == name {
			return i
		}
	}
	panic("no " + name)
}

// A one-shard mount takes its index's remote-index-path file by the UUID
// field of the name: another index's file whose name merely contains the
// UUID (remote_path_other-<uuid>-x#1#1#x) is not read, even when it is
// listed first and would not parse.
func TestResolveIndexFileByUUIDField(t *testing.T) {
	const uuid = "zIdx" // sorts after "other-": the stranger's file lists first
	o := osremote.Options{IndexUUID: uuid, Shard: 0, PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1,
		Version: 2, IndexPathFile: true, Seed: 10}
	root, open, _ := dirRepo(t, o)
	stranger := filepath.Join(root, layout.IndexPathDir, "remote_path_other-"+uuid+"-x#1#1#x")
	if err := os.WriteFile(stranger, []byte("not an index path file"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := view.OpenSearch{IndexUUID: uuid, Shard: 0}.Resolve(context.Background(), open, "", quiet)
	if err != nil {
		t.Fatalf("resolve beside another index's file: %v", err)
	}
	if s.Err() != nil {
		t.Fatal(s.Err())
	}
	if !strings.Contains(s.DataPath, layout.PathHash(layout.FNV1aComposite1, uuid, 0, "segments", "data")) {
		t.Errorf("data path %s: not the hashed path the index's own file gives", s.DataPath)
	}
}
