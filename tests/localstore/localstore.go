// Package localstore gives unit tests a real store over a directory
// (fetcher's file:// store) holding the objects they name, and the
// seekable zstd form of bytes, as segfs push writes it.
package localstore

import (
	"bytes"
	"context"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/fetcher"
)

// File is an object's content and modification time.
type File struct {
	Data  []byte
	MTime time.Time
}

// Dir writes files (key -> file) below a new directory and opens it as a
// store, with its listing.
func Dir(t testing.TB, files map[string]File) (fetcher.Store, []fetcher.Object) {
	t.Helper()
	dir := t.TempDir()
	for key, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, f.MTime, f.MTime); err != nil {
			t.Fatal(err)
		}
	}
	store, err := fetcher.Open(context.Background(), (&url.URL{Scheme: "file", Path: dir}).String(), fetcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return store, objs
}

// Seekable returns data in the seekable zstd format, in 4 KiB frames.
func Seekable(t testing.TB, data []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if _, _, err := compress.Encode(context.Background(), &out, bytes.NewReader(data), compress.EncoderOptions{FrameSize: 4 << 10}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// WriteTree writes files (by '/'-separated name) below dir, making the
// directories on the way.
func WriteTree(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// ReadTree returns the regular files below dir by '/'-separated name
// with their bytes; an entry that is neither such a file nor a directory
// fails the test.
func ReadTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !d.Type().IsRegular() {
			t.Errorf("%s is not a regular file", rel)
			return nil
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
