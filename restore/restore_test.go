package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/tests/localstore"
)

// The temporary name is in the file's own directory, hidden, and within
// the kernel's name length for any valid name.
func TestRestoreTempName(t *testing.T) {
	for name, want := range map[string]string{
		"_0.cfs":         "._0.cfs.segfs-restore",
		"a/b/_0.cfs":     "a/b/._0.cfs.segfs-restore",
		"segments_3":     ".segments_3.segfs-restore",
		"dir/.hidden.si": "dir/..hidden.si.segfs-restore",
	} {
		if got := tempName(name); got != want {
			t.Errorf("tempName(%q) = %q, want %q", name, got, want)
		}
	}
	long := strings.Repeat("x", 250)
	a, b := tempName("d/"+long), tempName("d/"+long[1:]+"y")
	for _, n := range []string{a, b} {
		if base := filepath.Base(n); len(base) > maxNameLen || !strings.HasPrefix(n, "d/.") || !strings.HasSuffix(n, tempSuffix) {
			t.Errorf("temporary name %q of a 250-byte base: want d/.<hash>%s within %d bytes", n, tempSuffix, maxNameLen)
		}
	}
	if a == b {
		t.Errorf("two long names share the temporary name %q", a)
	}
}

// checkDest accepts an empty DEST_DIR and one holding only files of the
// source (final or temporary names) and directories on the way to them,
// and names the first other entry.
func TestRestoreCheckDest(t *testing.T) {
	var files []*File
	for _, n := range []string{"a/b/_0.cfs", "a/_1.si", "top"} {
		files = append(files, &File{entry: entry.Entry{Name: n}, temp: tempName(n)})
	}
	// check is checkDest of dir, its first entry the source does not have
	// as an error.
	check := func(t *testing.T, dir string) error {
		dd, err := openDestDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer dd.Close()
		extra, _, err := checkDest(dd, files)
		if err == nil && extra.first != "" {
			err = errors.New("holds " + extra.first)
		}
		return err
	}
	mk := func(t *testing.T, names ...string) string {
		dir := t.TempDir()
		for _, n := range names {
			p := filepath.Join(dir, filepath.FromSlash(n))
			if strings.HasSuffix(n, "/") {
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			localstore.WriteTree(t, dir, map[string][]byte{n: []byte("x")})
		}
		return dir
	}
	for _, tc := range []struct {
		name    string
		entries []string
		foreign string // "" when accepted
	}{
		{"empty", nil, ""},
		{"an earlier restore", []string{"a/b/_0.cfs", "a/._1.si.segfs-restore", "top", "a/b/"}, ""},
		{"only directories", []string{"a/b/"}, ""},
		{"an unrelated file", []string{"a/_1.si", "a/other"}, "a/other"},
		{"an unrelated directory", []string{"top", "zzz/"}, "zzz/"},
		{"a directory under a file's name", []string{"top/"}, "top/"},
		{"a misnamed temporary file", []string{"a/b/_0.cfs.segfs-restore"}, "a/b/_0.cfs.segfs-restore"},
		{"the first in order", []string{"b-extra", "a/zz", "top"}, "a/zz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := mk(t, tc.entries...)
			err := check(t, dir)
			switch {
			case tc.foreign == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.foreign != "" && err == nil:
				t.Errorf("accepted, want %s refused", tc.foreign)
			case tc.foreign != "" && !strings.Contains(err.Error(), "holds "+tc.foreign+","):
				t.Errorf("error %q does not name %s first", err, tc.foreign)
			}
		})
	}
	t.Run("a symbolic link under a file's name", func(t *testing.T) {
		dir := mk(t)
		if err := os.Symlink("/etc/passwd", filepath.Join(dir, "top")); err != nil {
			t.Fatal(err)
		}
		if err := check(t, dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("a link at a final name: %v, want it refused as a symbolic link", err)
		}
	})
}

// A size no object can have, from a listing's lie, fails its file alone:
// planned as refused, with its other files as they are.
func TestRestorePlanRefusesBadSizes(t *testing.T) {
	for _, size := range []int64{-1, fetcher.MaxObjectSize + 1, 1<<63 - 1} {
		files := Plan([]entry.Entry{
			{Name: "_0.si", Obj: fetcher.Object{Key: "_0.si", Size: 10}},
			{Name: "_0.cfs", Obj: fetcher.Object{Key: "_0.cfs", Size: size}},
		}, nil)
		if len(files) != 2 {
			t.Fatalf("size %d: %d files; want both planned", size, len(files))
		}
		for _, f := range files {
			switch {
			case f.entry.Name == "_0.si" && f.refused != nil:
				t.Errorf("size %d: _0.si refused: %v", size, f.refused)
			case f.entry.Name == "_0.cfs" && (f.refused == nil || !strings.Contains(f.refused.Error(), fmt.Sprint(size))):
				t.Errorf("size %d: _0.cfs refused with %v; want an error naming its size", size, f.refused)
			}
		}
	}
}

