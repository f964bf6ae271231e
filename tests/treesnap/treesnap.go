// Package treesnap describes a directory tree for tests that must show
// that nothing in it was created, changed or removed.
package treesnap

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// Take describes everything under root without following a symlink:
// each entry's mode, owner, modification time, and content or link
// target, by path relative to root. Two equal snapshots mean nothing was
// created, changed or removed.
func Take(t testing.TB, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode %o uid %d mtime %d", st.Mode, st.Uid, st.Mtim.Nano())
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %q", b)
		}
		rel, _ := filepath.Rel(root, p)
		m[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot of %s: %v", root, err)
	}
	return m
}

// Same fails the test, naming each difference, unless before and after
// are equal.
func Same(t testing.TB, before, after map[string]string) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(before)) {
		if after[p] != before[p] {
			t.Errorf("%s: was %s, now %q", p, before[p], after[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: created (%s)", p, after[p])
		}
	}
}
