package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segfs/segfs/tests/treesnap"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// madeCache makes a cache directory at dir as a run of segfs leaves it.
func madeCache(t *testing.T, dir string) {
	t.Helper()
	c, err := Open(Config{Dir: dir, MinFree: -1, Logger: quietLogger(), blockSize: testBlock})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func mkdirMode(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOpenRefuses gives Open directories that are not segfs's to take:
// each must be refused with a DirError of the right kind, whose reason
// says why on one line, and nothing under the test's directory may have
// changed (a symlink's target included).
func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		make   func(t *testing.T, root string) string // makes what Open is given, under root
		want   error
		reason string
		asRoot bool
	}{
		{"symlink to a home directory", func(t *testing.T, root string) string {
			writeFile(t, filepath.Join(root, "home", "tmp", "work", "notes.txt"), "notes")
			symlink(t, filepath.Join(root, "home"), filepath.Join(root, "cache"))
			return filepath.Join(root, "cache")
		}, ErrUnsafeDir, "is a symlink; give a real directory", false},
		{"symlink to a segfs cache", func(t *testing.T, root string) string {
			madeCache(t, filepath.Join(root, "real"))
			writeFile(t, filepath.Join(root, "real", "tmp", "0123456789abcdef.1.tmp"), "a temporary file")
			symlink(t, filepath.Join(root, "real"), filepath.Join(root, "cache"))
			return filepath.Join(root, "cache")
		}, ErrUnsafeDir, "is a symlink", false},
		{"dangling symlink", func(t *testing.T, root string) string {
			symlink(t, filepath.Join(root, "nowhere"), filepath.Join(root, "cache"))
			return filepath.Join(root, "cache")
		}, ErrUnsafeDir, "is a symlink", false},
		{"regular file", func(t *testing.T, root string) string {
			writeFile(t, filepath.Join(root, "cache"), "a file")
			return filepath.Join(root, "cache")
		}, ErrUnsafeDir, "is a regular file, not a directory", false},
		{"group-writable", func(t *testing.T, root string) string {
			return mkdirMode(t, filepath.Join(root, "cache"), 0o770)
		}, ErrUnsafeDir, "lets group or others write", false},
		{"world-writable", func(t *testing.T, root string) string {
			return mkdirMode(t, filepath.Join(root, "cache"), 0o702)
		}, ErrUnsafeDir, "lets group or others write", false},
		{"world-writable and sticky, as /tmp", func(t *testing.T, root string) string {
			return mkdirMode(t, filepath.Join(root, "cache"), 0o777|os.ModeSticky)
		}, ErrUnsafeDir, "lets group or others write", false},
		{"another user's", func(t *testing.T, root string) string {
			dir := mkdirMode(t, filepath.Join(root, "cache"), 0o700)
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return dir
		}, ErrUnsafeDir, "owned by uid 65534", true},
		{"another user's segfs cache", func(t *testing.T, root string) string {
			dir := filepath.Join(root, "cache")
			madeCache(t, dir)
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return dir
		}, ErrUnsafeDir, "owned by uid 65534", true},
		{"a directory of files", func(t *testing.T, root string) string {
			writeFile(t, filepath.Join(root, "cache", "notes.txt"), "notes")
			writeFile(t, filepath.Join(root, "cache", "tmp", "0123456789abcdef.1.tmp"), "not segfs's")
			return filepath.Join(root, "cache")
		}, ErrNotCacheDir, `is not empty and not a segfs cache directory (it holds "notes.txt")`, false},
		{"only tmp/, without a lock", func(t *testing.T, root string) string {
			writeFile(t, filepath.Join(root, "cache", "tmp", "work", "notes.txt"), "notes")
			return filepath.Join(root, "cache")
		}, ErrNotCacheDir, `(it holds "tmp")`, false},
		{"another program's lock", func(t *testing.T, root string) string {
			writeFile(t, filepath.Join(root, "cache", "lock"), "4242\n")
			writeFile(t, filepath.Join(root, "cache", "tmp", "0123456789abcdef.1.tmp"), "not segfs's")
			return filepath.Join(root, "cache")
		}, ErrNotCacheDir, `(it holds "lock")`, false},
		{"lock a symlink, in a segfs cache", func(t *testing.T, root string) string {
			dir := filepath.Join(root, "cache")
			madeCache(t, dir)
			writeFile(t, filepath.Join(root, "victim"), "not a lock")
			if err := os.Remove(filepath.Join(dir, "lock")); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Join(root, "victim"), filepath.Join(dir, "lock"))
			return dir
		}, ErrUnsafeDir, "lock is a symlink, not segfs's lock file", false},
		{"lock a symlink, alone", func(t *testing.T, root string) string {
			writeFile(t, filepath.Join(root, "victim"), "")
			if err := os.Mkdir(filepath.Join(root, "cache"), 0o700); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Join(root, "victim"), filepath.Join(root, "cache", "lock"))
			return filepath.Join(root, "cache")
		}, ErrUnsafeDir, "lock is a symlink", false},
		{"lock a FIFO", func(t *testing.T, root string) string {
			dir := filepath.Join(root, "cache")
			madeCache(t, dir)
			if err := os.Remove(filepath.Join(dir, "lock")); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(filepath.Join(dir, "lock"), 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}, ErrUnsafeDir, "lock is a FIFO", false},
		{"tmp a symlink, in a segfs cache", func(t *testing.T, root string) string {
			dir := filepath.Join(root, "cache")
			madeCache(t, dir)
			// What the sweep would remove, were the link followed.
			writeFile(t, filepath.Join(root, "elsewhere", "0123456789abcdef.1.tmp"), "not segfs's")
			if err := os.Remove(filepath.Join(dir, "tmp")); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Join(root, "elsewhere"), filepath.Join(dir, "tmp"))
			return dir
		}, ErrUnsafeDir, "tmp is a symlink, not segfs's temporary directory", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.asRoot && os.Geteuid() != 0 {
				t.Skip("needs root to chown")
			}
			root := t.TempDir()
			dir := tc.make(t, root)
			before := treesnap.Take(t, root)
			cfg := testConfig(t)
			cfg.Dir = dir
			c, err := Open(cfg)
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			}
			var de *DirError
			switch {
			case !errors.As(err, &de):
				t.Errorf("Open: %v (%T), want a *DirError", err, err)
			case !errors.Is(err, tc.want):
				t.Errorf("Open: %v, want an error wrapping %v", err, tc.want)
			case de.Dir != dir || !strings.Contains(de.Reason, tc.reason) || strings.Contains(err.Error(), "\n"):
				t.Errorf("Open: dir %q, reason %q; want %q and one line holding %q", de.Dir, de.Reason, dir, tc.reason)
			}
			treesnap.Same(t, before, treesnap.Take(t, root))
		})
	}
}

