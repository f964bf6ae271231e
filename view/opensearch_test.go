package view_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// dirRepo writes a two-refresh shard into a temporary directory and
// returns its root, the opener of its paths, and the refreshes.
func dirRepo(t *testing.T, o osremote.Options) (string, view.Opener, [2]*osremote.Refresh) {
	t.Helper()
	root := t.TempDir()
	put := osremote.DirPut(root)
	r := osremote.New(put, o)
	var refs [2]*osremote.Refresh
	for i, segs := range [][]string{{"_0"}, {"_0", "_1"}} {
		gen := int64(3 + i)
		files, err := osremote.ShardFiles(segs, gen, 50<<10, o.Seed)
		if err != nil {
			t.Fatal(err)
		}
		if refs[i], err = r.Upload(files, 1, gen); err != nil {
			t.Fatal(err)
		}
	}
	open := func(ctx context.Context, sub string) (fetcher.Store, error) {
		return fetcher.Open(ctx, "file://"+filepath.Join(root, sub), fetcher.Config{})
	}
	return root, open, refs
}

var quiet = slog.New(slog.DiscardHandler)

func TestResolvePicksTheNewestAndANamedOne(t *testing.T) {
	o := osremote.Options{Base: "b", IndexUUID: "idx", Shard: 1, PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1, Version: 2, Seed: 3}
	_, open, refs := dirRepo(t, o)
	q := view.OpenSearch{IndexUUID: "idx", Shard: 1, PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1}
	s, err := q.Resolve(context.Background(), open, "b", quiet)
	if err != nil || s.Err() != nil {
		t.Fatalf("resolve: %v, %v", err, s.Err())
	}
	if s.MetadataFile != refs[1].MetadataName || len(s.Entries) != len(refs[1].Metadata.Files) {
		t.Fatalf("resolved %s with %d entries; want %s with %d", s.MetadataFile, len(s.Entries), refs[1].MetadataName, len(refs[1].Metadata.Files))
	}
	q.Metadata = refs[0].MetadataName
	s, err = q.Resolve(context.Background(), open, "b", quiet)
	if err != nil || s.MetadataFile != refs[0].MetadataName || len(s.Entries) != len(refs[0].Metadata.Files) {
		t.Fatalf("named: %v, %s, %d entries", err, s.MetadataFile, len(s.Entries))
	}
	q.Metadata = "metadata__nope"
	if _, err := q.Resolve(context.Background(), open, "b", quiet); !errors.Is(err, view.ErrLayout) {
		t.Fatalf("a metadata file that is not there: %v, want ErrLayout", err)
	}
}

// The index's remote-index-path file supplies the path type; a flag
// that contradicts it is an error.
func TestResolveTakesPathsFromTheIndexFile(t *testing.T) {
	o := osremote.Options{IndexUUID: "idx", Shard: 0, PathType: layout.HashedInfix, HashAlgorithm: layout.FNV1aBase64, Version: 3, IndexPathFile: true, Seed: 4}
	_, open, _ := dirRepo(t, o)
	s, err := view.OpenSearch{IndexUUID: "idx", Shard: 0}.Resolve(context.Background(), open, "", quiet)
	if err != nil || s.Err() != nil {
		t.Fatalf("from the index file: %v, %v", err, s.Err())
	}
	_, err = view.OpenSearch{IndexUUID: "idx", Shard: 0, PathType: layout.Fixed, PathTypeSet: true}.Resolve(context.Background(), open, "", quiet)
	if err == nil || !strings.Contains(err.Error(), "contradicts") {
		t.Fatalf("a contradicting --path-type: %v", err)
	}
}

// A blob that is missing or of another length is a problem of the shard,
// named; Err refuses the shard.
func TestResolveFindsMissingAndShortBlobs(t *testing.T) {
	o := osremote.Options{IndexUUID: "idx", Shard: 0, PathType: layout.Fixed, Version: 1, Body: "2.10", Seed: 5}
	root, open, refs := dirRepo(t, o)
	if err := os.Remove(filepath.Join(root, refs[1].Blobs["_1.tim"])); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(root, refs[1].Blobs["_0.doc"]), 10); err != nil {
		t.Fatal(err)
	}
	s, err := view.OpenSearch{IndexUUID: "idx", Shard: 0}.Resolve(context.Background(), open, "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Problems) != 2 || !errors.Is(s.Err(), view.ErrLayout) {
		t.Fatalf("problems %+v, err %v; want the missing _1.tim and the short _0.doc", s.Problems, s.Err())
	}
	for _, p := range s.Problems {
		switch p.File.Name {
		case "_1.tim":
			if !p.Missing {
				t.Errorf("_1.tim: %+v, want missing", p)
			}
		case "_0.doc":
			if p.Missing || p.Size != 10 {
				t.Errorf("_0.doc: %+v, want 10 bytes", p)
			}
		default:
			t.Errorf("unexpected problem %+v", p)
		}
	}
}

// lyingStore lists every object of its store at size.
type lyingStore struct {
	fetcher.Store
	size int64
}

func (s lyingStore) List(ctx context.Context) ([]fetcher.Object, error) {
	objs, err := s.Store.List(ctx)
	for i := range objs {
		objs[i].Size = s.size
	}
	return objs, err
}

