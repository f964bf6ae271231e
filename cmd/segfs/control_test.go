package main

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segfs/segfs/entry"
)

func TestSelectEntries(t *testing.T) {
	var entries []entry.Entry
	for _, n := range []string{"idx/_0.cfs", "idx/_0.si", "idx2/x", "top"} {
		entries = append(entries, entry.Entry{Name: n})
	}
	names := func(es []entry.Entry) string {
		var out []string
		for _, e := range es {
			out = append(out, e.Name)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		paths []string
		want  string
		err   string
	}{
		{nil, "idx/_0.cfs idx/_0.si idx2/x top", ""},
		{[]string{"."}, "idx/_0.cfs idx/_0.si idx2/x top", ""},
		{[]string{"idx"}, "idx/_0.cfs idx/_0.si", ""}, // not idx2: a directory is a whole name
		{[]string{"idx/", "idx/_0.si", "top"}, "idx/_0.cfs idx/_0.si top", ""},
		{[]string{"nope"}, "", "nope: no such file"},
		{[]string{"../etc"}, "", "outside the mount"},
		{[]string{"id"}, "", "no such file"},
	} {
		got, err := selectEntries(entries, c.paths)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%v: err %v, want %q", c.paths, err, c.err)
		case c.err == "" && (err != nil || names(got) != c.want):
			t.Errorf("%v: %q, %v; want %q", c.paths, names(got), err, c.want)
		}
	}
}

func TestRelToMount(t *testing.T) {
	mnt := t.TempDir()
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		filepath.Join(mnt, "d"): "d",
		mnt:                     ".",
		"d/x":                   "d/x", // not in the working directory: a path in the mount
	} {
		got, err := relToMount(mnt, in)
		if err != nil || got != want {
			t.Errorf("relToMount(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := relToMount(mnt, "/etc/passwd"); err == nil {
		t.Error("a path outside the mount was accepted")
	}
}

// The control directory must be the user's own and closed to others.
func TestOwnDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ctl")
	if err := ownDir(dir); err != nil {
		t.Fatalf("a fresh directory: %v", err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("created with mode %o", fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(open, 0o777)
	if err := ownDir(open); err == nil || !strings.Contains(err.Error(), "others") {
		t.Errorf("a directory others may write: %v", err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := ownDir(link); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlink: %v", err)
	}
	// Two mountpoints, two sockets; the same one spelled twice, one.
	f := controlFlags{ControlDir: dir}
	a, _ := f.socketPath(filepath.Join(base, "m1"))
	b, _ := f.socketPath(filepath.Join(base, "m2"))
	c, _ := f.socketPath(filepath.Join(base, ".", "m1"))
	if a == b || a != c || filepath.Dir(a) != dir {
		t.Errorf("socket paths %s %s %s", a, b, c)
	}
}

// A socket no daemon listens on is removed; a live one, and files
// that are not segfs's sockets, are left.
func TestSweepStaleSockets(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "00112233445566aa.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stale := filepath.Join(dir, "00112233445566bb.sock")
	l2, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l2.(*net.UnixListener).SetUnlinkOnClose(false)
	l2.Close() // the socket file stays, with nobody listening
	other := filepath.Join(dir, "notes.sock")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sweepStaleSockets(dir, slog.New(slog.DiscardHandler))
	for p, want := range map[string]bool{live: true, stale: false, other: true} {
		_, err := os.Lstat(p)
		if got := err == nil; got != want {
			t.Errorf("%s: present %v, want %v", filepath.Base(p), got, want)
		}
	}
}