// TestOpenAccepts: an empty or new directory, or one segfs made (before
// the marker existed too), is taken and marked; what segfs did not make
// is left where it is.
func TestOpenAccepts(t *testing.T) {
	k := key("legacy", 3)
	data := partData(k, 3000)
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, root string) string
		check func(t *testing.T, c *Cache, root string)
	}{
		{"new, with its parents", func(t *testing.T, root string) string {
			return filepath.Join(root, "a", "b", "cache")
		}, nil},
		{"empty", func(t *testing.T, root string) string {
			return mkdirMode(t, filepath.Join(root, "cache"), 0o700)
		}, nil},
		{"a file system's root", func(t *testing.T, root string) string {
			dir := mkdirMode(t, filepath.Join(root, "cache"), 0o700)
			mkdirMode(t, filepath.Join(dir, "lost+found"), 0o700)
			return dir
		}, func(t *testing.T, _ *Cache, root string) {
			if !fileExists(filepath.Join(root, "cache", "lost+found")) {
				t.Error("lost+found removed")
			}
		}},
		{"a parent is a symlink", func(t *testing.T, root string) string {
			madeCache(t, filepath.Join(root, "real", "cache"))
			symlink(t, filepath.Join(root, "real"), filepath.Join(root, "link"))
			return filepath.Join(root, "link", "cache")
		}, nil},
		{"made before the marker", func(t *testing.T, root string) string {
			// What a segfs of before the marker leaves: an empty lock,
			// tmp/ with a crash's temporary file, and parts.
			dir := filepath.Join(root, "cache")
			writeFile(t, filepath.Join(dir, "lock"), "")
			writeFile(t, filepath.Join(dir, "tmp", "0123456789abcdef.7.tmp"), "torn")
			writeFile(t, k.id().path(dir), string(append(encodeHeader(k, data, testBlock), data...)))
			return dir
		}, func(t *testing.T, c *Cache, root string) {
			if got, ok := read(t, c, k, 0, len(data)); !ok || !bytes.Equal(got, data) {
				t.Errorf("the part of the earlier run: hit %v, %d bytes", ok, len(got))
			}
			if fileExists(filepath.Join(root, "cache", "tmp", "0123456789abcdef.7.tmp")) {
				t.Error("the earlier run's temporary file is left")
			}
		}},
		{"segfs's, with other files", func(t *testing.T, root string) string {
			dir := filepath.Join(root, "cache")
			madeCache(t, dir)
			writeFile(t, filepath.Join(dir, "notes.txt"), "notes")
			writeFile(t, filepath.Join(dir, "zz", "x.part"), "not a part")
			return dir
		}, func(t *testing.T, c *Cache, root string) {
			for name, want := range map[string]string{"notes.txt": "notes", "zz/x.part": "not a part"} {
				if b, err := os.ReadFile(filepath.Join(root, "cache", name)); err != nil || string(b) != want {
					t.Errorf("%s: %q, %v; want it left alone", name, b, err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			cfg := testConfig(t)
			cfg.Dir = tc.make(t, root)
			c := openTest(t, cfg)
			if b, err := os.ReadFile(filepath.Join(cfg.Dir, "lock")); err != nil || string(b) != marker {
				t.Errorf("lock holds %q (%v), want the marker", b, err)
			}
			mustPut(t, c, key("new", 0), []byte("new part"))
			if got, ok := read(t, c, key("new", 0), 0, 100); !ok || string(got) != "new part" {
				t.Errorf("a new part: hit %v, %q", ok, got)
			}
			if tc.check != nil {
				tc.check(t, c, root)
			}
		})
	}
}

// readGuarded is read with a hang guard: a FIFO at path, opened for
// reading without O_NONBLOCK, would block until a writer came. On a hang
// it opens the FIFO for writing, so that the read and Close end.
func readGuarded(t *testing.T, c *Cache, k Key, n int, path string) ([]byte, bool) {
	t.Helper()
	type result struct {
		b  []byte
		ok bool
	}
	done := make(chan result, 1)
	go func() {
		p := make([]byte, n)
		got, ok, _ := c.ReadAt(context.Background(), k, p, 0)
		done <- result{p[:got], ok}
	}()
	select {
	case r := <-done:
		return r.b, r.ok
	case <-time.After(time.Minute):
		if f, err := os.OpenFile(path, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatal("ReadAt hung")
		return nil, false
	}
}

// TestUnusablePartFiles replaces a part's file by entries that cannot be
// used as one. Each read must miss without following or blocking, remove
// the entry (and nothing it points to), count it in BadFilesRemoved, and
// let the part be cached and read again.
func TestUnusablePartFiles(t *testing.T) {
	const n = 5000
	for _, tc := range []struct {
		name    string
		replace func(t *testing.T, path, outside string)
		asUser  bool // root reads what chmod 000 forbids
	}{
		{"symlink to a copy of the part", func(t *testing.T, path, outside string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, outside, string(b)) // it would pass every check
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			symlink(t, outside, path)
		}, false},
		{"dangling symlink", func(t *testing.T, path, outside string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			symlink(t, outside+".missing", path)
		}, false},
		{"empty directory", func(t *testing.T, path, _ string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"FIFO", func(t *testing.T, path, _ string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"unreadable", func(t *testing.T, path, _ string) {
			if err := os.Chmod(path, 0); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		for _, warm := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/warm=%v", tc.name, warm), func(t *testing.T) {
				if tc.asUser && os.Geteuid() == 0 {
					t.Skip("root reads a file of mode 000")
				}
				c := openTest(t, testConfig(t))
				k := key("unusable", 2)
				data := partData(k, n)
				mustPut(t, c, k, data)
				if warm {
					if _, ok := read(t, c, k, 0, n); !ok {
						t.Fatal("intact part missed")
					}
				}
				outsideDir := t.TempDir()
				outside := filepath.Join(outsideDir, "target")
				path := partPath(c, k)
				tc.replace(t, path, outside)
				before := treesnap.Take(t, outsideDir)

				if got, ok := readGuarded(t, c, k, n, path); ok {
					t.Fatalf("served %d bytes from the replaced entry", len(got))
				}
				st := c.Stats()
				if st.BadFilesRemoved != 1 || st.CorruptRemoved != 0 || st.Parts != 0 {
					t.Errorf("bad files removed %d, corrupt %d, parts %d; want 1, 0 and 0", st.BadFilesRemoved, st.CorruptRemoved, st.Parts)
				}
				if fileExists(path) {
					t.Error("the entry is left")
				}
				treesnap.Same(t, before, treesnap.Take(t, outsideDir))
				mustPut(t, c, k, data)
				if got, ok := read(t, c, k, 0, n); !ok || !bytes.Equal(got, data) {
					t.Fatalf("after Put again: hit %v, %d bytes", ok, len(got))
				}
				checkAccounting(t, c)
			})
		}
	}
}

// TestNonEmptyDirectoryInPlace: a directory holding files where a part
// belongs is not segfs's to empty. It stays as it is; the part is not
// cached while it is there.
func TestNonEmptyDirectoryInPlace(t *testing.T) {
	c := openTest(t, testConfig(t))
	k := key("occupied", 0)
	data := partData(k, 100)
	mustPut(t, c, k, data)
	path := partPath(c, k)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(path, "notes.txt"), "notes")
	before := treesnap.Take(t, path)
	if _, ok := read(t, c, k, 0, 100); ok {
		t.Fatal("served a directory")
	}
	if err := c.Put(context.Background(), k, data); err == nil {
		t.Error("Put over a directory succeeded")
	}
	if _, ok := read(t, c, k, 0, 100); ok {
		t.Fatal("served a directory")
	}
	treesnap.Same(t, before, treesnap.Take(t, path))
	if st := c.Stats(); st.BadFilesRemoved != 0 {
		t.Errorf("bad files removed %d, want 0", st.BadFilesRemoved)
	}
}

// TestSymlinkAtIndexLoad: a symlink found under a part's name when the
// index loads is removed and counted, not indexed, and its target left.
func TestSymlinkAtIndexLoad(t *testing.T) {
	cfg := testConfig(t)
	c := openTest(t, cfg)
	ka, kb := key("load", 0), key("load", 1)
	mustPut(t, c, ka, partData(ka, 700))
	mustPut(t, c, kb, partData(kb, 800))
	path := partPath(c, ka)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	outsideDir := t.TempDir()
	outside := filepath.Join(outsideDir, "copy")
	if err := os.Rename(path, outside); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, path)
	before := treesnap.Take(t, outsideDir)

	c = openTest(t, cfg)
	st := c.Stats()
	if st.BadFilesRemoved != 1 || st.Parts != 1 {
		t.Errorf("bad files removed %d, parts %d; want 1 and 1", st.BadFilesRemoved, st.Parts)
	}
	if fileExists(path) {
		t.Error("the symlink is left")
	}
	treesnap.Same(t, before, treesnap.Take(t, outsideDir))
	if _, ok := read(t, c, ka, 0, 700); ok {
		t.Error("part served after its file was removed")
	}
	mustPut(t, c, ka, partData(ka, 700))
	if got, ok := read(t, c, ka, 0, 700); !ok || !bytes.Equal(got, partData(ka, 700)) {
		t.Errorf("after Put again: hit %v", ok)
	}
	checkAccounting(t, c)
}

// TestPutReplacesSymlink: a Put finding a symlink under its part's name,
// once the index is loaded or while it loads (when Put looks for a file
// the load has not indexed yet), does not take it for the part: it
// writes the part over it. Nor does Contains take it for the part.
func TestPutReplacesSymlink(t *testing.T) {
	for _, loading := range []bool{false, true} {
		t.Run(fmt.Sprintf("loading=%v", loading), func(t *testing.T) {
			cfg := testConfig(t)
			madeCache(t, cfg.Dir)
			k := key("planted", 0)
			outsideDir := t.TempDir()
			outside := filepath.Join(outsideDir, "target")
			writeFile(t, outside, "not a part")
			path := k.id().path(cfg.Dir)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			symlink(t, outside, path)
			before := treesnap.Take(t, outsideDir)
			hold := make(chan struct{})
			if loading {
				cfg.holdLoad = hold
			} else {
				close(hold)
			}
			c, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if !loading {
				waitLoaded(t, c)
			}
			if c.Contains(k) {
				t.Error("Contains takes a symlink for the part")
			}
			data := partData(k, 900)
			mustPut(t, c, k, data)
			if got, ok := read(t, c, k, 0, 900); !ok || !bytes.Equal(got, data) {
				t.Fatalf("read after Put: hit %v", ok)
			}
			if loading {
				close(hold)
				waitLoaded(t, c)
			}
			if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("the part's name holds %v (%v), want a regular file", fi, err)
			}
			treesnap.Same(t, before, treesnap.Take(t, outsideDir))
			checkAccounting(t, c)
		})
	}
}

