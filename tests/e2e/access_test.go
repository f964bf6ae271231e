package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// Who may use a mount made as root: other users only with --allow-other
// (or, for root and the mounting user alone, --allow-root), and then as
// --uid, --gid, --file-mode and --dir-mode permit, which the kernel
// checks. The other users' commands run through setpriv as nobody.

// accessObjects are the objects of the access tests: a file at the top
// and one in a directory.
func accessObjects() map[string][]byte {
	return map[string][]byte{
		"top.bin":       randomBytes(71, 300<<10),
		"sub/inner.txt": []byte("inner\n"),
	}
}

// accessGID is a group nobody is not in.
const accessGID = 4242

// nobody returns the uid and gid of the user nobody.
func nobody(t *testing.T) (uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the access tests mount as root and run commands as nobody")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skipf("setpriv is needed to run commands as nobody: %v", err)
	}
	return uid, gid
}

// mountShared uploads the access objects to a new bucket and mounts it
// with args on a mountpoint that every user can reach (t.TempDir is
// 0700), unmounting at cleanup.
func mountShared(t *testing.T, args ...string) *harness.Mount {
	t.Helper()
	srv := needServer(t)
	bucket := newBucket(t, srv)
	putObjects(t, srv, bucket, accessObjects())
	base, err := os.MkdirTemp("", "segfs-access-")
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the unmount.
	t.Cleanup(func() { os.RemoveAll(base) })
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil { // MkdirTemp makes it 0700
		t.Fatal(err)
	}
	for dir := base; ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			t.Fatalf("%s (%v) cannot be traversed by other users: set TMPDIR to a directory they can reach", dir, fi.Mode())
		}
		if dir == "/" {
			break
		}
	}
	return harness.StartMountT(t, harness.MountOptions{
		Bin:    needSegfs(t),
		Source: "s3://" + bucket,
		Server: srv,
		Dir:    mnt,
		Args:   args,
	})
}

// runAs runs argv as uid and gid (with no supplementary groups) and
// returns its stdout, and its stderr in the error if it fails.
func runAs(t *testing.T, uid, gid int, argv ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", gid), "--clear-groups", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "setpriv", args...)
	cmd.Env = harness.ChildEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s as %d:%d: %w: %s", strings.Join(argv, " "), uid, gid, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// wantRead fails the test unless uid:gid reads the object key of the
// mount byte-exact.
func wantRead(t *testing.T, m *harness.Mount, uid, gid int, key string) {
	t.Helper()
	got, err := runAs(t, uid, gid, "cat", filepath.Join(m.Dir, key))
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	if want := accessObjects()[key]; !bytes.Equal(got, want) {
		t.Errorf("%s read as %d:%d: %d bytes, want %d bytes byte-exact", key, uid, gid, len(got), len(want))
	}
}

// wantDenied fails the test unless argv, run as uid:gid, fails with
// Permission denied.
func wantDenied(t *testing.T, uid, gid int, argv ...string) {
	t.Helper()
	_, err := runAs(t, uid, gid, argv...)
	if err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("%s as %d:%d: %v; want Permission denied", strings.Join(argv, " "), uid, gid, err)
	}
}

// wantRootReads fails the test unless this process (root) reads every
// object byte-exact.
func wantRootReads(t *testing.T, m *harness.Mount) {
	t.Helper()
	for key, want := range accessObjects() {
		got, err := os.ReadFile(filepath.Join(m.Dir, key))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("root reading %s: %d bytes, %v; want %d bytes byte-exact", key, len(got), err, len(want))
		}
	}
}

