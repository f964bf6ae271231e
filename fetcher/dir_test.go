package fetcher

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// makeTree creates files (path -> content) below a new directory and
// returns it.
func makeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func openTestDir(t *testing.T, dir string) *DirStore {
	t.Helper()
	st, err := Open(t.Context(), "file://"+dir, Config{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return st.(*DirStore)
}

func TestDirList(t *testing.T) {
	dir := makeTree(t, map[string]string{"a.txt": "A", "a/b": "BB", "a/c/d": "DDD", "z": ""})
	outside := makeTree(t, map[string]string{"secret": "S", "sub/x": "X"})
	must(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	must(t, os.Symlink("a.txt", filepath.Join(dir, "link-in")))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link-out")))
	must(t, os.Symlink(filepath.Join(outside, "sub"), filepath.Join(dir, "dirlink")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))

	s := openTestDir(t, dir)
	objs, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
		fi, err := os.Stat(filepath.Join(dir, o.Key))
		if err != nil {
			t.Fatal(err)
		}
		if o.Size != fi.Size() || o.ETag != fileETag(fi) || !o.ModTime.Equal(fi.ModTime()) {
			t.Errorf("object %+v does not match the file (size %d, etag %s)", o, fi.Size(), fileETag(fi))
		}
	}
	// Sorted by key, not in walk order: "a.txt" < "a/b" because '.' < '/'.
	if want := []string{"a.txt", "a/b", "a/c/d", "z"}; !equalStrings(keys, want) {
		t.Errorf("keys = %q, want %q", keys, want)
	}
	if s.String() != "file://"+dir {
		t.Errorf("String = %q", s.String())
	}
}

func TestDirReadRange(t *testing.T) {
	data := randomBytes(10000)
	dir := makeTree(t, map[string]string{"x/seg": string(data)})
	s := openTestDir(t, dir)
	obj, err := s.Stat(t.Context(), "x/seg")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 3000)
	if err := s.ReadRange(t.Context(), obj, 7000, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, data[7000:]) {
		t.Error("bytes differ from the file")
	}
	if err := s.ReadRange(t.Context(), obj, 7001, p); err == nil {
		t.Error("read past the end succeeded")
	}
	c := s.Counters()
	if c.Gets.Load() != 1 || c.GetBytes.Load() != 3000 || c.Stats.Load() != 1 || c.ReadErrors.Load() != 1 {
		t.Errorf("Gets %d GetBytes %d Stats %d ReadErrors %d, want 1 3000 1 1",
			c.Gets.Load(), c.GetBytes.Load(), c.Stats.Load(), c.ReadErrors.Load())
	}
}

func TestDirChanged(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, path string)
		want   error
	}{
		{name: "rewritten in place", want: ErrChanged, change: func(t *testing.T, path string) {
			fi, err := os.Stat(path)
			must(t, err)
			must(t, os.WriteFile(path, bytes.Repeat([]byte("n"), 100), 0o644))
			// Same inode and size: only the modification time can tell.
			must(t, os.Chtimes(path, time.Time{}, fi.ModTime().Add(time.Second)))
		}},
		{name: "replaced by rename", want: ErrChanged, change: func(t *testing.T, path string) {
			must(t, os.WriteFile(path+".tmp", bytes.Repeat([]byte("n"), 100), 0o644))
			must(t, os.Rename(path+".tmp", path))
		}},
		{name: "truncated", want: ErrChanged, change: func(t *testing.T, path string) {
			must(t, os.Truncate(path, 10))
		}},
		{name: "replaced by a directory", want: ErrChanged, change: func(t *testing.T, path string) {
			must(t, os.Remove(path))
			must(t, os.Mkdir(path, 0o755))
		}},
		{name: "deleted", want: ErrNotFound, change: func(t *testing.T, path string) {
			must(t, os.Remove(path))
		}},
		{name: "parent deleted", want: ErrNotFound, change: func(t *testing.T, path string) {
			must(t, os.RemoveAll(filepath.Dir(path)))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := makeTree(t, map[string]string{"d/f": string(bytes.Repeat([]byte("o"), 100))})
			s := openTestDir(t, dir)
			obj, err := s.Stat(t.Context(), "d/f")
			must(t, err)
			tt.change(t, filepath.Join(dir, "d", "f"))
			p := make([]byte, 50)
			err = s.ReadRange(t.Context(), obj, 0, p)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if want := int64(btoi(tt.want == ErrChanged)); s.Counters().Changed.Load() != want {
				t.Errorf("Changed = %d, want %d", s.Counters().Changed.Load(), want)
			}
		})
	}
}

func TestDirTraversal(t *testing.T) {
	outside := makeTree(t, map[string]string{"secret": "top secret", "sub/secret": "top secret"})
	parent := t.TempDir()
	dir := filepath.Join(parent, "root")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(parent, "x"), []byte("top secret"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "ok"), []byte("fine"), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "esc")))
	must(t, os.Symlink(filepath.Join(outside, "sub"), filepath.Join(dir, "escdir")))
	s := openTestDir(t, dir)

	for _, key := range []string{"../x", "ok/../../x", "/etc/passwd", "", ".", "..", "a//b", "ok/", "./ok"} {
		if _, err := s.Stat(t.Context(), key); !errors.Is(err, ErrNotFound) {
			t.Errorf("Stat(%q) = %v, want ErrNotFound", key, err)
		}
		if err := s.ReadRange(t.Context(), Object{Key: key, Size: 10, ETag: "x"}, 0, make([]byte, 4)); !errors.Is(err, ErrNotFound) {
			t.Errorf("ReadRange(%q) = %v, want ErrNotFound", key, err)
		}
	}
	// Symbolic links that leave the directory: not objects, not readable
	// even with the target's identity.
	for _, key := range []string{"esc", "escdir/secret"} {
		if _, err := s.Stat(t.Context(), key); err == nil {
			t.Errorf("Stat(%q) succeeded", key)
		}
		fi, err := os.Stat(filepath.Join(outside, "secret"))
		must(t, err)
		p := make([]byte, fi.Size())
		if err := s.ReadRange(t.Context(), Object{Key: key, Size: fi.Size(), ETag: fileETag(fi)}, 0, p); err == nil {
			t.Errorf("ReadRange(%q) read %q outside the directory", key, p)
		}
	}
}

func TestOpenDirErrors(t *testing.T) {
	dir := makeTree(t, map[string]string{"file": "x"})
	if _, err := Open(t.Context(), "file://"+filepath.Join(dir, "missing"), Config{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: err = %v, want ErrNotExist", err)
	}
	st, err := Open(t.Context(), "file://"+filepath.Join(dir, "file"), Config{})
	if err == nil || st != nil {
		t.Errorf("file as dir: Open = %v, %v; want nil and an error", st, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