// TestSymlinkedFanOutDirectory: a fan-out directory replaced by a symlink
// to a directory holding a valid copy of a part is not followed, by
// reads, Puts or the index load, and what it points to is left alone.
func TestSymlinkedFanOutDirectory(t *testing.T) {
	cfg := testConfig(t)
	c := openTest(t, cfg)
	k := key("fan-out", 0)
	data := partData(k, 600)
	mustPut(t, c, k, data)
	sub := filepath.Dir(partPath(c, k))
	outside := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Rename(sub, outside); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, sub)
	before := treesnap.Take(t, outside)

	// The open Cache holds the directory it renamed: it must still not
	// reach it by its name. A new Cache must not either.
	c.Close()
	c = openTest(t, cfg)
	if st := c.Stats(); st.Parts != 0 {
		t.Errorf("the load indexed %d parts through the symlink", st.Parts)
	}
	if _, ok := read(t, c, k, 0, 600); ok {
		t.Error("read through the symlink")
	}
	if err := c.Put(context.Background(), k, data); err == nil {
		t.Error("Put through the symlink succeeded")
	}
	if c.Contains(k) {
		t.Error("Contains looked through the symlink")
	}
	treesnap.Same(t, before, treesnap.Take(t, outside))
}

// TestDirectoriesRemovedUnderCache: tmp/ and a fan-out directory removed
// by hand while the cache is open are made anew by the next Put.
func TestDirectoriesRemovedUnderCache(t *testing.T) {
	c := openTest(t, testConfig(t))
	k := key("removed", 0)
	data := partData(k, 400)
	mustPut(t, c, k, data)
	for _, dir := range []string{filepath.Join(c.Dir(), "tmp"), filepath.Dir(partPath(c, k))} {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := read(t, c, k, 0, 400); ok {
		t.Fatal("served a removed part")
	}
	mustPut(t, c, k, data)
	if got, ok := read(t, c, k, 0, 400); !ok || !bytes.Equal(got, data) {
		t.Fatalf("after Put again: hit %v", ok)
	}
	checkAccounting(t, c)
}

// TestSourcesDoNotShareParts: keys that differ only in their source (two
// services with the same bucket name: fetcher.CacheSource) name different
// parts.
func TestSourcesDoNotShareParts(t *testing.T) {
	c := openTest(t, testConfig(t))
	a := Key{Source: "s3://bucket/prefix at http://127.0.0.1:7070", Object: "o", ETag: `"e"`, PartSize: testPart, Index: 0}
	b := a
	b.Source = "s3://bucket/prefix at https://minio.example.com"
	mustPut(t, c, a, []byte("from a"))
	if _, ok := read(t, c, b, 0, 10); ok || c.Contains(b) {
		t.Fatal("a part of one service served for the other")
	}
	mustPut(t, c, b, []byte("from b"))
	for k, want := range map[Key]string{a: "from a", b: "from b"} {
		if got, ok := read(t, c, k, 0, 10); !ok || string(got) != want {
			t.Errorf("%s: %q (hit %v), want %q", k.Source, got, ok, want)
		}
	}
}

func TestIsTempName(t *testing.T) {
	c := &Cache{}
	name := c.tempName(key("x", 0).id())
	for s, want := range map[string]bool{
		name:                                  true,
		name + sealSuffix:                     true,
		"0123456789abcdef.12.tmp":             true,
		"0123456789abcdef.tmp":                false,
		"0123456789abcde.1.tmp":               false,
		"0123456789abcdeF.1.tmp":              false,
		"0123456789abcdef.1x.tmp":             false,
		"0123456789abcdef.1.tmp.seal.seal":    false,
		"0123456789abcdef.1.part":             false,
		"notes.tmp":                           false,
		"../0123456789abcdef.1.tmp":           false,
		"0123456789abcdef.1.tmp/notes.txt":    false,
		"0123456789abcdef.-1.tmp":             false,
		"0123456789abcdef.1.tmp" + partSuffix: false,
	} {
		if got := isTempName(s); got != want {
			t.Errorf("isTempName(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestCloseReleasesDescriptors: the descriptors a Cache holds (its
// directory, the lock, the subdirectories, those replaced after a removal)
// are all closed by Close.
func TestCloseReleasesDescriptors(t *testing.T) {
	count := func() int {
		des, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return len(des)
	}
	cfg := testConfig(t)
	before := count()
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, c)
	for i := range 64 {
		mustPut(t, c, key("fds", int64(i)), []byte("part"))
	}
	if err := os.RemoveAll(filepath.Join(cfg.Dir, "tmp")); err != nil {
		t.Fatal(err)
	}
	mustPut(t, c, key("fds", 64), []byte("part")) // renews tmp/
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if after := count(); after != before {
		t.Errorf("%d descriptors open after Close, %d before Open", after, before)
	}
}
