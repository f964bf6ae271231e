package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// manyKeys is the number of objects in one prefix.
const manyKeys = 5000

// listingObjects returns the objects of the listing test: nested
// prefixes, a large flat prefix, empty files, and names with spaces and
// non-ASCII characters.
func listingObjects() map[string][]byte {
	objs := map[string][]byte{
		"a/b/c/file":           []byte("deep\n"),
		"a/b/other.txt":        []byte("other\n"),
		"a/top.bin":            make([]byte, 100_000),
		"empty.bin":            {},
		"emptyfiles/zero":      {},
		"emptyfiles/also zero": {},
		"dir with spaces/file name with spaces.txt": []byte("spaces\n"),
		"ünïcödé/日本語 ファイル.txt":                      []byte("unicode\n"),
		"emoji 🎉.dat":                               []byte("party\n"),
		"_0.si":                                     []byte("top-level file\n"),
	}
	for i := range manyKeys {
		objs[fmt.Sprintf("many/k%05d", i)] = fmt.Appendf(nil, "object %d\n", i)
	}
	return objs
}

// entry is what a directory listing should show for one name.
type entry struct {
	dir  bool
	size int64
}

// expectedTree maps each directory ("" for the root) to its entries.
func expectedTree(objs map[string][]byte) map[string]map[string]entry {
	tree := map[string]map[string]entry{"": {}}
	for key, body := range objs {
		dir, name := path.Split(key)
		dir = strings.TrimSuffix(dir, "/")
		if tree[dir] == nil {
			tree[dir] = map[string]entry{}
		}
		tree[dir][name] = entry{size: int64(len(body))}
		for dir != "" {
			parent, base := path.Split(dir)
			parent = strings.TrimSuffix(parent, "/")
			if tree[parent] == nil {
				tree[parent] = map[string]entry{}
			}
			tree[parent][base] = entry{dir: true}
			dir = parent
		}
	}
	return tree
}

func TestListing(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := listingObjects()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	uploadStart := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for key, body := range objs {
		g.Go(func() error {
			_, err := srv.PutBytes(gctx, bucket, key, body)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	uploadEnd := time.Now()
	t.Logf("uploaded %d objects in %v", len(objs), uploadEnd.Sub(uploadStart).Round(time.Millisecond))

	m := mountS3(t, srv, "s3://"+bucket)
	for dir, want := range expectedTree(objs) {
		checkDir(t, filepath.Join(m.Dir, filepath.FromSlash(dir)), want)
	}

	// Modification times come from the upload (S3 LastModified has
	// second resolution, so allow a margin).
	lo, hi := uploadStart.Add(-5*time.Second), uploadEnd.Add(5*time.Second)
	for key := range objs {
		if strings.HasPrefix(key, "many/") && !strings.HasSuffix(key, "00") {
			continue // a sample of the flat prefix is enough
		}
		st, err := os.Stat(filepath.Join(m.Dir, filepath.FromSlash(key)))
		if err != nil {
			t.Error(err)
			continue
		}
		if mt := st.ModTime(); mt.Before(lo) || mt.After(hi) {
			t.Errorf("%s: mtime %v, want within [%v, %v]", key, mt, lo, hi)
		}
	}

	for _, key := range []string{"a/b/c/file", "ünïcödé/日本語 ファイル.txt", "many/k04999", "empty.bin"} {
		got, err := os.ReadFile(filepath.Join(m.Dir, filepath.FromSlash(key)))
		if err != nil || string(got) != string(objs[key]) {
			t.Errorf("%s: read %q, %v; want %q", key, got, err, objs[key])
		}
	}
	for _, missing := range []string{"nope", "a/b/nope", "many/k05000", "a/b/c/file/below"} {
		_, err := os.Stat(filepath.Join(m.Dir, missing))
		if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("stat %s: %v, want ENOENT", missing, err)
		}
	}
}

// checkDir compares the listing of dir with want: the same names, kinds
// and file sizes.
func checkDir(t *testing.T, dir string, want map[string]entry) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Errorf("readdir: %v", err)
		return
	}
	got := map[string]fs.DirEntry{}
	for _, e := range ents {
		got[e.Name()] = e
	}
	var missing, extra []string
	for name := range want {
		if got[name] == nil {
			missing = append(missing, name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			extra = append(extra, name)
		}
	}
	if len(missing)+len(extra) > 0 {
		slices.Sort(missing)
		slices.Sort(extra)
		t.Errorf("%s: %d entries, want %d; missing %q; unexpected %q", dir, len(got), len(want), head(missing), head(extra))
	}
	for name, w := range want {
		e := got[name]
		if e == nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			t.Errorf("%s/%s: %v", dir, name, err)
			continue
		}
		switch {
		case w.dir && !info.IsDir():
			t.Errorf("%s/%s: mode %v, want a directory", dir, name, info.Mode())
		case !w.dir && !info.Mode().IsRegular():
			t.Errorf("%s/%s: mode %v, want a regular file", dir, name, info.Mode())
		case !w.dir && info.Size() != w.size:
			t.Errorf("%s/%s: size %d, want %d", dir, name, info.Size(), w.size)
		}
	}
}

func head(s []string) []string { return s[:min(len(s), 10)] }
