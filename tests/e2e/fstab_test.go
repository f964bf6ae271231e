package e2e

// The mount helper form (mount -t fuse.segfs, /etc/fstab), readiness
// notification and the systemd unit.
//
// mount(8) removes PATH from the environment of its helpers, so the
// /bin/sh that mount.fuse3 runs finds `segfs` only in its default PATH
// (/usr/local/sbin first). Rather than install the binary there, the
// helper tests run mount(8) in a mount namespace of their own in which a
// directory holding `segfs` is bound over /usr/local/sbin. The mountpoint
// lies in a shared bind mount that the test makes in its own namespace,
// so the FUSE mount made in the other one propagates back to the test,
// and the test's umount propagates to it.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/mountinfo"
	"github.com/segfs/segfs/tests/harness"
)

// helperTimeout bounds one run of mount(8) or umount(8).
const helperTimeout = 60 * time.Second

// daemonExitTimeout bounds the wait for the daemon to exit once its
// mount is gone.
const daemonExitTimeout = 30 * time.Second

// helperEnv is what the helper tests need: the segfs binary, a directory
// to bind over /usr/local/sbin holding it as `segfs`, and a shared mount
// to mount in.
type helperEnv struct {
	bin    string // the segfs binary, resolved
	binDir string // holds segfs, a symlink to bin
	shared string // a shared bind mount of a temporary directory
}