// Every operation of destDir fails with errSwapped where a directory on
// the way is a symlink (here to a directory outside DEST_DIR) or a
// file, and touches nothing where the link leads; a name with an empty,
// "." or ".." component is refused.
func TestDestDirNeverFollowsALink(t *testing.T) {
	dest, outside := t.TempDir(), t.TempDir()
	localstore.WriteTree(t, outside, map[string][]byte{"f": []byte("outside's own")})
	localstore.WriteTree(t, dest, map[string][]byte{"d/f": []byte("mine"), "file": []byte("a file")})
	if err := os.Symlink(outside, filepath.Join(dest, "link")); err != nil {
		t.Fatal(err)
	}
	dd, err := openDestDir(dest)
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()

	for _, dir := range []string{"link", "file"} {
		for name, op := range map[string]func() error{
			"OpenFile create": func() error {
				f, err := dd.OpenFile(dir+"/new", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
				if err == nil {
					f.Close()
				}
				return err
			},
			"OpenFile read": func() error {
				f, err := dd.OpenFile(dir+"/f", os.O_RDONLY, 0)
				if err == nil {
					f.Close()
				}
				return err
			},
			"Remove":    func() error { return dd.Remove(dir + "/f") },
			"RemoveDir": func() error { return dd.RemoveDir(dir + "/sub") },
			"Rename":    func() error { return dd.Rename(dir+"/f", dir+"/g") },
			"Lstat":     func() error { _, err := dd.Lstat(dir + "/f"); return err },
			"SyncDir":   func() error { return dd.SyncDir(dir) },
			"Names":     func() error { _, err := dd.Names(dir); return err },
			"deeper":    func() error { return dd.Remove(dir + "/a/b") },
		} {
			if err := op(); !errors.Is(err, errSwapped) {
				t.Errorf("%s through %s: %v, want errSwapped", name, dir, err)
			}
		}
	}
	// The last component is not followed either.
	if f, err := dd.OpenFile("link", os.O_RDONLY, 0); err == nil {
		f.Close()
		t.Errorf("opened the link itself")
	}
	if err := dd.Remove("link"); err != nil {
		t.Errorf("remove the link itself: %v", err)
	}
	if got := localstore.ReadTree(t, outside); len(got) != 1 || string(got["f"]) != "outside's own" {
		t.Errorf("outside DEST_DIR changed: %q", got)
	}
	for _, bad := range []string{"../x", "d/../../x", "d//f", "./d", "d/.", "/abs", ""} {
		if err := dd.Remove(bad); err == nil || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Remove(%q): %v, want the name refused", bad, err)
		}
	}
	// And what it is for works: create in a new directory, rename, list.
	f, err := dd.OpenFile("n/m/.t", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := dd.Rename("n/m/.t", "n/m/t"); err != nil {
		t.Fatal(err)
	}
	if names, err := dd.Names("n/m"); err != nil || len(names) != 1 || names[0] != "t" {
		t.Errorf("n/m holds %q, %v; want t", names, err)
	}
}

// The space rule counts what the files being written still lack and
// what the cache keeps free beside DEST_DIR's free space; a file that
// does not fit fails with ENOSPC, saying what it needs, and counts
// nothing.
func TestSpaceRule(t *testing.T) {
	if got := (spaceRule{keepBytes: 10, keepFraction: 0.05}).keep(1000); got != 50 {
		t.Errorf("keep of 5%% of 1000 bytes, at least 10: %d", got)
	}
	dd, err := openDestDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	r := &restorer{dd: dd}
	a, b := &File{size: 1 << 20}, &File{size: 1 << 20}
	if err := r.reserve(a); err != nil {
		t.Fatal(err)
	}
	r.wrote(a, 1<<19)
	if r.pending != 1<<19 {
		t.Errorf("pending %d after half of a 1 MiB file, want %d", r.pending, 1<<19)
	}
	r.space = spaceRule{keepFraction: 1} // the cache keeps the whole disk free
	err = r.reserve(b)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "it needs 1.0 MiB") || !strings.Contains(err.Error(), "--cache-min-free") {
		t.Errorf("a file past the rule: %v, want ENOSPC saying what it needs and why", err)
	}
	if r.pending != 1<<19 || b.reserved != 0 {
		t.Errorf("a refused file counted: pending %d, reserved %d", r.pending, b.reserved)
	}
	r.unreserve(a)
	if r.pending != 0 {
		t.Errorf("pending %d once the file is done", r.pending)
	}
}
