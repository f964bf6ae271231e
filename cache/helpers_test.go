package cache

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	testBlock = 1024  // small blocks, so tests cross block borders cheaply
	testPart  = 10000 // not a multiple of the block size
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testConfig returns a Config over a fresh directory with small blocks
// and no free-space floor (the host's disk is not the test's business).
func testConfig(t testing.TB) Config {
	return Config{
		Dir:       filepath.Join(t.TempDir(), "cache"),
		MinFree:   -1,
		Logger:    quietLogger(),
		blockSize: testBlock,
	}
}

// openTest opens a cache, waits for its index load and closes it at the
// end of the test.
func openTest(t testing.TB, cfg Config) *Cache {
	t.Helper()
	c, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	waitLoaded(t, c)
	return c
}

func waitLoaded(t testing.TB, c *Cache) {
	t.Helper()
	select {
	case <-c.IndexLoaded():
	case <-time.After(time.Minute):
		t.Fatal("index load did not end")
	}
}

func key(obj string, idx int64) Key {
	return Key{Source: "s3://bucket/prefix", Object: obj, ETag: `"etag-1"`, PartSize: testPart, Index: idx}
}

// partData returns n deterministic bytes for k.
func partData(k Key, n int) []byte {
	var seed [32]byte
	id := k.id()
	copy(seed[:], id[:])
	b := make([]byte, n)
	rand.NewChaCha8(seed).Read(b)
	return b
}

func mustPut(t testing.TB, c *Cache, k Key, data []byte) {
	t.Helper()
	if err := c.Put(context.Background(), k, data); err != nil {
		t.Fatalf("Put %s: %v", k, err)
	}
}

// read reads n bytes of k at off.
func read(t testing.TB, c *Cache, k Key, off int64, n int) ([]byte, bool) {
	t.Helper()
	p := make([]byte, n)
	got, ok, err := c.ReadAt(context.Background(), k, p, off)
	if err != nil {
		t.Fatalf("ReadAt %s at %d: %v", k, off, err)
	}
	return p[:got], ok
}

// diskUsage walks a cache directory: the bytes of part files and
// whole-object files with their seals, the count of part files, and the
// temporary files.
func diskUsage(t testing.TB, dir string) (bytes int64, parts, temps int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, de fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		part := strings.HasSuffix(path, partSuffix)
		switch {
		case part, strings.HasSuffix(path, objSuffix), strings.HasSuffix(path, sealSuffix):
			fi, err := de.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			bytes += fi.Size()
			if part {
				parts++
			}
		case strings.HasSuffix(path, ".tmp"):
			temps++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bytes, parts, temps
}

// checkAccounting asserts that the index counts exactly the part files
// on disk and that no temporary file is left.
func checkAccounting(t testing.TB, c *Cache) {
	t.Helper()
	bytes, parts, temps := diskUsage(t, c.Dir())
	st := c.Stats()
	if st.Bytes != bytes || st.Parts != int64(parts) || temps != 0 {
		t.Errorf("index counts %d parts, %d bytes; disk holds %d parts, %d bytes, %d temporary files",
			st.Parts, st.Bytes, parts, bytes, temps)
	}
}

func partPath(c *Cache, k Key) string { return k.id().path(c.Dir()) }

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
