package view

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/tests/osremote"
	"github.com/segfs/segfs/tests/snaprepo"
)

var quiet = slog.New(slog.DiscardHandler)

// names returns the entries' names, sorted.
func names(es []entry.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name
	}
	slices.Sort(out)
	return out
}

// prefixed returns the sorted keys of files, each below dir.
func prefixed(dir string, files map[string][]byte) []string {
	var out []string
	for n := range files {
		out = append(out, dir+n)
	}
	slices.Sort(out)
	return out
}

// shardFiles is a small shard of segments at generation gen.
func shardFiles(t *testing.T, gen int64, segments ...string) map[string][]byte {
	t.Helper()
	files, err := osremote.ShardFiles(segments, gen, 4096, 1)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// remote writes refreshes of one shard of a remote-store repository
// in dir.
func remote(dir, uuid string, shard int) *osremote.Remote {
	return osremote.New(osremote.DirPut(dir), osremote.Options{IndexUUID: uuid, Shard: shard, Version: 2, Seed: uint64(shard) + 7})
}

func upload(t *testing.T, r *osremote.Remote, files map[string][]byte, gen int64) *osremote.Refresh {
	t.Helper()
	ref, err := r.Upload(files, 1, gen)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func open(t *testing.T, spec Spec, o Options) View {
	t.Helper()
	if o.Log == nil {
		o.Log = quiet
	}
	if o.Parallel == 0 {
		o.Parallel = 4
	}
	v, err := Open(context.Background(), spec, o)
	if err != nil {
		t.Fatalf("Open(%+v): %v", spec, err)
	}
	return v
}

func repoSpec(dir string) Spec {
	return Spec{Source: "file://" + dir, Layout: "opensearch", Shard: -1, Metadata: "newest", Snapshot: "newest"}
}

// A remote-store repository's tree: its indices, their shards, a
// shard's files below its directory; an index made after the listing
// found by its name; absent names and a damaged shard refused with an
// error, the damaged shard costing none of --max-shards.
func TestRepositoryTree(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := shardFiles(t, 2, "_0")
	upload(t, remote(dir, "idxA", 0), a, 2)
	upload(t, remote(dir, "idxA", 1), a, 2)
	v := open(t, repoSpec(dir), Options{MaxShards: 2})
	if v.Depth() != 2 || !v.Follows().Refresh || !v.Follows().Commits {
		t.Errorf("Depth %d, Follows %+v; want 2 and commits followed", v.Depth(), v.Follows())
	}
	if got, err := v.Dirs(ctx, ""); err != nil || !slices.Equal(got, []string{"idxA"}) {
		t.Fatalf(`Dirs("") = %q, %v`, got, err)
	}
	if got, err := v.Dirs(ctx, "idxA/"); err != nil || !slices.Equal(got, []string{"0", "1"}) {
		t.Fatalf(`Dirs("idxA/") = %q, %v`, got, err)
	}
	files, err := v.Files(ctx, "idxA/0/")
	if err != nil || !slices.Equal(names(files), prefixed("idxA/0/", a)) {
		t.Fatalf("Files(idxA/0/) = %q, %v; want %q", names(files), err, prefixed("idxA/0/", a))
	}

	// An index made after the root was listed: found by its name, not
	// listed until the root is listed again.
	b := shardFiles(t, 3, "_0", "_1")
	upload(t, remote(dir, "idxB", 0), b, 3)
	if v.Has("", "idxB") {
		t.Errorf("Has(idxB) before a listing found it")
	}
	if got, err := v.Dirs(ctx, "idxB/"); err != nil || !slices.Equal(got, []string{"0"}) {
		t.Fatalf(`Dirs("idxB/") = %q, %v`, got, err)
	}

	// Absent names.
	if _, err := v.Dirs(ctx, "nothere/"); !errors.Is(err, ErrLayout) {
		t.Errorf("Dirs(nothere/) = %v; want a layout error", err)
	}
	for _, d := range []string{"idxA/7/", "idxA/x/", "idxA/-1/", "idxA/-0/", "idxA/01/", "idxA/0/extra/"} {
		if _, err := v.Files(ctx, d); err == nil {
			t.Errorf("Files(%s) resolved", d)
		}
	}

	// A shard whose store lost a blob its metadata names fails, and
	// takes nothing of the budget: two more shards still resolve.
	blobs := upload(t, remote(dir, "idxC", 0), a, 2).Blobs
	if err := os.Remove(filepath.Join(dir, blobs["_0.fdt"])); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Files(ctx, "idxC/0/"); err == nil || !strings.Contains(err.Error(), "_0.fdt") {
		t.Errorf("Files of a shard missing _0.fdt = %v; want an error naming it", err)
	}
	if _, err := v.Files(ctx, "idxB/0/"); err != nil {
		t.Errorf("Files(idxB/0/) after the failed one: %v", err)
	}
	// idxA/0 and idxB/0 are shown: a third is one past --max-shards.
	if _, err := v.Files(ctx, "idxA/1/"); err == nil || !strings.Contains(err.Error(), "--max-shards 2") {
		t.Errorf("a third shard with --max-shards 2: %v; want refused", err)
	}
}

// One index of a repository (--index-uuid without --shard): its shards
// at the root; an index that is not there fails Open.
func TestRepositoryOneIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := shardFiles(t, 2, "_0")
	upload(t, remote(dir, "idxA", 0), a, 2)
	spec := repoSpec(dir)
	spec.IndexUUID = "idxA"
	v := open(t, spec, Options{})
	if got, err := v.Dirs(ctx, ""); v.Depth() != 1 || err != nil || !slices.Equal(got, []string{"0"}) {
		t.Fatalf(`Depth %d, Dirs("") = %q, %v`, v.Depth(), got, err)
	}
	if files, err := v.Files(ctx, "0/"); err != nil || !slices.Equal(names(files), prefixed("0/", a)) {
		t.Fatalf("Files(0/) = %q, %v", names(files), err)
	}
	spec.IndexUUID = "other"
	if _, err := Open(ctx, spec, Options{Log: quiet}); !errors.Is(err, ErrLayout) {
		t.Errorf("Open of an absent index: %v; want a layout error", err)
	}
}

// A refresh of a repository's tree: a shard shown with a newer commit
// gets its files (one added, one changed, one dropped), the others keep
// theirs; once committed, the next refresh finds nothing new. A shard
// whose newer metadata is damaged keeps its view.
func TestRepositoryRefresh(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r0, r1 := remote(dir, "idxA", 0), remote(dir, "idxA", 1)
	upload(t, r0, shardFiles(t, 2, "_0", "_1"), 2)
	upload(t, r1, shardFiles(t, 2, "_0"), 2)
	v := open(t, repoSpec(dir), Options{})
	for _, d := range []string{"idxA/0/", "idxA/1/"} {
		if _, err := v.Files(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	u, err := v.Next(ctx, nil)
	if err != nil || len(u.Dirs) != 0 {
		t.Fatalf("Next with nothing new = %+v, %v", u, err)
	}
	u.Commit(nil)

	// Shard 0's next commit: _1 dropped, _2 added, segments_2 replaced
	// by segments_3.
	next := shardFiles(t, 3, "_0", "_2")
	upload(t, r0, next, 3)
	u, err = v.Next(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(u.Dirs)); !slices.Equal(got, []string{"idxA/0/"}) {
		t.Fatalf("Next: updates of %q; want idxA/0/ alone", got)
	}
	if got, want := names(u.Dirs["idxA/0/"]), prefixed("idxA/0/", next); !slices.Equal(got, want) {
		t.Errorf("idxA/0/'s new files %q; want %q", got, want)
	}
	if u.Keys != len(next)+len(shardFiles(t, 2, "_0")) {
		t.Errorf("Keys %d; want the files of both shards' commits", u.Keys)
	}
	// Not applied (a shard the tree had not shown): asked again.
	u.Commit(map[string]bool{})
	if u, err := v.Next(ctx, nil); err != nil || len(u.Dirs) != 1 {
		t.Fatalf("Next after an update not applied = %+v, %v; want it again", u, err)
	} else {
		u.Commit(map[string]bool{"idxA/0/": true})
	}
	if u, err := v.Next(ctx, nil); err != nil || len(u.Dirs) != 0 {
		t.Fatalf("Next after the update was applied = %+v, %v; want nothing new", u, err)
	}

	// Shard 1's next commit lacks a blob: it keeps its view, shard 0's
	// newer commit still shows.
	blobs := upload(t, r1, shardFiles(t, 3, "_0", "_5"), 3).Blobs
	if err := os.Remove(filepath.Join(dir, blobs["_5.fdt"])); err != nil {
		t.Fatal(err)
	}
	upload(t, r0, shardFiles(t, 4, "_0", "_2", "_3"), 4)
	u, err = v.Next(ctx, nil)
	if err != nil || !slices.Equal(slices.Sorted(maps.Keys(u.Dirs)), []string{"idxA/0/"}) {
		t.Fatalf("Next with shard 1 damaged = %+v, %v; want shard 0's update alone", u, err)
	}
}

// A refresh racing the first lookup of a shard: both complete, the
// shard resolved during the refresh is followed from the next one (run
// with -race for the tree's state).
func TestRepositoryRefreshRacesLookup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var rs []*osremote.Remote
	for sh := range 8 {
		rs = append(rs, remote(dir, "idxA", sh))
		upload(t, rs[sh], shardFiles(t, 2, "_0"), 2)
	}
	v := open(t, repoSpec(dir), Options{})
	if _, err := v.Files(ctx, "idxA/0/"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for sh := 1; sh < 8; sh++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := v.Files(ctx, "idxA/"+strconv.Itoa(sh)+"/")
			errs <- err
		}()
		go func() {
			defer wg.Done()
			u, err := v.Next(ctx, nil)
			if err == nil {
				u.Commit(map[string]bool{})
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// Every shard is followed now: a new commit of each shows.
	for _, r := range rs {
		upload(t, r, shardFiles(t, 3, "_0", "_1"), 3)
	}
	u, err := v.Next(ctx, nil)
	if err != nil || len(u.Dirs) != 8 {
		t.Fatalf("Next after the race: %d updates, %v; want all 8 shards", len(u.Dirs), err)
	}
}

// All resolves every shard of every index, each file named below its
// shard's directory, with the checksums its metadata records; a
// damaged shard fails it, or with Tolerate is a problem.
func TestRepositoryAll(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := shardFiles(t, 2, "_0")
	upload(t, remote(dir, "idxA", 0), a, 2)
	upload(t, remote(dir, "idxB", 0), a, 2)
	r, err := Resolve(ctx, repoSpec(dir), Options{Log: quiet, Parallel: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := append(prefixed("idxA/0/", a), prefixed("idxB/0/", a)...)
	slices.Sort(want)
	if got := names(r.Entries); !slices.Equal(got, want) || r.Keys != len(want) {
		t.Fatalf("All: %q (%d keys); want %q", got, r.Keys, want)
	}
	for _, n := range want {
		if _, ok := r.Sums[n]; !ok {
			t.Errorf("no checksum for %s", n)
		}
	}
	blobs := upload(t, remote(dir, "idxC", 0), a, 2).Blobs
	if err := os.Remove(filepath.Join(dir, blobs["_0.fdt"])); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(ctx, repoSpec(dir), Options{Log: quiet, Parallel: 4}); err == nil || !strings.Contains(err.Error(), "idxC") {
		t.Errorf("All with a damaged shard: %v; want an error naming it", err)
	}
	r, err = Resolve(ctx, repoSpec(dir), Options{Log: quiet, Parallel: 4, Tolerate: true})
	if err != nil || !slices.ContainsFunc(r.Problems, func(p Problem) bool { return p.File.Name == "idxC/0/_0.fdt" }) {
		t.Errorf("All with Tolerate: %v, problems %+v; want idxC/0/_0.fdt among them", err, r.Problems)
	}
}

// snapRepo writes a snapshot repository in dir.
func snapRepo(dir string) *snaprepo.Repo {
	return snaprepo.New(snaprepo.Put(osremote.DirPut(dir)), snaprepo.Options{Seed: 3})
}

func snapshotSpec(dir string) Spec {
	return Spec{Source: "file://" + dir, Layout: "snapshot", Shard: -1, Metadata: "newest", Snapshot: "newest"}
}

// A snapshot repository's tree: snapshots, their indices, an index's
// shards, a shard's files; a snapshot taken after Open shows at the
// root's next listing; absent names, a damaged shard and the shard
// budget refused; no refresh, and no All.
func TestSnapshotRepositoryTree(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	repo := snapRepo(dir)
	a, b := shardFiles(t, 2, "_0"), shardFiles(t, 3, "_0", "_1")
	if _, err := repo.Snapshot("s1", snaprepo.Shard{Index: "logs", Shard: 0, Files: a}, snaprepo.Shard{Index: "logs", Shard: 1, Files: b}); err != nil {
		t.Fatal(err)
	}
	v := open(t, snapshotSpec(dir), Options{MaxShards: 2})
	if v.Depth() != 3 || v.Follows() != (Follow{}) {
		t.Errorf("Depth %d, Follows %+v; want 3 and fixed", v.Depth(), v.Follows())
	}
	for d, want := range map[string][]string{"": {"s1"}, "s1/": {"logs"}, "s1/logs/": {"0", "1"}} {
		if got, err := v.Dirs(ctx, d); err != nil || !slices.Equal(got, want) {
			t.Errorf("Dirs(%q) = %q, %v; want %q", d, got, err, want)
		}
	}
	files, err := v.Files(ctx, "s1/logs/1/")
	if err != nil || !slices.Equal(names(files), prefixed("s1/logs/1/", b)) {
		t.Fatalf("Files(s1/logs/1/) = %q, %v; want %q", names(files), err, prefixed("s1/logs/1/", b))
	}

	// A snapshot taken since: the root's listing reads the newer index-N.
	if _, err := repo.Snapshot("s2", snaprepo.Shard{Index: "metrics", Shard: 0, Files: a}); err != nil {
		t.Fatal(err)
	}
	if got, err := v.Dirs(ctx, ""); err != nil || !slices.Equal(got, []string{"s1", "s2"}) {
		t.Errorf(`Dirs("") after s2 = %q, %v`, got, err)
	}
	for _, d := range []string{"nope/", "s1/metrics/"} {
		if _, err := v.Dirs(ctx, d); !errors.Is(err, ErrLayout) {
			t.Errorf("Dirs(%s) = %v; want a layout error", d, err)
		}
	}
	if _, err := v.Files(ctx, "s1/metrics/0/"); err == nil {
		t.Errorf("Files of an index s1 does not hold resolved")
	}
	if _, err := v.Files(ctx, "s2/metrics/0/"); err != nil {
		t.Errorf("Files(s2/metrics/0/): %v", err)
	}
	if _, err := v.Files(ctx, "s1/logs/0/"); err == nil || !strings.Contains(err.Error(), "--max-shards 2") {
		t.Errorf("a third shard with --max-shards 2: %v; want refused", err)
	}
	if _, err := v.Next(ctx, nil); err == nil {
		t.Errorf("Next of a snapshot repository succeeded")
	}
	if _, err := v.All(ctx); !errors.Is(err, ErrOneShard) {
		t.Errorf("All = %v; want ErrOneShard", err)
	}
	if _, err := Resolve(ctx, snapshotSpec(dir), Options{Log: quiet}); !errors.Is(err, ErrOneShard) {
		t.Errorf("Resolve = %v; want ErrOneShard", err)
	}
}

// A snapshot repository's shard whose blob is gone fails, and takes
// nothing of the budget.
func TestSnapshotRepositoryDamagedShard(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := shardFiles(t, 2, "_0")
	if _, err := snapRepo(dir).Snapshot("s1", snaprepo.Shard{Index: "logs", Shard: 0, Files: a}, snaprepo.Shard{Index: "logs", Shard: 1, Files: a}); err != nil {
		t.Fatal(err)
	}
	v := open(t, snapshotSpec(dir), Options{MaxShards: 1})
	// Remove the data blobs of shard 1 (its __ blobs; the small files
	// are in its metadata).
	shard1, err := filepath.Glob(filepath.Join(dir, "indices", "*", "1", "__*"))
	if err != nil || len(shard1) == 0 {
		t.Fatalf("shard 1's blobs: %q, %v", shard1, err)
	}
	for _, p := range shard1 {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Files(ctx, "s1/logs/1/"); err == nil {
		t.Errorf("a shard without its blobs resolved")
	}
	if _, err := v.Files(ctx, "s1/logs/0/"); err != nil {
		t.Errorf("the one shard --max-shards 1 allows, after a failed one: %v", err)
	}
}

// The flat views: plain objects listed and listed again (an object
// added, one changed, one removed); one OpenSearch shard at its newest
// commit followed, at a named one fixed; one snapshot shard fixed.
func TestFlatViews(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	put := osremote.DirPut(dir)
	for n, s := range map[string]string{"a": "1", "b": "22", "d/c": "333"} {
		if err := put(n, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	v := open(t, Spec{Source: "file://" + dir, Layout: "plain", Shard: -1, Metadata: "newest", Snapshot: "newest"}, Options{})
	files, err := v.Files(ctx, "")
	if err != nil || v.Depth() != 0 || v.Keys() != 3 || !slices.Equal(names(files), []string{"a", "b", "d/c"}) {
		t.Fatalf("plain: Depth %d, Keys %d, Files = %q, %v", v.Depth(), v.Keys(), names(files), err)
	}
	if f := v.Follows(); !f.Refresh || f.Commits {
		t.Errorf("plain follows %+v; want listings, not commits", f)
	}
	put("e", []byte("4444"))
	put("b", []byte("changed"))
	os.Remove(filepath.Join(dir, "a"))
	u, err := v.Next(ctx, files)
	if err != nil || u.Dirs != nil || !slices.Equal(names(u.Entries), []string{"b", "d/c", "e"}) {
		t.Fatalf("plain Next = %+v, %v", u, err)
	}
	if i := slices.IndexFunc(u.Entries, func(e entry.Entry) bool { return e.Name == "b" }); u.Entries[i].Size() != int64(len("changed")) {
		t.Errorf("b after the change: %d bytes", u.Entries[i].Size())
	}

	osDir := t.TempDir()
	r := remote(osDir, "idxA", 0)
	first := shardFiles(t, 2, "_0")
	ref := upload(t, r, first, 2)
	spec := Spec{Source: "file://" + osDir, Layout: "opensearch", IndexUUID: "idxA", Shard: 0, Metadata: "newest", Snapshot: "newest"}
	v = open(t, spec, Options{})
	if f := v.Follows(); !f.Refresh || !f.Commits || spec.Fixed() != nil {
		t.Errorf("a shard at its newest commit follows %+v", f)
	}
	files, _ = v.Files(ctx, "")
	if !slices.Equal(names(files), prefixed("", first)) {
		t.Errorf("shard files %q", names(files))
	}
	next := shardFiles(t, 3, "_0", "_1")
	upload(t, r, next, 3)
	if u, err := v.Next(ctx, files); err != nil || !slices.Equal(names(u.Entries), prefixed("", next)) {
		t.Errorf("shard Next = %q, %v; want %q", names(u.Entries), err, prefixed("", next))
	}
	spec.Metadata = ref.MetadataName
	v = open(t, spec, Options{})
	files, _ = v.Files(ctx, "")
	if v.Follows().Refresh || spec.Fixed() == nil || !slices.Equal(names(files), prefixed("", first)) {
		t.Errorf("a shard at a named commit: follows %+v, Fixed %v, files %q", v.Follows(), spec.Fixed(), names(files))
	}

	snapDir := t.TempDir()
	if _, err := snapRepo(snapDir).Snapshot("s1", snaprepo.Shard{Index: "logs", Shard: 0, Files: first}); err != nil {
		t.Fatal(err)
	}
	v = open(t, Spec{Source: "file://" + snapDir, Layout: "snapshot", Index: "logs", Shard: 0, Metadata: "newest", Snapshot: "newest"}, Options{})
	files, _ = v.Files(ctx, "")
	if v.Follows() != (Follow{}) || !slices.Equal(names(files), prefixed("", first)) {
		t.Errorf("a snapshot shard: follows %+v, files %q", v.Follows(), names(files))
	}
	if _, err := v.Next(ctx, files); err == nil {
		t.Errorf("Next of a snapshot shard succeeded")
	}
}
