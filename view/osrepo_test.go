package view_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/osremote"
	"github.com/segfs/segfs/view"
)

// A repository of two indices on a local file system: the fixed one
// found by its directory, the hashed one by its index path file (with
// its shard count and path type); each shard resolved with its files
// named below a prefix and keyed below the repository's root.
func TestRepositoryIndicesAndShards(t *testing.T) {
	root := t.TempDir()
	put := osremote.DirPut(root)
	files, err := osremote.ShardFiles([]string{"_0"}, 2, 4096, 1)
	if err != nil {
		t.Fatal(err)
	}
	for sh := range 2 {
		if _, err := osremote.New(put, osremote.Options{Base: "b", IndexUUID: "fixedUUID", Shard: sh, Version: 2, Seed: uint64(sh)}).Upload(files, 1, 2); err != nil {
			t.Fatal(err)
		}
	}
	for sh := range 3 {
		o := osremote.Options{Base: "b", IndexUUID: "hashedUUID", Shard: sh, PathType: layout.HashedInfix, HashAlgorithm: layout.FNV1aBase64,
			Version: 2, Seed: uint64(10 + sh), IndexPathFile: sh == 2}
		if _, err := osremote.New(put, o).Upload(files, 1, 2); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	top, err := fetcher.Open(ctx, "file://"+root, fetcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := &view.RemoteStore{Top: top, Base: "b", Log: quiet}
	listed, err := r.Indices(ctx)
	var got []string
	var shown []view.IndexRef
	for _, ref := range listed {
		if !ref.Hidden {
			got = append(got, ref.UUID)
			shown = append(shown, ref)
		}
	}
	listed = shown
	// The hashed index's infix directories sit beside the fixed index's
	// under b/; they are not shown as indices (Hidden).
	if err != nil || !slices.Equal(got, []string{"fixedUUID", "hashedUUID"}) {
		t.Fatalf("Indices = %q, %v; want the two indices alone", got, err)
	}
	// A listed index is the same as one asked for by name, once
	// completed (its index path file read).
	for _, l := range listed {
		c, err := r.Complete(ctx, l)
		byName, ok, err2 := r.Index(ctx, l.UUID)
		if err != nil || err2 != nil || !ok || c != byName {
			t.Errorf("%s: listed and completed %+v (%v), by name %+v (%v, %v)", l.UUID, c, err, byName, ok, err2)
		}
	}
	for _, c := range []struct {
		uuid   string
		pt     layout.PathType
		shards []int
	}{{"fixedUUID", layout.Fixed, []int{0, 1}}, {"hashedUUID", layout.HashedInfix, []int{0, 1, 2}}} {
		ref, ok, err := r.Index(ctx, c.uuid)
		if err != nil || !ok || ref.PathType != c.pt {
			t.Fatalf("Index(%s) = %+v, %v, %v", c.uuid, ref, ok, err)
		}
		shards, err := r.Shards(ctx, ref)
		if err != nil || !slices.Equal(shards, c.shards) {
			t.Errorf("Shards(%s) = %v, %v; want %v", c.uuid, shards, err, c.shards)
		}
		for _, sh := range shards {
			prefix := c.uuid + "/" + string(rune('0'+sh)) + "/"
			_, entries, err := r.Shard(ctx, ref, sh, prefix)
			if err != nil || len(entries) != len(files) {
				t.Fatalf("Shard(%s, %d): %d entries, %v; want %d", c.uuid, sh, len(entries), err, len(files))
			}
			for _, e := range entries {
				if !strings.HasPrefix(e.Name, prefix) {
					t.Errorf("%s: not below %s", e.Name, prefix)
				}
				if e.Inline != nil {
					continue
				}
				buf := make([]byte, e.Obj.Size)
				if err := top.ReadRange(ctx, e.Obj, 0, buf); err != nil || string(buf) != string(files[strings.TrimPrefix(e.Name, prefix)]) {
					t.Errorf("%s: read through the root at %s: %v", e.Name, e.Obj.Key, err)
				}
			}
		}
	}
	if _, ok, err := r.Index(ctx, "nope"); ok || err != nil {
		t.Errorf("Index(nope) = %v, %v; want not found", ok, err)
	}
	if _, ok, _ := r.Index(ctx, "../b"); ok {
		t.Error("Index(../b) found")
	}
}
