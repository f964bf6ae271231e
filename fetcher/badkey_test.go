package fetcher

import (
	"context"
	"errors"
	"testing"
)

// badKeys are keys no store of segfs sends: a server resolves their dot
// elements or collapses their empty ones, and serves another object than
// the key names (issue 42: "../../<other index>/0/segments/data/<blob>"
// read another index's file as the shard's own).
var badKeys = []string{
	"", ".", "..", "../x", "a/../b", "a/./b", "./a", "a/.", "a/..", "a//b", "/a", "a/",
	"../../../../other/0/segments/data/_0.fdt__u", "a\x00b", "\x00",
}

// Every request of an S3 store refuses a bad key (or a sub-store or
// listing prefix holding one) with an error wrapping ErrBadKey and
// ErrNotFound, without sending anything; a good key beside them is asked
// for as before.
func TestS3RefusesBadKeys(t *testing.T) {
	f := newFakeS3(t)
	f.put("bucket", "p/k", randomBytes(100))
	s := openTestS3(t, f, "p")
	ctx := context.Background()
	before := f.requests.Load()
	counted := func() int64 {
		c := s.Counters()
		return c.Stats.Load() + c.Gets.Load() + c.Lists.Load()
	}
	countedBefore := counted()
	check := func(op, key string, err error) {
		t.Helper()
		if !errors.Is(err, ErrBadKey) || !errors.Is(err, ErrNotFound) {
			t.Errorf("%s(%q): %v; want an error wrapping ErrBadKey and ErrNotFound", op, key, err)
		}
	}
	for _, key := range badKeys {
		_, err := s.Stat(ctx, key)
		check("Stat", key, err)
		obj := Object{Key: key, Size: 100, ETag: `"e"`}
		check("ReadRange", key, s.ReadRange(ctx, obj, 0, make([]byte, 10)))
		check("ReadRangeProgress", key, s.ReadRangeProgress(ctx, obj, 0, make([]byte, 10), func(int) {
			t.Errorf("progress for the bad key %q", key)
		}))
		if key == "" {
			continue // Sub and ListDirs take "" as the store itself
		}
		_, err = Sub(s, key)
		check("Sub", key, err)
		_, err = ListDirs(ctx, s, key)
		check("ListDirs", key, err)
	}
	if n := f.requests.Load() - before; n != 0 {
		t.Errorf("%d requests reached the server for bad keys; want none", n)
	}
	if got := counted() - countedBefore; got != 0 {
		t.Errorf("the refused keys were counted as %d requests", got)
	}
	if _, err := s.Stat(ctx, "k"); err != nil {
		t.Errorf("Stat of a good key: %v", err)
	}
	if _, err := s.Stat(ctx, "a..b"); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrBadKey) {
		t.Errorf("Stat of a missing key with dots inside an element: %v; want not found, asked for", err)
	}
	if n := f.requests.Load() - before; n != 2 {
		t.Errorf("%d requests for the two good keys, want 2", n)
	}
}

// A store whose own prefix holds a bad element is refused at Open: every
// key it requests would start with it.
func TestS3RefusesABadPrefix(t *testing.T) {
	f := newFakeS3(t)
	setAWSEnv(t)
	for _, prefix := range []string{"a/../b", "a//b", "..", "a/./b", "a\x00b"} {
		before := f.requests.Load()
		_, err := newS3Store(t.Context(), Source{Scheme: "s3", Bucket: "bucket", Prefix: prefix}, testConfig(f), fastSDKRetries)
		if !errors.Is(err, ErrBadKey) {
			t.Errorf("prefix %q: %v; want an error wrapping ErrBadKey", prefix, err)
		}
		if n := f.requests.Load() - before; n != 0 {
			t.Errorf("prefix %q: %d requests sent", prefix, n)
		}
	}
}

// A local directory store refuses the same keys, NUL included, before
// os.Root sees them.
func TestDirRefusesBadKeys(t *testing.T) {
	s := openTestDir(t, makeTree(t, map[string]string{"a/b": "x"}))
	ctx := context.Background()
	for _, key := range badKeys {
		if _, err := s.Stat(ctx, key); !errors.Is(err, ErrBadKey) || !errors.Is(err, ErrNotFound) {
			t.Errorf("Stat(%q) = %v; want ErrBadKey and ErrNotFound", key, err)
		}
		err := s.ReadRange(ctx, Object{Key: key, Size: 1, ETag: "x"}, 0, make([]byte, 1))
		if !errors.Is(err, ErrBadKey) {
			t.Errorf("ReadRange(%q) = %v; want ErrBadKey", key, err)
		}
		if key == "" {
			continue
		}
		if _, err := Sub(s, key); !errors.Is(err, ErrBadKey) {
			t.Errorf("Sub(%q) = %v; want ErrBadKey", key, err)
		}
	}
	if _, err := s.Stat(ctx, "a/b"); err != nil {
		t.Errorf("Stat of a good key: %v", err)
	}
}