// A remote-index-path or metadata file whose listed size is below zero
// or above MaxMetadataSize is refused with an error naming the file and
// the size, before anything is allocated or read: neither panics (make
// of a negative length did, for the remote-index-path file) nor is
// skipped.
func TestResolveRefusesImpossibleListedSizes(t *testing.T) {
	o := osremote.Options{IndexUUID: "idx", Shard: 0, PathType: layout.HashedInfix, HashAlgorithm: layout.FNV1aBase64, Version: 3, IndexPathFile: true, Seed: 6}
	_, open, refs := dirRepo(t, o)
	for _, c := range []struct {
		name string
		dir  string // the directory whose listing lies
		file string // what the error must name
		size int64
	}{
		{"index file below zero", layout.IndexPathDir, "remote_path_idx", -1},
		{"index file far below zero", layout.IndexPathDir, "remote_path_idx", -1 << 62},
		{"index file too large", layout.IndexPathDir, "remote_path_idx", layout.MaxMetadataSize + 1},
		{"metadata file below zero", "segments/metadata", refs[1].MetadataName, -5},
		{"metadata file too large", "segments/metadata", refs[1].MetadataName, 1 << 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			lying := func(ctx context.Context, sub string) (fetcher.Store, error) {
				st, err := open(ctx, sub)
				if err != nil || !strings.HasSuffix(sub, c.dir) {
					return st, err
				}
				return lyingStore{st, c.size}, nil
			}
			// The path flags are set, so that a skipped index file
			// would leave a shard to resolve.
			q := view.OpenSearch{IndexUUID: "idx", Shard: 0, PathType: layout.HashedInfix, HashAlgorithm: layout.FNV1aBase64}
			_, err := q.Resolve(context.Background(), lying, "", quiet)
			if !errors.Is(err, view.ErrLayout) {
				t.Fatalf("resolve: %v, want ErrLayout", err)
			}
			if !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), fmt.Sprintf("listed with %d bytes", c.size)) {
				t.Errorf("resolve: %v; want it to name %s and its listed size %d", err, c.file, c.size)
			}
		})
	}
}

// Newer finds nothing new while the newest metadata file is the one
// resolved; a newer one is resolved with one HEAD per blob the shard did
// not show (hashed paths included: the metadata prefix is the shard's
// own); a newer one naming a blob that is gone is a Problem.
func TestNewerMetadata(t *testing.T) {
	o := osremote.Options{Base: "b", IndexUUID: "idx", Shard: 1, PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1, Version: 2, Seed: 3}
	root, open, _ := dirRepo(t, o)
	q := view.OpenSearch{IndexUUID: "idx", Shard: 1, PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1}
	ctx := context.Background()
	cur, err := q.Resolve(ctx, open, "b", quiet)
	if err != nil || cur.Err() != nil {
		t.Fatalf("resolve: %v, %v", err, cur.Err())
	}
	md, err := open(ctx, cur.MetadataPath)
	if err != nil {
		t.Fatal(err)
	}
	if next, err := view.Newer(ctx, md, cur, 4); err != nil || next != nil {
		t.Fatalf("Newer with no newer metadata file: %v, %v; want nothing", next, err)
	}

	r := osremote.New(osremote.DirPut(root), o)
	files, err := osremote.ShardFiles([]string{"_0", "_1", "_2"}, 5, 50<<10, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Upload(files, 1, 5); err != nil {
		t.Fatal(err)
	}
	heads := cur.Data.Counters().Stats.Load()
	next, err := view.Newer(ctx, md, cur, 4)
	if err != nil || next == nil || next.Err() != nil {
		t.Fatalf("Newer after a new refresh: %v, %v", next, err)
	}
	if next.Metadata.Generation != 5 || len(next.Entries) != len(files) {
		t.Errorf("the newer shard: generation %d with %d entries; want 5 with %d", next.Metadata.Generation, len(next.Entries), len(files))
	}
	// One HEAD per blob of the metadata (segments_N's too) that cur did
	// not show; none for those it did.
	shown := map[string]bool{}
	for _, e := range cur.Entries {
		shown[e.Obj.Key] = true
	}
	var want int64
	for _, f := range next.Metadata.Files {
		if !shown[f.Uploaded] {
			want++
		}
	}
	if want == int64(len(next.Metadata.Files)) {
		t.Fatalf("the newer refresh shares no blob with the first: the test checks nothing known")
	}
	if got := cur.Data.Counters().Stats.Load() - heads; got != want {
		t.Errorf("Newer asked for %d blobs, want %d (one per blob the view did not show)", got, want)
	}
	if again, err := view.Newer(ctx, md, next, 4); err != nil || again != nil {
		t.Errorf("Newer of the newer shard: %v, %v; want nothing", again, err)
	}

	files, err = osremote.ShardFiles([]string{"_0", "_1", "_2", "_3"}, 6, 50<<10, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Upload(files, 1, 6)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for n, blob := range ref.Blobs {
		if strings.HasPrefix(n, "_3.") {
			victim = blob
			break
		}
	}
	if err := os.Remove(filepath.Join(root, victim)); err != nil {
		t.Fatal(err)
	}
	bad, err := view.Newer(ctx, md, next, 4)
	if err != nil || bad == nil || bad.Err() == nil || !errors.Is(bad.Err(), view.ErrLayout) {
		t.Fatalf("Newer with a blob gone: %v, err %v; want a shard whose Err names it", bad, err)
	}
	if !strings.Contains(bad.Err().Error(), path.Base(victim)) {
		t.Errorf("the problem %q does not name the blob %s", bad.Err(), path.Base(victim))
	}
}
