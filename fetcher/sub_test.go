package fetcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A sub-store of a local directory reads and lists below its prefix
// only, counts in its parent's counters, and refuses a prefix that
// climbs out; ListDirs lists the directories right below a prefix.
func TestDirSubAndListDirs(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"base/a/0/x", "base/a/1/y", "base/b/z", "base/f", "other/q"} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	top, err := Open(ctx, "file://"+root, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sub  string
		want []string
	}{{"", []string{"base", "other"}}, {"base", []string{"a", "b"}}, {"base/a", []string{"0", "1"}}, {"base/b", nil}, {"nope", nil}} {
		got, err := ListDirs(ctx, top, c.sub)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ListDirs(%q) = %q, %v; want %q", c.sub, got, err, c.want)
		}
	}
	sub, err := Sub(top, "base/a")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := sub.List(ctx)
	if err != nil || len(objs) != 2 || objs[0].Key != "0/x" || objs[1].Key != "1/y" {
		t.Fatalf("the sub-store lists %+v, %v; want 0/x and 1/y", objs, err)
	}
	buf := make([]byte, objs[0].Size)
	if err := sub.ReadRange(ctx, objs[0], 0, buf); err != nil || string(buf) != "base/a/0/x" {
		t.Errorf("read %q, %v", buf, err)
	}
	if top.Counters() != sub.Counters() {
		t.Error("the sub-store has counters of its own")
	}
	if _, err := sub.Stat(ctx, "../b/z"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a key climbing out of the sub-store: %v, want not found", err)
	}
	for _, bad := range []string{"..", "base/../other", "/base", "base/"} {
		if _, err := Sub(top, bad); err == nil {
			t.Errorf("Sub(%q): no error", bad)
		}
	}
	if _, err := Sub(top, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Sub of a missing directory: %v, want not found", err)
	}
}