// needHelperEnv prepares a helperEnv, or skips the test where mount(8),
// mount.fuse3 or unshare(1) is missing or segfs does not run as root.
func needHelperEnv(t *testing.T) *helperEnv {
	t.Helper()
	bin := needSegfs(t)
	if os.Geteuid() != 0 {
		t.Skip("the mount helper form is tested as root: it takes a mount namespace")
	}
	for _, tool := range []string{"mount", "umount", "unshare", "findmnt"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	if _, err := os.Stat("/sbin/mount.fuse3"); err != nil {
		t.Skipf("mount.fuse3 (the fuse3 package) is not installed: %v", err)
	}
	resolved, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	e := &helperEnv{bin: resolved, binDir: filepath.Join(t.TempDir(), "bin"), shared: filepath.Join(t.TempDir(), "shared")}
	if err := os.Mkdir(e.binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(resolved, filepath.Join(e.binDir, "segfs")); err != nil {
		t.Fatal(err)
	}
	makeShared(t, e.shared)
	return e
}

// makeShared makes dir, a new directory, a shared bind mount of itself
// (undone at cleanup): a FUSE mount made below it in another mount
// namespace shows in the test's.
func makeShared(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("make %s shared: %v", dir, err)
	}
}

// newMountpoint makes a directory in the shared mount and, at cleanup,
// stops any segfs still serving it and clears any mount left on it.
func (e *helperEnv) newMountpoint(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(e.shared, "mnt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.clear(t, dir) })
	return dir
}

// clear detaches a mount left at dir (aborting its connection first, so
// that nothing stays blocked on it) and kills the segfs processes serving
// it, waiting for them to be gone.
func (e *helperEnv) clear(t *testing.T, dir string) {
	if ok, _ := harness.IsMounted(dir); ok {
		t.Logf("cleanup: %s is still mounted; detaching it", dir)
		_ = mountinfo.Abort(dir)
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("cleanup: detach %s: %v", dir, err)
		}
	}
	pids := e.daemons(dir)
	for _, pid := range pids {
		t.Logf("cleanup: killing segfs %d", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		if !waitGone(pid, 10*time.Second) {
			t.Errorf("cleanup: segfs %d still runs after SIGKILL", pid)
		}
	}
}

// daemons returns the live segfs processes that have dir among their
// arguments.
func (e *helperEnv) daemons(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() || processGone(pid) {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || exe != e.bin {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && slices.Contains(strings.Split(string(cmdline), "\x00"), dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processGone reports whether pid has exited: no such process, or a
// zombie nobody reaped yet (its parent, the foreground segfs, is gone).
func processGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X'
}

// waitGone waits up to d for pid to exit and reports whether it did.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// mountHelper runs mount(8) with args (`-t fuse.segfs SOURCE DIR -o
// OPTS`, or `--fstab FILE DIR`) and env in a mount namespace where
// /bin/sh finds segfs in its default PATH. mount's stdout and stderr go
// to stderr, an open file, which the daemon keeps as its own; nil means a
// log file in a temporary directory. It returns mount's exit status and,
// for a log file, what it holds when mount has returned.
func (e *helperEnv) mountHelper(t *testing.T, env []string, args []string, stderr *os.File) (int, string) {
	t.Helper()
	var logPath string
	if stderr == nil {
		logPath = filepath.Join(t.TempDir(), "mount.log")
		f, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		stderr = f
	}
	// The bind over /usr/local/sbin must not propagate out of the new
	// namespace: the mount holding that directory is made private in it
	// first (not recursively: the shared mount keeps propagating).
	const script = `set -e
mount --make-private "$(findmnt -n -o TARGET -T /usr/local/sbin)"
mount --bind "$1" /usr/local/sbin
found=$(env -u PATH /bin/sh -c 'command -v segfs')
if [ "$found" != /usr/local/sbin/segfs ]; then
	echo "mount helper test: /bin/sh without PATH finds segfs at '$found', not /usr/local/sbin/segfs" >&2
	exit 97
fi
shift
exec mount "$@"`
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	// Stdout and stderr are a file, not a pipe Go copies from: the daemon
	// keeps them open, so a copying Wait would wait for the daemon.
	cmd := exec.CommandContext(ctx, "unshare", slices.Concat(
		[]string{"--mount", "--propagation", "unchanged", "--", "/bin/sh", "-c", script, "sh", e.binDir}, args)...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = stderr, stderr
	t.Logf("mount %s", strings.Join(args, " "))
	err := cmd.Run()
	var out string
	if logPath != "" {
		b, rerr := os.ReadFile(logPath)
		if rerr != nil {
			t.Fatal(rerr)
		}
		out = string(b)
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("mount did not return within %v; output:\n%s", helperTimeout, out)
	case errors.As(err, &ee):
		if ee.ExitCode() == 97 {
			t.Fatalf("the test's namespace setup failed:\n%s", out)
		}
		return ee.ExitCode(), out
	case err != nil:
		t.Fatal(err)
	}
	return 0, out
}

// helperArgs are mount(8)'s arguments for the helper form.
func helperArgs(source, dir, opts string) []string {
	return []string{"-t", "fuse.segfs", source, dir, "-o", opts}
}

// helperOptions are the -o options that reach the shared server.
func helperOptions(srv *harness.Server, cacheDir string) string {
	return fmt.Sprintf("endpoint=%s,path_style,region=%s,cache_dir=%s", srv.Endpoint(), harness.Region, cacheDir)
}

// TestFstabMount mounts with `mount -t fuse.segfs` and with an fstab
// line (`mount --fstab FILE MOUNTPOINT`, which reads FILE as /etc/fstab):
// mount returns once the mount serves, with the daemon serving in the
// background and logging to mount's stderr; umount unmounts it and the
// daemon exits.
func TestFstabMount(t *testing.T) {
	srv := needServer(t)
	e := needHelperEnv(t)
	bucket := newBucket(t, srv)
	data := randomBytes(11, 3<<20+12345)
	if _, err := srv.PutBytes(context.Background(), bucket, "dir/data.bin", data); err != nil {
		t.Fatal(err)
	}
	t.Run("mount -t", func(t *testing.T) {
		dir := e.newMountpoint(t)
		// No ro: mount(8) then passes rw.
		opts := "noatime," + helperOptions(srv, filepath.Join(t.TempDir(), "cache")) + ",part_size=1MiB"
		testHelperMount(t, e, srv, helperArgs("s3://"+bucket, dir, opts), dir, data)
	})
	t.Run("fstab line", func(t *testing.T) {
		dir := e.newMountpoint(t)
		opts := "ro,_netdev,nofail,allow_other,x-systemd.mount-timeout=30," + helperOptions(srv, filepath.Join(t.TempDir(), "cache"))
		fstab := filepath.Join(t.TempDir(), "fstab")
		line := fmt.Sprintf("# segfs\ns3://%s %s fuse.segfs %s 0 0\n", bucket, dir, opts)
		if err := os.WriteFile(fstab, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		testHelperMount(t, e, srv, []string{"--fstab", fstab, dir}, dir, data)
	})
}

// testHelperMount runs mount(8) with args, which mount at dir the bucket
// holding data as dir/data.bin, then umount(8).
func testHelperMount(t *testing.T, e *helperEnv, srv *harness.Server, args []string, dir string, data []byte) {
	logPath := filepath.Join(t.TempDir(), "mount.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	readLog := func() string {
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	code, _ := e.mountHelper(t, harness.ChildEnv(srv.Env()...), args, logf)
	if code != 0 {
		t.Fatalf("mount exited with status %d; output:\n%s", code, readLog())
	}

	// mount has returned: the mount must serve already.
	if ok, err := harness.IsMounted(dir); err != nil || !ok {
		t.Fatalf("mount returned but %s is not a FUSE mount (%v); output:\n%s", dir, err, readLog())
	}
	if out := readLog(); !strings.Contains(out, "msg=mounted") {
		t.Errorf("mount's output lacks the daemon's mounted line:\n%s", out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "dir", "data.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes that differ from the %d uploaded", len(got), len(data))
	}

	pids := e.daemons(dir)
	if len(pids) != 1 {
		t.Fatalf("want one segfs serving %s, found %v", dir, pids)
	}
	pid := pids[0]
	checkDaemon(t, pid)

	umountDaemon(t, dir, pid)
	if out := readLog(); !strings.Contains(out, "msg=unmounted") || !strings.Contains(out, "msg=summary") {
		t.Errorf("the daemon did not log its unmount and summary after umount:\n%s", out)
	}
}

// umountDaemon unmounts dir with umount(8), as an operator does, and
// fails the test unless the daemon pid then exits and nothing is left
// mounted there.
func umountDaemon(t *testing.T, dir string, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	if b, err := exec.CommandContext(ctx, "umount", dir).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v: %s", dir, err, b)
	}
	if !waitGone(pid, daemonExitTimeout) {
		t.Fatalf("segfs %d still runs %v after umount", pid, daemonExitTimeout)
	}
	assertNotMounted(t, dir)
}

// checkDaemon checks that pid runs as a daemon: in a session of its own,
// reading /dev/null.
func checkDaemon(t *testing.T, pid int) {
	t.Helper()
	sid, err := unix.Getsid(pid)
	if err != nil {
		t.Fatal(err)
	}
	if sid != pid {
		t.Errorf("segfs %d is in session %d, want its own", pid, sid)
	}
	if in, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", pid)); err != nil || in != "/dev/null" {
		t.Errorf("segfs %d reads %q (%v), want /dev/null", pid, in, err)
	}
}

// TestFstabDaemonOutlivesItsStderr closes the reading end of the pipe the
// daemon writes its log to once mount has returned, as a caller over ssh
// does by going away. The daemon must go on serving: writes to its stderr
// then fail instead of killing it with SIGPIPE.
func TestFstabDaemonOutlivesItsStderr(t *testing.T) {
	srv := needServer(t)
	e := needHelperEnv(t)
	bucket := newBucket(t, srv)
	data := randomBytes(12, 100_000)
	if _, err := srv.PutBytes(context.Background(), bucket, "data.bin", data); err != nil {
		t.Fatal(err)
	}
	dir := e.newMountpoint(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "msg=mounted") {
				return // stop reading: the daemon's log now fills and breaks the pipe
			}
		}
	}()
	// Every FUSE request is logged: each access below writes to stderr.
	opts := helperOptions(srv, filepath.Join(t.TempDir(), "cache")) + ",debug,log_level=debug"
	code, _ := e.mountHelper(t, harness.ChildEnv(srv.Env()...), helperArgs("s3://"+bucket, dir, opts), w)
	w.Close()
	select {
	case <-copied:
	case <-time.After(10 * time.Second):
		t.Fatal("no mounted line on the daemon's stderr")
	}
	r.Close() // the pipe has no reader now
	if code != 0 {
		t.Fatalf("mount exited with status %d; output:\n%s", code, out.String())
	}
	pids := e.daemons(dir)
	if len(pids) != 1 {
		t.Fatalf("want one segfs serving %s, found %v", dir, pids)
	}
	for i := range 20 {
		got, err := os.ReadFile(filepath.Join(dir, "data.bin"))
		if err != nil {
			t.Fatalf("read %d after the daemon's stderr lost its reader: %v", i, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("read %d: bytes differ", i)
		}
		if _, err := os.ReadDir(dir); err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
	}
	if processGone(pids[0]) {
		t.Fatal("the daemon died once its stderr lost its reader")
	}
	umountDaemon(t, dir, pids[0])
}

// TestFstabReturnsTheCallersOutput runs mount with its output on a pipe,
// as ssh and `$(mount ...)` do: the pipe must end once mount has
// returned, holding the daemon's log up to the mount, and the daemon must
// hold neither it nor the caller's directory.
func TestFstabReturnsTheCallersOutput(t *testing.T) {
	srv := needServer(t)
	e := needHelperEnv(t)
	bucket := newBucket(t, srv)
	if _, err := srv.PutBytes(context.Background(), bucket, "data.bin", []byte("piped\n")); err != nil {
		t.Fatal(err)
	}
	dir := e.newMountpoint(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		read <- b
	}()
	code, _ := e.mountHelper(t, harness.ChildEnv(srv.Env()...), helperArgs("s3://"+bucket, dir, helperOptions(srv, filepath.Join(t.TempDir(), "cache"))), w)
	w.Close()
	var out []byte
	select {
	case out = <-read:
	case <-time.After(10 * time.Second):
		t.Errorf("mount's output pipe still open 10s after mount returned: the daemon holds it")
	}
	if code != 0 {
		t.Fatalf("mount exited with status %d; output:\n%s", code, out)
	}
	if !bytes.Contains(out, []byte("msg=mounted")) {
		t.Errorf("mount's output lacks the daemon's mounted line:\n%s", out)
	}
	pids := e.daemons(dir)
	if len(pids) != 1 {
		t.Fatalf("want one segfs serving %s, found %v", dir, pids)
	}
	for fd, want := range map[string]string{"cwd": "/", "fd/1": "/dev/null"} {
		if got, err := os.Readlink(fmt.Sprintf("/proc/%d/%s", pids[0], fd)); err != nil || got != want {
			t.Errorf("segfs %d: %s is %q (%v), want %s", pids[0], fd, got, err, want)
		}
	}
	if got, err := os.ReadFile(filepath.Join(dir, "data.bin")); err != nil || string(got) != "piped\n" {
		t.Errorf("read after mount returned: %q, %v", got, err)
	}
	umountDaemon(t, dir, pids[0])
}

// TestFstabMountFails checks that a mount that cannot be made makes mount
// fail with segfs's reason and leaves neither a mount nor a process.
func TestFstabMountFails(t *testing.T) {
	srv := needServer(t)
	e := needHelperEnv(t)
	bucket := newBucket(t, srv)
	for _, c := range []struct {
		name, source, opts string
		want               string // in the output, ignoring case
	}{
		{"missing bucket", "s3://no-such-bucket-here/prefix", "", "no such bucket"},
		{"unknown option", "s3://" + bucket, ",no_such_option=1", "-o no_such_option"},
		{"bad value", "s3://" + bucket, ",part_size=lots", "-o part_size"},
		// Refused before the daemon starts: --version would print to
		// the daemon's /dev/null and exit 0 without mounting.
		{"version option", "s3://" + bucket, ",version", "-o version: not a mount option"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := e.newMountpoint(t)
			opts := helperOptions(srv, filepath.Join(t.TempDir(), "cache")) + c.opts
			code, out := e.mountHelper(t, harness.ChildEnv(srv.Env()...), helperArgs(c.source, dir, opts), nil)
			t.Logf("mount exited with status %d: %s", code, strings.TrimSpace(out))
			if code == 0 {
				t.Errorf("mount exited with status 0")
			}
			if !containsAny(out, strings.ToLower(c.want)) {
				t.Errorf("output does not say %q:\n%s", c.want, out)
			}
			assertNotMounted(t, dir)
			if pids := e.daemons(dir); len(pids) > 0 {
				t.Errorf("segfs processes %v still run for %s", pids, dir)
			}
		})
	}
}

// notifyListener is a unixgram socket standing in for systemd's notify
// socket. For each READY=1 it records, as it receives it, whether the
// mount was serving then.
type notifyListener struct {
	conn *net.UnixConn
	dir  string // the mountpoint, checked at READY=1
	file string // a file in it, stat'ed at READY=1

	mu       sync.Mutex
	messages []string // guarded by mu
	readyErr error    // guarded by mu; why the mount did not serve at READY=1
	changed  chan struct{}
}

func listenNotify(t *testing.T, path, dir, file string) *notifyListener {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	l := &notifyListener{conn: conn, dir: dir, file: file, changed: make(chan struct{}, 1)}
	done := make(chan struct{})
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			msg := string(buf[:n])
			var readyErr error
			if slices.Contains(strings.Split(msg, "\n"), "READY=1") {
				readyErr = l.serving()
			}
			l.mu.Lock()
			l.messages = append(l.messages, msg)
			if readyErr != nil && l.readyErr == nil {
				l.readyErr = readyErr
			}
			l.mu.Unlock()
			select {
			case l.changed <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

// serving checks that the mount serves: it is in mountinfo and a file in
// it can be stat'ed.
func (l *notifyListener) serving() error {
	e, ok, err := mountinfo.Find(l.dir)
	switch {
	case err != nil:
		return err
	case !ok || e.FsType != segfs.FuseType:
		return fmt.Errorf("%s is not a segfs mount (%q)", l.dir, e.FsType)
	}
	if _, err := os.Stat(l.file); err != nil {
		return err
	}
	return nil
}

// waitFor waits up to d for a message holding the assignment want.
func (l *notifyListener) waitFor(t *testing.T, want string, d time.Duration) string {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		for _, m := range l.messages {
			if slices.Contains(strings.Split(m, "\n"), want) {
				l.mu.Unlock()
				return m
			}
		}
		msgs := slices.Clone(l.messages)
		l.mu.Unlock()
		select {
		case <-l.changed:
		case <-deadline.C:
			t.Fatalf("no %s within %v; received %q", want, d, msgs)
		}
	}
}

// TestNotifyReady runs segfs mount under a stand-in for systemd's notify
// socket: READY=1 must come once the mount serves, with a STATUS naming
// it, and STOPPING=1 when SIGTERM unmounts it.
func TestNotifyReady(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	if _, err := srv.PutBytes(context.Background(), bucket, "a/file", []byte("notify\n")); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	sock := filepath.Join(tmp, "notify-"+hex.EncodeToString(suffix[:]))
	l := listenNotify(t, sock, dir, filepath.Join(dir, "a", "file"))

	m := harness.StartMountT(t, harness.MountOptions{
		Bin:    needSegfs(t),
		Source: "s3://" + bucket,
		Server: srv,
		Env:    append(srv.Env(), "NOTIFY_SOCKET="+sock),
		Dir:    dir,
	})
	ready := l.waitFor(t, "READY=1", 30*time.Second)
	l.mu.Lock()
	readyErr := l.readyErr
	l.mu.Unlock()
	if readyErr != nil {
		t.Errorf("the mount did not serve when READY=1 came: %v", readyErr)
	}
	if want := regexp.MustCompile(`(?m)^STATUS=serving s3://` + regexp.QuoteMeta(bucket) + ` .*at ` + regexp.QuoteMeta(dir) + `$`); !want.MatchString(ready) {
		t.Errorf("READY=1 came with %q, want a STATUS matching %s", ready, want)
	}

	if err := m.Unmount(); err != nil { // SIGTERM; an error unless a clean exit 0
		t.Fatal(err)
	}
	l.waitFor(t, "STOPPING=1", 5*time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	index := func(assignment string) int {
		return slices.IndexFunc(l.messages, func(m string) bool {
			return slices.Contains(strings.Split(m, "\n"), assignment)
		})
	}
	if index("READY=1") > index("STOPPING=1") {
		t.Errorf("received %q, want READY=1 before STOPPING=1", l.messages)
	}
}

// A mountpoint named through a symlink is mounted on the link's target,
// and segfs names it so from the start: READY=1 comes (readiness finds
// the mount in mountinfo), and status and unmount reach it by either
// name.
func TestMountThroughSymlink(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	if _, err := srv.PutBytes(context.Background(), bucket, "a/file", []byte("linked\n")); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	real := filepath.Join(tmp, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink("real", link); err != nil { // relative, as operators make them
		t.Fatal(err)
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	sock := filepath.Join(tmp, "notify-"+hex.EncodeToString(suffix[:]))
	l := listenNotify(t, sock, link, filepath.Join(link, "a", "file"))
	m := harness.StartMountT(t, harness.MountOptions{
		Bin:    needSegfs(t),
		Source: "s3://" + bucket,
		Server: srv,
		Env:    append(srv.Env(), "NOTIFY_SOCKET="+sock),
		Dir:    link,
	})
	l.waitFor(t, "READY=1", 30*time.Second)
	if e, ok, err := mountinfo.Find(real); err != nil || !ok || e.FsType != segfs.FuseType {
		t.Fatalf("mountinfo at %s: %+v, %v, %v; want the segfs mount", real, e, ok, err)
	}
	for _, name := range []string{link, real} {
		if out, errs, code := segfsCmd(t, "status", name); code != 0 || !strings.Contains(out, "s3://"+bucket) {
			t.Errorf("segfs status %s: exit %d: %s%s", name, code, out, errs)
		}
	}
	if out, errs, code := segfsCmd(t, "unmount", link); code != 0 {
		t.Errorf("segfs unmount %s: exit %d: %s%s", link, code, out, errs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), harness.UnmountGrace)
	defer cancel()
	if err := m.Wait(ctx); err != nil {
		t.Errorf("daemon after segfs unmount: %v\n%s", err, m.Log())
	}
	assertNotMounted(t, real)
}

// TestSystemdUnitVerifies runs systemd-analyze verify on
// dist/segfs@.service.in as make install writes it for /usr/local, its
// commands then pointed at the built binary and its
// EnvironmentFile at a copy of dist/segfs.env.example. A copy with an
// unknown key must draw a complaint, so that a quiet verify means
// something.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	b := harness.RequireSegfs(t)
	in, err := os.ReadFile(filepath.Join(b.Root, "dist", "segfs@.service.in"))
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.NewReplacer("@BINDIR@", "/usr/local/bin", "@DOCDIR@", "/usr/local/share/doc/segfs").Replace(string(in))
	for _, want := range []string{"\nType=notify\n", "\nNotifyAccess=main\n", "\nEnvironmentFile=/etc/segfs/%i.env\n",
		"\nExecStart=/usr/local/bin/segfs mount $SEGFS_OPTIONS ${SEGFS_SOURCE} ${SEGFS_MOUNTPOINT}\n",
		"\nExecReload=/bin/kill -HUP $MAINPID\n",
		"\nExecStopPost=-/usr/local/bin/segfs unmount --lazy ${SEGFS_MOUNTPOINT}\n", "\nTimeoutStopSec=30\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks the line %q", strings.TrimSpace(want))
		}
	}
	example, err := os.ReadFile(filepath.Join(b.Root, "dist", "segfs.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	envFile := filepath.Join(tmp, "test.env")
	if err := os.WriteFile(envFile, example, 0o600); err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(unit, "/usr/local/bin/segfs", b.Segfs)
	text = strings.ReplaceAll(text, "/etc/segfs/%i.env", envFile)

	complaints := verifyUnit(t, analyze, filepath.Join(tmp, "segfs@test.service"), text)
	if len(complaints) > 0 {
		t.Errorf("systemd-analyze verify complains about the unit:\n%s", strings.Join(complaints, "\n"))
	}
	broken := strings.Replace(text, "\nType=notify\n", "\nType=notify\nNoSuchKey=1\n", 1)
	if c := verifyUnit(t, analyze, filepath.Join(tmp, "segfs@broken.service"), broken); len(c) == 0 {
		t.Error("systemd-analyze verify said nothing about a unit with an unknown key")
	}
}

// verifyUnit writes text to path, runs systemd-analyze verify on it and
// returns the lines it printed about the unit.
func verifyUnit(t *testing.T, analyze, path, text string) []string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", "--man=no", path).CombinedOutput()
	t.Logf("systemd-analyze verify %s: %v\n%s", filepath.Base(path), err, out)
	if ctx.Err() != nil {
		t.Fatalf("systemd-analyze verify did not finish within a minute")
	}
	var complaints []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && !hostUnitLine(line) {
			complaints = append(complaints, line)
		}
	}
	if err != nil && len(complaints) == 0 {
		complaints = append(complaints, fmt.Sprintf("(exit: %v, nothing printed about the unit)", err))
	}
	return complaints
}

// hostUnitLine reports whether a line systemd-analyze verify printed is
// about one of the host's own unit files rather than ours: verify also
// loads the units ours names (network-online.target, multi-user.target
// and what they pull in), and a host's may draw warnings of their own.
// Those lines start with the path of that unit file, always in a systemd
// directory; ours is in a temporary directory, so no line about it is
// ignored.
func hostUnitLine(line string) bool {
	for _, dir := range []string{"/etc/systemd/", "/run/systemd/", "/usr/lib/systemd/", "/lib/systemd/"} {
		if strings.HasPrefix(line, dir) {
			return true
		}
	}
	return false
}