// With --allow-other, nobody reads and lists the mount of root.
func TestAccessAllowOther(t *testing.T) {
	uid, gid := nobody(t)
	m := mountShared(t, "--allow-other")
	wantRead(t, m, uid, gid, "top.bin")
	wantRead(t, m, uid, gid, "sub/inner.txt")
	out, err := runAs(t, uid, gid, "ls", m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != "sub top.bin" {
		t.Errorf("ls as nobody: %q, want sub and top.bin", got)
	}
	wantRootReads(t, m)
}

// Without --allow-other, the kernel lets nobody but the mounting user in.
func TestAccessDefaultOwnerOnly(t *testing.T) {
	uid, gid := nobody(t)
	m := mountShared(t)
	wantRootReads(t, m)
	wantDenied(t, uid, gid, "cat", filepath.Join(m.Dir, "top.bin"))
	wantDenied(t, uid, gid, "ls", m.Dir)
	wantDenied(t, uid, gid, "stat", filepath.Join(m.Dir, "top.bin"))
}

// With --allow-root, root (the mounting user) reads and nobody is refused
// by segfs, even for the entries and attributes the kernel saw for root
// just before.
func TestAccessAllowRoot(t *testing.T) {
	uid, gid := nobody(t)
	m := mountShared(t, "--allow-root")
	wantRootReads(t, m)
	if _, err := os.Stat(filepath.Join(m.Dir, "sub", "inner.txt")); err != nil {
		t.Fatal(err)
	}
	wantDenied(t, uid, gid, "cat", filepath.Join(m.Dir, "top.bin"))
	wantDenied(t, uid, gid, "cat", filepath.Join(m.Dir, "sub", "inner.txt"))
	wantDenied(t, uid, gid, "ls", m.Dir)
	// stat(2) asks only for what the kernel caches (stat(1) with its
	// default format also asks for the birth time, which it does not).
	wantDenied(t, uid, gid, "stat", "-c", "%s", filepath.Join(m.Dir, "sub", "inner.txt"))
	wantDenied(t, uid, gid, "stat", filepath.Join(m.Dir, "top.bin"))
	wantDenied(t, uid, gid, "stat", "-f", m.Dir)
	// A file root opened stays readable by the process it hands it to,
	// as with libfuse's allow_root: the open was checked, the reads on
	// it are not (nor the size the kernel asks for at the end). dd, as
	// cat would fstat it, which the kernel sends as a stat of the node.
	path := filepath.Join(m.Dir, "top.bin")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf(`exec setpriv --reuid=%d --regid=%d --clear-groups -- dd bs=64k status=none < "$0"`, uid, gid), path)
	cmd.Env = harness.ChildEnv()
	if got, err := cmd.Output(); err != nil || !bytes.Equal(got, accessObjects()["top.bin"]) {
		t.Errorf("nobody reading top.bin that root opened: %d bytes, %v; want it byte-exact", len(got), err)
	}
	// Root is served on.
	wantRootReads(t, m)
	if out, err := runAs(t, 0, 0, "cat", filepath.Join(m.Dir, "sub", "inner.txt")); err != nil || string(out) != "inner\n" {
		t.Errorf("root through setpriv: %q, %v", out, err)
	}
}

// --uid, --gid, --file-mode and --dir-mode are what stat shows for every
// file and directory, the mount's root included.
func TestAccessOwnerAndModes(t *testing.T) {
	m := mountShared(t, "--uid", "1234", "--gid", "5678", "--file-mode", "440", "--dir-mode", "0o550")
	for _, c := range []struct {
		path string
		mode uint32
	}{
		{m.Dir, syscall.S_IFDIR | 0o550},
		{filepath.Join(m.Dir, "sub"), syscall.S_IFDIR | 0o550},
		{filepath.Join(m.Dir, "top.bin"), syscall.S_IFREG | 0o440},
		{filepath.Join(m.Dir, "sub", "inner.txt"), syscall.S_IFREG | 0o440},
	} {
		var st syscall.Stat_t
		if err := syscall.Stat(c.path, &st); err != nil {
			t.Errorf("stat %s: %v", c.path, err)
			continue
		}
		if st.Uid != 1234 || st.Gid != 5678 || st.Mode != c.mode {
			t.Errorf("%s: uid %d gid %d mode %#o; want 1234, 5678, %#o", c.path, st.Uid, st.Gid, st.Mode, c.mode)
		}
	}
	// Root bypasses the modes.
	wantRootReads(t, m)
}

