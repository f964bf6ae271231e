package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segfs/segfs/tests/localstore"
	"golang.org/x/sys/unix"
)

// A resume after the source dropped files (a refresh, a merge): the
// files still in the source that pass their check are kept, those it no
// longer has are removed, with the directories left empty, and the new
// ones fetched; --keep-extra keeps the dropped ones.
func TestRestoreResumeAfterTheSourceMovedOn(t *testing.T) {
	src, dest := t.TempDir(), t.TempDir()
	localstore.WriteTree(t, src, map[string][]byte{"a": []byte("a1"), "d/b": []byte("b1"), "e/c": []byte("c1")})
	if _, code, err := runRestore(t, fileURL(src), dest, "--no-cache"); code != 0 {
		t.Fatalf("first restore: exit %d: %v", code, err)
	}
	for _, n := range []string{"d/b", "e/c"} {
		if err := os.Remove(filepath.Join(src, n)); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(filepath.Join(src, "e"))
	localstore.WriteTree(t, src, map[string][]byte{"d/new": []byte("new"), "f": []byte("f1")})
	// A stale temporary file of a dropped file goes too.
	localstore.WriteTree(t, dest, map[string][]byte{"e/.c.segfs-restore": []byte("half")})

	keep := t.TempDir()
	localstore.WriteTree(t, keep, localstore.ReadTree(t, dest))
	copyMark(t, dest, keep)

	sum, code, err := runRestore(t, fileURL(src), dest, "--no-cache")
	if code != 0 || sum.Skipped != 1 || sum.Restored != 2 {
		t.Fatalf("resume: exit %d, %v, %v; want a skipped, d/new and f restored", code, err, sum)
	}
	sameTree(t, localstore.ReadTree(t, dest), localstore.ReadTree(t, src))
	if _, err := os.Lstat(filepath.Join(dest, "e")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("e/, which no file of the source is in, is still there: %v", err)
	}

	if _, code, err := runRestore(t, fileURL(src), keep, "--no-cache", "--keep-extra"); code != 0 {
		t.Fatalf("resume with --keep-extra: exit %d: %v", code, err)
	}
	want := localstore.ReadTree(t, src)
	want["d/b"], want["e/c"], want["e/.c.segfs-restore"] = []byte("b1"), []byte("c1"), []byte("half")
	sameTree(t, localstore.ReadTree(t, keep), want)
}

// copyMark copies the restoreMark of from to to.
func copyMark(t *testing.T, from, to string) {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(from, restoreMark, buf)
	if err != nil {
		t.Skipf("no user extended attributes here: %v", err)
	}
	if err := unix.Setxattr(to, restoreMark, buf[:n], 0); err != nil {
		t.Fatal(err)
	}
}

// A DEST_DIR whose only entry is an empty lost+found (a new file
// system's root) is taken, and lost+found left as it is; one with files
// in lost+found is refused, untouched.
func TestRestoreIntoAFileSystemRoot(t *testing.T) {
	src, want := plainShard(t)
	dest := t.TempDir()
	if err := os.Mkdir(filepath.Join(dest, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, code, err := runRestore(t, fileURL(src), dest, "--no-cache"); code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	if fi, err := os.Lstat(filepath.Join(dest, "lost+found")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("lost+found after the restore: %v, %v", fi, err)
	}
	sameTree(t, localstore.ReadTree(t, dest), want)
	// And again: a resume of the same source, lost+found beside it.
	if sum, code, err := runRestore(t, fileURL(src), dest, "--no-cache"); code != 0 || sum.Restored != 0 {
		t.Fatalf("resume: exit %d: %v %v", code, err, sum)
	}

	dest2 := t.TempDir()
	localstore.WriteTree(t, dest2, map[string][]byte{"lost+found" + "/#1234": []byte("fsck's")})
	_, code, err := runRestore(t, fileURL(src), dest2, "--no-cache")
	if code != 2 || err == nil || !strings.Contains(err.Error(), "lost+found") {
		t.Errorf("a lost+found with files: exit %d, %v; want 2 naming it", code, err)
	}
	if got := localstore.ReadTree(t, dest2); len(got) != 1 {
		t.Errorf("DEST_DIR changed: %q", got)
	}
}

// A key in the form of restore's temporary names fails alone, named;
// the file whose temporary name it has is restored.
func TestRestoreTempFormKeyFailsAlone(t *testing.T) {
	src, dest := t.TempDir(), t.TempDir()
	localstore.WriteTree(t, src, map[string][]byte{
		"x":                    []byte("the real x"),
		".x.segfs-restore":     []byte("hostile"),
		".d.segfs-restore/y":   []byte("hostile too"),
		"ok/.hidden":           []byte("fine"),
		"ok/x.segfs-restore":   []byte("fine: no leading dot"),
		"ok/.a.segfs-restore~": []byte("fine: another suffix"),
	})
	sum, code, _ := runRestore(t, fileURL(src), dest, "--no-cache")
	if code != 1 || sum == nil || len(sum.Failed) != 2 {
		t.Fatalf("exit %d, %v; want 1 with two failed", code, sum)
	}
	for _, f := range sum.Failed {
		if !strings.Contains(f.Err.Error(), "form of the names segfs restore writes") {
			t.Errorf("%s: %v", f.Name, f.Err)
		}
	}
	want := localstore.ReadTree(t, src)
	delete(want, ".x.segfs-restore")
	delete(want, ".d.segfs-restore/y")
	sameTree(t, localstore.ReadTree(t, dest), want)
}

// A DEST_DIR inside a file:// source is refused, before anything is
// written: each run would nest a copy of the last.
func TestRestoreRefusesDestInsideSource(t *testing.T) {
	src, _ := plainShard(t)
	for _, dest := range []string{filepath.Join(src, "restored"), src} {
		_, code, err := runRestore(t, fileURL(src), dest, "--no-cache")
		if code != 2 || err == nil || !strings.Contains(err.Error(), "inside the source") {
			t.Errorf("DEST_DIR %s: exit %d, %v; want 2, inside the source", dest, code, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(src, "restored")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("something was written: %v", err)
	}
	// Behind a link, too.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(src, link); err != nil {
		t.Fatal(err)
	}
	if _, code, err := runRestore(t, fileURL(src), filepath.Join(link, "sub"), "--no-cache"); code != 2 {
		t.Errorf("DEST_DIR behind a link into the source: exit %d, %v; want 2", code, err)
	}
}

// DEST_DIR holding a restore of another source is refused, though every
// name in it is one of this source's (two shards often share names), and
// so is a directory holding only such names that no restore wrote:
// nothing in either is replaced.
func TestRestoreRefusesAnotherSourcesRestore(t *testing.T) {
	srcA, _ := plainShard(t)
	srcB := t.TempDir()
	localstore.WriteTree(t, srcB, map[string][]byte{
		"index/_0.si": lucenFile(t, "_0.si", 700, 9), // the same name, another file
		"notes.txt":   []byte("shard B\n"),
	})
	dest := t.TempDir()
	if _, code, err := runRestore(t, fileURL(srcB), dest, "--no-cache"); code != 0 {
		t.Fatalf("restore of B: exit %d: %v", code, err)
	}
	before := localstore.ReadTree(t, dest)
	_, code, err := runRestore(t, fileURL(srcA), dest, "--no-cache")
	if code != 2 || err == nil || !strings.Contains(err.Error(), "holds a restore of "+fileURL(srcB)) {
		t.Errorf("restore of A into B's restore: exit %d, %v; want 2 naming B", code, err)
	}
	sameTree(t, localstore.ReadTree(t, dest), before)

	copied := t.TempDir() // B's files, copied without the mark
	localstore.WriteTree(t, copied, before)
	for name := range before { // with their times, as a copy that keeps them
		fi, err := os.Stat(filepath.Join(dest, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(copied, filepath.FromSlash(name)), fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	_, code, err = runRestore(t, fileURL(srcA), copied, "--no-cache")
	if code != 2 || err == nil || !strings.Contains(err.Error(), "no segfs restore wrote it") {
		t.Errorf("restore of A into a copy of B's files: exit %d, %v; want 2, not a restore", code, err)
	}
	sameTree(t, localstore.ReadTree(t, copied), before)
	// The way the error gives through: mark the copy as B's restore.
	if err := unix.Setxattr(copied, restoreMark, []byte(fileURL(srcB)), 0); err != nil {
		t.Fatal(err)
	}
	if sum, code, err := runRestore(t, fileURL(srcB), copied, "--no-cache"); code != 0 || sum.Skipped != len(before) {
		t.Errorf("restore of B into its marked copy: exit %d (%v), %v; want every file skipped", code, err, sum)
	}

	// B again into its own restore: the mark matches, every file skipped.
	sum, code, err := runRestore(t, fileURL(srcB), dest, "--no-cache")
	if code != 0 || sum.Skipped != len(before) {
		t.Errorf("restore of B again: exit %d (%v), %v; want every file skipped", code, err, sum)
	}
}
