package fs

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/reader"
)

// A key that is not a clean path hides nothing but itself: "a//b" and
// "a/." do not make "a" a directory and so do not hide the file "a".

// Entries, what the engine serves (and --prefetch all fetches), are the
// shown files only.
func TestRootEntriesAreTheShownFiles(t *testing.T) {
	entries := []entry.Entry{
		{Name: "a", Obj: fetcher.Object{Key: "a", Size: 1}},
		{Name: "../x", Obj: fetcher.Object{Key: "../x", Size: 1}},
		{Name: "b", Obj: fetcher.Object{Key: "b.zst", Size: 1}},
	}
	root := NewRoot(entries, nil, DefaultAttr(), slog.New(slog.DiscardHandler))
	var keys []string
	for _, e := range root.Entries() {
		keys = append(keys, e.Obj.Key)
	}
	if want := []string{"a", "b.zst"}; !slices.Equal(keys, want) {
		t.Fatalf("objects %q, want %q", keys, want)
	}
}

// TreeBytesPerKey bounds what the tree and its listing cost per listed
// key; the mount's memory bound counts it (cmd/segfs).
func TestTreeMemoryPerKey(t *testing.T) {
	const n = 200_000 // the cost per key does not depend on the count
	r, _ := newTestReader(t, nil, reader.Config{})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	// Keys shaped like a shard's: 16 directories of segment files with
	// 40-byte names.
	objs := make([]fetcher.Object, n)
	for i := range objs {
		objs[i] = fetcher.Object{Key: fmt.Sprintf("indices/%02d/_%07d_Lucene90_0.tim", i%16, i), ETag: `"0123456789abcdef0123456789abcdef"`, Size: int64(i)}
	}
	entries := make([]entry.Entry, n)
	for i, o := range objs {
		entries[i] = entry.Entry{Name: o.Key, Obj: o}
	}
	objs = nil
	root := NewRoot(entries, r, DefaultAttr(), slog.New(slog.DiscardHandler))
	entries = nil
	gofs.NewNodeFS(root, &gofs.Options{}) // builds the tree (OnAdd)
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(n)
	t.Logf("%d keys: %d bytes of heap per key, built in %v", n, per, took.Round(time.Millisecond))
	if per > TreeBytesPerKey {
		t.Fatalf("the tree costs %d bytes per key, more than TreeBytesPerKey (%d) that the memory bound counts", per, TreeBytesPerKey)
	}
	runtime.KeepAlive(root)
}

// A listing of a million keys mounts: another process lists a directory
// of it and stats a file. The process's peak RSS is logged for the docs.
func TestMountOfAMillionKeys(t *testing.T) {
	if os.Geteuid() != 0 || testing.Short() {
		t.Skip("needs root (a direct FUSE mount) and the long run")
	}
	const n, dirs = 1_000_000, 16
	r, _ := newTestReader(t, nil, reader.Config{})
	entries := make([]entry.Entry, n)
	for i := range entries {
		o := fetcher.Object{Key: fmt.Sprintf("d%02d/_%07d_Lucene90_0.tim", i%dirs, i), ETag: `"0123456789abcdef0123456789abcdef"`, Size: int64(i)}
		entries[i] = entry.Entry{Name: o.Key, Obj: o}
	}
	root := NewRoot(entries, r, DefaultAttr(), slog.New(slog.DiscardHandler))
	entries = nil
	mnt := t.TempDir()
	server, err := Mount(mnt, root, MountConfig{FsName: "mem://million", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Unmount() })
	// The reads run in a child process: this one serves them.
	out, err := exec.Command("sh", "-c", "ls "+mnt+"/d07 | wc -l && stat -c %s "+mnt+"/d15/_0999999_Lucene90_0.tim").CombinedOutput()
	if err != nil {
		t.Fatalf("reading the mount: %v: %s", err, out)
	}
	if got, want := strings.Fields(string(out)), []string{fmt.Sprint(n / dirs), "999999"}; !slices.Equal(got, want) {
		t.Fatalf("the mount shows %q, want %q (files in d07, size of the last file)", got, want)
	}
	if err := server.Unmount(); err != nil {
		t.Fatal(err)
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			t.Logf("a million keys mounted and listed; peak RSS of the process: %s", strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")))
		}
	}
}

// Every node of the tree has its own inode number, above the root's and
// never 0, and a tree of the same listing numbers its nodes the same.
func TestTreeInodeNumbers(t *testing.T) {
	keys := []string{"idx/0/_0.cfs", "idx/0/_0.si", "idx/1/segments_2", "idx/write.lock", "top", "z/y/x/w"}
	inos := func() map[string]uint64 {
		var entries []entry.Entry
		for _, k := range keys {
			entries = append(entries, entry.Entry{Name: k, Obj: fetcher.Object{Key: k, ETag: `"e"`, Size: 1}})
		}
		root := NewRoot(entries, nil, DefaultAttr(), slog.New(slog.DiscardHandler))
		gofs.NewNodeFS(root, &gofs.Options{RootStableAttr: &gofs.StableAttr{Ino: RootIno}})
		out := map[string]uint64{}
		var walk func(dir string, n *gofs.Inode)
		walk = func(dir string, n *gofs.Inode) {
			out[dir] = n.StableAttr().Ino
			for name, child := range n.Children() {
				walk(path.Join(dir, name), child)
			}
		}
		walk("/", &root.Inode)
		return out
	}
	first := inos()
	if first["/"] != RootIno {
		t.Errorf("the root has inode %d, want %d", first["/"], RootIno)
	}
	// The files and the directories idx, idx/0, idx/1, z, z/y, z/y/x.
	if want := 1 + len(keys) + 6; len(first) != want {
		t.Fatalf("the tree has %d nodes, want %d: %v", len(first), want, first)
	}
	byIno := map[uint64]string{}
	for p, ino := range first {
		// Small numbers: a 32-bit stat would fail with EOVERFLOW on
		// go-fuse's automatic ones (from 2^63), which are negative to a
		// signed 64-bit reader too.
		if ino == 0 || (ino == RootIno) != (p == "/") || ino > uint64(len(first)) {
			t.Errorf("%s has inode %d", p, ino)
		}
		if other, ok := byIno[ino]; ok {
			t.Errorf("%s and %s share inode %d", p, other, ino)
		}
		byIno[ino] = p
	}
	if again := inos(); !maps.Equal(first, again) {
		t.Errorf("two trees of one listing number their nodes differently:\n%v\n%v", first, again)
	}
}
