package view_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/snaprepo"
	"github.com/segfs/segfs/view"
)

// The catalog of a repository: every snapshot, the indices each holds
// and each shard's files and bytes, with the shard count from index-N's
// shard_generations or, for a repository written without them, probed;
// shard directories fixed or hashed; filters keep one snapshot or one
// index; a shard whose metadata is
// damaged is listed with its error, the others still read.
func TestReadCatalog(t *testing.T) {
	for _, noGens := range []bool{false, true} {
		root := t.TempDir()
		var dats []string
		put := func(key string, data []byte) error {
			if strings.HasSuffix(key, ".dat") {
				dats = append(dats, key)
			}
			p := filepath.Join(root, key)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			return os.WriteFile(p, data, 0o644)
		}
		// The repository without shard counts also has hashed shard
		// paths: the shard directories are outside the base path.
		pt := layout.Fixed
		if noGens {
			pt = layout.HashedPrefix
		}
		r := snaprepo.New(put, snaprepo.Options{Base: "base", Seed: 3, NoShardGenerations: noGens, ShardPathType: pt})
		a := map[string][]byte{"_0.cfs": make([]byte, 1000), "_0.si": []byte("si"), "segments_1": []byte("seg")}
		b := map[string][]byte{"_0.cfs": make([]byte, 300)}
		if _, err := r.Snapshot("s1", snaprepo.Shard{Index: "logs", Shard: 0, Files: a}, snaprepo.Shard{Index: "logs", Shard: 1, Files: b}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Snapshot("s2", snaprepo.Shard{Index: "logs", Shard: 0, Files: b}, snaprepo.Shard{Index: "logs", Shard: 1, Files: a},
			snaprepo.Shard{Index: "metrics", Shard: 0, Files: a}); err != nil {
			t.Fatal(err)
		}
		open := func(ctx context.Context, sub string) (fetcher.Store, error) {
			return fetcher.Open(ctx, "file://"+filepath.Join(root, sub), fetcher.Config{})
		}
		ctx := context.Background()
		cat, err := view.ReadCatalog(ctx, open, "base", view.CatalogFilter{}, 4)
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			snap, index     string
			shard, files    int
			virtual, nbytes int64
		}
		var got []row
		for _, s := range cat.Snapshots {
			if s.State != "SUCCESS" || s.UUID == "" {
				t.Errorf("snapshot %s: state %s, uuid %q", s.Name, s.State, s.UUID)
			}
			for _, ix := range s.Indices {
				for _, sh := range ix.Shards {
					if sh.Error != "" {
						t.Errorf("%s/%s/%d: %s", s.Name, ix.Name, sh.Shard, sh.Error)
					}
					got = append(got, row{s.Name, ix.Name, sh.Shard, sh.Files, int64(sh.Virtual), sh.Bytes})
				}
			}
		}
		want := []row{
			{"s1", "logs", 0, 3, 2, 1005}, {"s1", "logs", 1, 1, 0, 300},
			{"s2", "logs", 0, 1, 0, 300}, {"s2", "logs", 1, 3, 2, 1005}, {"s2", "metrics", 0, 3, 2, 1005},
		}
		if len(got) != len(want) {
			t.Fatalf("no shard_generations %v: %+v, want %+v", noGens, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("no shard_generations %v: row %d %+v, want %+v", noGens, i, got[i], want[i])
			}
		}

		cat, err = view.ReadCatalog(ctx, open, "base", view.CatalogFilter{Snapshot: "s2", Index: "metrics"}, 4)
		if err != nil || len(cat.Snapshots) != 1 || len(cat.Snapshots[0].Indices) != 1 || cat.Snapshots[0].Indices[0].Name != "metrics" {
			t.Errorf("filtered: %+v, %v; want s2's metrics alone", cat, err)
		}
		for _, f := range []view.CatalogFilter{{Snapshot: "s9"}, {Index: "nope"}} {
			if _, err := view.ReadCatalog(ctx, open, "base", f, 4); !errors.Is(err, view.ErrLayout) {
				t.Errorf("%+v: %v, want an error of the layout", f, err)
			}
		}

		// A damaged shard metadata: its row has the error, the rest read.
		p := filepath.Join(root, dats[0])
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		raw[len(raw)/2] ^= 1
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		cat, err = view.ReadCatalog(ctx, open, "base", view.CatalogFilter{Snapshot: "s1"}, 4)
		if err != nil {
			t.Fatal(err)
		}
		shards := cat.Snapshots[0].Indices[0].Shards
		if len(shards) != 2 || !strings.Contains(shards[0].Error, "checksum") || shards[1].Error != "" || shards[1].Files != 1 {
			t.Errorf("no shard_generations %v: with shard 0's metadata damaged: %+v", noGens, shards)
		}
	}
}