// The default owner is the mounting user (root here) and the default
// modes are 0444 and 0555.
func TestAccessDefaultOwnerAndModes(t *testing.T) {
	m := mountShared(t)
	for path, mode := range map[string]uint32{
		m.Dir:                                 syscall.S_IFDIR | 0o555,
		filepath.Join(m.Dir, "top.bin"):       syscall.S_IFREG | 0o444,
		filepath.Join(m.Dir, "sub"):           syscall.S_IFDIR | 0o555,
		filepath.Join(m.Dir, "sub/inner.txt"): syscall.S_IFREG | 0o444,
	} {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Errorf("stat %s: %v", path, err)
			continue
		}
		if st.Uid != uint32(os.Getuid()) || st.Gid != uint32(os.Getgid()) || st.Mode != mode {
			t.Errorf("%s: uid %d gid %d mode %#o; want %d, %d, %#o", path, st.Uid, st.Gid, st.Mode, os.Getuid(), os.Getgid(), mode)
		}
	}
}

// With --file-mode 0440 and --gid G, the kernel refuses nobody, who is
// not in G, and lets a member of G read; directories stay open to all.
func TestAccessGroupMode(t *testing.T) {
	uid, gid := nobody(t)
	m := mountShared(t, "--allow-other", "--file-mode", "0440", "--gid", strconv.Itoa(accessGID))
	wantDenied(t, uid, gid, "cat", filepath.Join(m.Dir, "top.bin"))
	wantDenied(t, uid, gid, "cat", filepath.Join(m.Dir, "sub", "inner.txt"))
	if out, err := runAs(t, uid, gid, "ls", filepath.Join(m.Dir, "sub")); err != nil || strings.TrimSpace(string(out)) != "inner.txt" {
		t.Errorf("ls sub as nobody: %q, %v; want inner.txt", out, err)
	}
	wantRead(t, m, uid, accessGID, "top.bin")
	wantRead(t, m, uid, accessGID, "sub/inner.txt")
	wantRootReads(t, m)
}

// segfs status as a user other than root trusts only that user's own
// daemon: a control directory others can write, or a socket another
// user made in the user's directory, is refused before it is dialled,
// while the user's own socket is reached.
func TestStatusTrustsOnlyTheUsersSocket(t *testing.T) {
	uid, gid := nobody(t)
	base, err := os.MkdirTemp("", "segfs-access-") // t.TempDir's parent is 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(base, "mnt") // never mounted: the client looks at the socket first
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	// The socket's name, as segfs names it: a hash of the mountpoint.
	sum := sha256.Sum256([]byte(mp))
	sockName := hex.EncodeToString(sum[:8]) + ".sock"
	// listen serves a status report with no files on dir's socket, owned
	// by owner.
	listen := func(dir string, owner int) {
		ln, err := net.Listen("unix", filepath.Join(dir, sockName))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(filepath.Join(dir, sockName), owner, -1); err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, `{"source":"s3://fake/one","mountpoint":%q}`, mp)
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	status := func(dir string) (string, error) {
		out, err := runAs(t, uid, gid, needSegfs(t), "status", "--control-dir", dir, mp)
		return string(out), err
	}

	open := filepath.Join(base, "open") // root's, and anyone may write in it
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	listen(open, uid)
	if _, err := status(open); err == nil || !strings.Contains(err.Error(), "is not owned by uid") {
		t.Errorf("status through a directory others can write: %v; want it refused", err)
	}

	mine := filepath.Join(base, "mine") // nobody's own, closed to others
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(mine, uid, gid); err != nil {
		t.Fatal(err)
	}
	listen(mine, 0) // a socket root put there
	if _, err := status(mine); err == nil || !strings.Contains(err.Error(), "not this user's segfs") {
		t.Errorf("status through root's socket in the user's directory: %v; want it refused", err)
	}
	if err := os.Lchown(filepath.Join(mine, sockName), uid, -1); err != nil {
		t.Fatal(err)
	}
	if out, err := status(mine); err != nil || !strings.Contains(out, "s3://fake/one") {
		t.Errorf("status through the user's own socket: %q, %v; want the report", out, err)
	}
}
