package layout_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/lucenegen"
	"github.com/segfs/segfs/tests/snaprepo"
)

// A snapshot repository on a local file system (file://): the newest
// snapshot holding the index by default, a named one, virtual files
// inline, data blobs as objects; the repository's own mistakes refused.
func TestSnapshotResolve(t *testing.T) {
	root := t.TempDir()
	put := func(key string, data []byte) error {
		p := filepath.Join(root, key)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o644)
	}
	file := func(name string, size int64) []byte {
		b, err := lucenegen.GenerateFile(name, max(size, lucenegen.GeneratedMinSize(name)), 5)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	one := map[string][]byte{"_0.si": file("_0.si", 400), "_0.cfs": file("_0.cfs", 50_000), "segments_1": file("segments_1", 300)}
	two := map[string][]byte{"_0.si": one["_0.si"], "_0.cfs": one["_0.cfs"], "_1.si": file("_1.si", 400), "_1.cfs": file("_1.cfs", 9000), "segments_2": file("segments_2", 300)}
	r := snaprepo.New(put, snaprepo.Options{Seed: 1})
	if _, err := r.Snapshot("s1", snaprepo.Shard{Index: "logs", Files: one}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Snapshot("s2", snaprepo.Shard{Index: "logs", Files: two}, snaprepo.Shard{Index: "metrics", Shard: 3, Files: one}); err != nil {
		t.Fatal(err)
	}
	open := func(ctx context.Context, sub string) (fetcher.Store, error) {
		return fetcher.Open(ctx, "file://"+filepath.Join(root, sub), fetcher.Config{})
	}
	ctx := context.Background()
	for _, c := range []struct {
		s    layout.Snapshot
		want map[string][]byte
	}{
		{layout.Snapshot{Index: "logs"}, two},
		{layout.Snapshot{Name: "s1", Index: "logs"}, one},
		{layout.Snapshot{Name: "newest", Index: "metrics", Shard: 3}, one},
	} {
		sh, err := c.s.Resolve(ctx, open, "", quiet)
		if err != nil || sh.Err() != nil {
			t.Fatalf("%+v: %v, %v", c.s, err, sh.Err())
		}
		if len(sh.Entries) != len(c.want) {
			t.Errorf("%+v: %d entries, want %d", c.s, len(sh.Entries), len(c.want))
		}
		for _, e := range sh.Entries {
			data, ok := c.want[e.Name]
			switch {
			case !ok:
				t.Errorf("%+v: %s is not in the snapshot", c.s, e.Name)
			case strings.HasSuffix(e.Name, ".si") || strings.HasPrefix(e.Name, "segments_"):
				if string(e.Inline) != string(data) {
					t.Errorf("%+v: virtual %s does not hold its bytes", c.s, e.Name)
				}
			case e.Inline != nil || e.Obj.Size != int64(len(data)) || !strings.HasPrefix(e.Obj.Key, "__"):
				t.Errorf("%+v: %s is %+v, want its data blob of %d bytes", c.s, e.Name, e.Obj, len(data))
			}
		}
	}
	for _, c := range []struct {
		s    layout.Snapshot
		want string
	}{
		{layout.Snapshot{Index: "nope"}, `no index "nope"`},
		{layout.Snapshot{Name: "s9", Index: "logs"}, `no snapshot "s9"`},
		{layout.Snapshot{Name: "s1", Index: "metrics", Shard: 3}, "snapshot s1 does not hold index"},
		{layout.Snapshot{Index: "logs", Shard: 7}, "shard 7"},
	} {
		_, err := c.s.Resolve(ctx, open, "", quiet)
		if err == nil || !errors.Is(err, layout.ErrLayout) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.s, err, c.want)
		}
	}
}
