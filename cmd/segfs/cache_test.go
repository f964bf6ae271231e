package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/segfs/segfs/cache"
)

// TestOpenCacheRefusal: a --cache-dir the cache refuses fails with one
// line naming the directory as given and the reason, still wrapping the
// cache's sentinel.
func TestOpenCacheRefusal(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "notes.txt"), []byte("notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "cache")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, want string
		sentinel  error
	}{
		{link, "--cache-dir " + link + ": is a symlink; give a real directory", cache.ErrUnsafeDir},
		{home, "--cache-dir " + home + `: is not empty and not a segfs cache directory (it holds "notes.txt"); give an empty or new directory`, cache.ErrNotCacheDir},
	} {
		pc, err := openCache(cacheFlags{CacheDir: tc.dir, CacheMinFree: "5%"}, "s3://bucket", log)
		if err == nil {
			pc.Close()
			t.Fatalf("--cache-dir %s accepted", tc.dir)
		}
		if err.Error() != tc.want || !errors.Is(err, tc.sentinel) {
			t.Errorf("error %q (wrapping %v: %v), want %q", err, tc.sentinel, errors.Is(err, tc.sentinel), tc.want)
		}
	}
	ok := filepath.Join(t.TempDir(), "cache")
	c, err := openCache(cacheFlags{CacheDir: ok, CacheMinFree: "5%"}, "s3://bucket", log)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = openCache(cacheFlags{CacheDir: ok, CacheMinFree: "5%"}, "s3://bucket", log)
	if want := "--cache-dir " + ok + " is in use by another segfs mount; give each mount its own --cache-dir"; err == nil ||
		err.Error() != want || !errors.Is(err, cache.ErrInUse) {
		t.Errorf("second open: %v, want %q", err, want)
	}
}

// TestDefaultCacheDirPerService: without --cache-dir, stores of the same
// bucket on two services get a directory each, named after their cache
// source.
func TestDefaultCacheDirPerService(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dirs := map[string]bool{}
	for _, source := range []string{"s3://bucket at http://127.0.0.1:7070", "s3://bucket at http://127.0.0.1:7071", "s3://bucket at aws:us-east-1"} {
		pc, err := openCache(cacheFlags{CacheMinFree: "5%"}, source, log)
		if err != nil {
			t.Fatal(err)
		}
		dirs[pc.Dir()] = true
		pc.Close()
	}
	if len(dirs) != 3 {
		t.Errorf("three services got %d directories: %v", len(dirs), dirs)
	}
}
