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
	"github.com/segfs/segfs/tests/lucenegen"
	"github.com/segfs/segfs/tests/snaprepo"
	"github.com/segfs/segfs/view"
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
		s    view.Snapshot
		want map[string][]byte
	}{
		{view.Snapshot{Index: "logs"}, two},
		{view.Snapshot{Name: "s1", Index: "logs"}, one},
		{view.Snapshot{Name: "newest", Index: "metrics", Shard: 3}, one},
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
		s    view.Snapshot
		want string
	}{
		{view.Snapshot{Index: "nope"}, `no index "nope"`},
		{view.Snapshot{Name: "s9", Index: "logs"}, `no snapshot "s9"`},
		{view.Snapshot{Name: "s1", Index: "metrics", Shard: 3}, "snapshot s1 does not hold index"},
		{view.Snapshot{Index: "logs", Shard: 7}, "shard 7"},
	} {
		_, err := c.s.Resolve(ctx, open, "", quiet)
		if err == nil || !errors.Is(err, view.ErrLayout) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.s, err, c.want)
		}
	}
}

// A repository with a chunk size and hashed shard paths: each data file stored as
// __<uuid>.part0 ... .partN reads as the parts joined, at every offset
// and across the parts' edges; a part missing or of another length is a
// problem naming it, and a part replaced under a reader fails the read
// as changed.
func TestSnapshotResolveJoinsParts(t *testing.T) {
	root := t.TempDir()
	var keys []string
	put := func(key string, data []byte) error {
		keys = append(keys, key)
		p := filepath.Join(root, key)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o644)
	}
	files := map[string][]byte{}
	for name, size := range map[string]int64{"_0.cfs": 10_000, "_0.cfe": 1000, "_0.si": 400, "segments_1": 300, "_1.fdt": 4096} {
		b, err := lucenegen.GenerateFile(name, max(size, lucenegen.GeneratedMinSize(name)), 7)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	r := snaprepo.New(put, snaprepo.Options{Base: "b", Seed: 2, PartSize: 1024, Compress: true, ShardPathType: layout.HashedInfix})
	if _, err := r.Snapshot("s1", snaprepo.Shard{Index: "logs", Files: files}); err != nil {
		t.Fatal(err)
	}
	open := func(ctx context.Context, sub string) (fetcher.Store, error) {
		return fetcher.Open(ctx, "file://"+filepath.Join(root, sub), fetcher.Config{})
	}
	ctx := context.Background()
	sh, err := view.Snapshot{Index: "logs"}.Resolve(ctx, open, "b", quiet)
	if err != nil || sh.Err() != nil {
		t.Fatalf("%v, %v", err, sh.Err())
	}
	if !strings.HasPrefix(sh.Path, "b/") || strings.HasPrefix(sh.Path, "b/indices/") {
		t.Errorf("shard directory %s, want the hashed infix path below b/", sh.Path)
	}
	joined := 0
	for _, e := range sh.Entries {
		want := files[e.Name]
		if e.Inline != nil {
			continue
		}
		if int64(len(want)) > 1024 {
			joined++
			if _, err := os.Stat(filepath.Join(root, sh.Path, e.Obj.Key+".part1")); err != nil {
				t.Errorf("%s: not stored in parts: %v", e.Name, err)
			}
		}
		if e.Obj.Size != int64(len(want)) {
			t.Fatalf("%s: %d bytes, want %d", e.Name, e.Obj.Size, len(want))
		}
		for _, rg := range [][2]int64{{0, e.Obj.Size}, {1000, 1050}, {1023, 1025}, {1024, 1024 + 1024}, {e.Obj.Size - 3, e.Obj.Size}, {5, 6}} {
			if rg[1] > e.Obj.Size || rg[0] >= rg[1] {
				continue
			}
			got := make([]byte, rg[1]-rg[0])
			var last int
			err := fetcher.ReadRangeProgress(ctx, sh.Data, e.Obj, rg[0], got, func(n int) {
				if n < last {
					t.Errorf("%s %v: progress went back from %d to %d", e.Name, rg, last, n)
				}
				last = n
			})
			if err != nil {
				t.Fatalf("%s %v: %v", e.Name, rg, err)
			}
			if string(got) != string(want[rg[0]:rg[1]]) || last != len(got) {
				t.Errorf("%s %v: wrong bytes (progress told %d of %d)", e.Name, rg, last, len(got))
			}
		}
		if st, err := sh.Data.Stat(ctx, e.Obj.Key); err != nil || st != e.Obj {
			t.Errorf("%s: Stat %+v, %v; want %+v", e.Name, st, err, e.Obj)
		}
	}
	if joined != 2 {
		t.Fatalf("%d files of more than one part, want 2 (_0.cfs, _1.fdt; _0.cfe fits one)", joined)
	}

	// A part replaced under the mount: the read fails as changed.
	var cfs fetcher.Object
	for _, e := range sh.Entries {
		if e.Name == "_0.cfs" {
			cfs = e.Obj
		}
	}
	part1 := filepath.Join(root, sh.Path, cfs.Key+".part1")
	b, err := os.ReadFile(part1)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if err := os.WriteFile(part1+".new", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(part1+".new", part1); err != nil {
		t.Fatal(err)
	}
	if err := sh.Data.ReadRange(ctx, cfs, 1000, make([]byte, 100)); !errors.Is(err, fetcher.ErrChanged) {
		t.Errorf("read across a replaced part: %v, want ErrChanged", err)
	}
	if st, err := sh.Data.Stat(ctx, cfs.Key); err != nil || st.ETag == cfs.ETag {
		t.Errorf("Stat after a part changed: %+v, %v; want a new ETag", st, err)
	}

	// A part gone, and a part of another length: each a problem naming
	// the part and the file.
	if err := os.Remove(filepath.Join(root, sh.Path, cfs.Key+".part3")); err != nil {
		t.Fatal(err)
	}
	var fdt string
	for _, e := range sh.Entries {
		if e.Name == "_1.fdt" {
			fdt = filepath.Join(root, sh.Path, e.Obj.Key+".part0")
		}
	}
	if err := os.Truncate(fdt, 1000); err != nil {
		t.Fatal(err)
	}
	sh, err = view.Snapshot{Index: "logs"}.Resolve(ctx, open, "b", quiet)
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, p := range sh.Problems {
		details = append(details, p.Detail)
	}
	got := strings.Join(details, "\n")
	if len(sh.Problems) != 2 || !strings.Contains(got, "part 3 of _0.cfs, which does not exist") ||
		!strings.Contains(got, "part 0 of _1.fdt is 1024 bytes") || sh.Err() == nil {
		t.Errorf("problems %q, want part 3 of _0.cfs missing and part 0 of _1.fdt short", details)
	}
}
