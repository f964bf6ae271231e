package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// What segfs does on signals: SIGHUP refreshes the view; SIGINT or SIGTERM
// unmount, serving the files still open for up to --unmount-grace; a
// second one, or the end of the grace, detaches the mount and exits.

// longGrace is the --unmount-grace of the tests where segfs must not wait
// for it: long enough that waiting for it is unmistakable.
const longGrace = 60 * time.Second

// signalObject is the file the signal tests hold open: several parts, so
// that a read after the signal can go to the remote.
var signalObject = randomBytes(81, 4<<20)

// mountSignal uploads signalObject to a new bucket and mounts it with
// 1MiB parts, no prefetch (a read of a new part goes to the remote) and
// args.
func mountSignal(t *testing.T, args ...string) *harness.Mount {
	t.Helper()
	srv := needServer(t)
	bucket := newBucket(t, srv)
	putObjects(t, srv, bucket, map[string][]byte{"held.bin": signalObject})
	return mountS3(t, srv, "s3://"+bucket, append([]string{"--part-size", "1MiB", "--prefetch", "none", "--no-segment-prefetch"}, args...)...)
}

// signalSegfs sends sig to the segfs of m.
func signalSegfs(t *testing.T, m *harness.Mount, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(m.Pid(), sig); err != nil {
		t.Fatalf("kill -%v %d: %v", sig, m.Pid(), err)
	}
}

// waitLog waits until the log of m holds text.
func waitLog(t *testing.T, m *harness.Mount, text string) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !strings.Contains(m.Log(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("segfs did not log %q in %v; log:\n%s", text, hangGuard, m.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantRunning fails the test unless segfs still runs and its mount is
// there.
func wantRunning(t *testing.T, m *harness.Mount) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := m.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("segfs exited (%v); log:\n%s", err, m.Log())
	}
	if ok, err := harness.IsMounted(m.Dir); err != nil || !ok {
		t.Fatalf("%s is not mounted any more (%v)", m.Dir, err)
	}
}

// wantPread fails the test unless f reads n bytes at off byte-exact.
func wantPread(t *testing.T, f *os.File, off int64, n int) {
	t.Helper()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatalf("read %d bytes at %d: %v", n, off, err)
	}
	if !bytes.Equal(buf, signalObject[off:off+int64(n)]) {
		t.Fatalf("read %d bytes at %d: not the object's bytes", n, off)
	}
}

// openHeld opens the held file for the test, and closes it at cleanup
// if the test has not.
func openHeld(t *testing.T, m *harness.Mount) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join(m.Dir, "held.bin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // runs before the mount's cleanup
	return f
}

// waitExit waits up to limit for segfs to exit and returns how long it
// took and its exit error.
func waitExit(t *testing.T, m *harness.Mount, limit time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	err := m.Wait(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("segfs still running %v after it should have exited; log:\n%s", limit, m.Log())
	}
	return time.Since(start), err
}

// SIGHUP refreshes the view (an unchanged store: nothing changes) and
// ends nothing: the mount serves on, the open file included, and
// unmounts cleanly later.
func TestSignalHUPKeepsServing(t *testing.T) {
	m := mountSignal(t)
	f := openHeld(t, m)
	wantPread(t, f, 0, 4096)
	signalSegfs(t, m, syscall.SIGHUP)
	waitLog(t, m, "SIGHUP received; refreshing the view")
	harness.WaitStats(t, m, "the refresh", func(s map[string]int64) bool { return s["refreshes"] == 1 })
	wantRunning(t, m)
	wantPread(t, f, 2<<20+100, 64<<10) // a part not read before: from the remote
	got, err := os.ReadFile(filepath.Join(m.Dir, "held.bin"))
	if err != nil || !bytes.Equal(got, signalObject) {
		t.Fatalf("whole read after SIGHUP: %d bytes, %v", len(got), err)
	}
	f.Close()
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	assertNotMounted(t, m.Dir)
}

// SIGTERM with a file open: segfs serves on, reads from the remote
// included, until the file is closed; then it unmounts and exits 0, long
// before the grace is up.
func TestSignalTERMServesOpenFilesThenUnmounts(t *testing.T) {
	m := mountSignal(t, "--unmount-grace", longGrace.String())
	f := openHeld(t, m)
	wantPread(t, f, 0, 4096)
	before := harness.MustStats(t, m)
	signalSegfs(t, m, syscall.SIGTERM)
	waitLog(t, m, "files are open; serving them until they are closed")
	time.Sleep(300 * time.Millisecond) // a few unmount retries
	wantRunning(t, m)
	wantPread(t, f, 3<<20+4096, 128<<10)
	wantPread(t, f, 1<<20, 1<<20)
	if after := harness.MustStats(t, m); harness.Delta(before, after, "parts_fetched") < 2 {
		t.Errorf("%d parts fetched during the grace, want the 2 parts read", harness.Delta(before, after, "parts_fetched"))
	}
	// Another process that looks the file up and reads it during the
	// grace is served too.
	if got, err := os.ReadFile(filepath.Join(m.Dir, "held.bin")); err != nil || !bytes.Equal(got, signalObject) {
		t.Errorf("whole read during the grace: %d bytes, %v", len(got), err)
	}
	closed := time.Now()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := waitExit(t, m, 15*time.Second)
	took := time.Since(closed)
	t.Logf("segfs exited %v after the last file was closed", took.Round(time.Millisecond))
	if err != nil {
		t.Errorf("segfs exited with %v; log:\n%s", err, m.Log())
	}
	assertNotMounted(t, m.Dir)
	if log := m.Log(); strings.Contains(log, "detach") || !strings.Contains(log, "msg=unmounted") {
		t.Errorf("want a plain unmount, without detaching; log:\n%s", log)
	}
}

// A second SIGTERM during the grace exits at once: the mount is detached
// (gone from mountinfo), and the file still open fails rather than hangs.
func TestSignalSecondTERMExitsAtOnce(t *testing.T) {
	m := mountSignal(t, "--unmount-grace", longGrace.String())
	f := openHeld(t, m)
	wantPread(t, f, 0, 4096)
	signalSegfs(t, m, syscall.SIGTERM)
	waitLog(t, m, "files are open; serving them until they are closed")
	wantRunning(t, m)
	signalSegfs(t, m, syscall.SIGTERM)
	took, err := waitExit(t, m, 15*time.Second)
	t.Logf("segfs exited %v after the second SIGTERM", took.Round(time.Millisecond))
	if err != nil {
		t.Errorf("segfs exited with %v; log:\n%s", err, m.Log())
	}
	if took > 5*time.Second {
		t.Errorf("segfs took %v to exit after the second SIGTERM; want it at once (the grace is %v)", took, longGrace)
	}
	assertNotMounted(t, m.Dir)
	if !strings.Contains(m.Log(), "second signal received; detaching the mount now") {
		t.Errorf("segfs did not log the second signal; log:\n%s", m.Log())
	}
	readFails(t, f)
}

// When the grace ends with a file still open, segfs detaches the mount
// and exits 0; the open file then fails rather than hangs.
func TestSignalTERMGraceEnds(t *testing.T) {
	const grace = 2 * time.Second
	m := mountSignal(t, "--unmount-grace", grace.String())
	f := openHeld(t, m)
	wantPread(t, f, 0, 4096)
	start := time.Now()
	signalSegfs(t, m, syscall.SIGTERM)
	_, err := waitExit(t, m, grace+15*time.Second)
	took := time.Since(start)
	t.Logf("segfs exited %v after SIGTERM with a file open and a grace of %v", took.Round(time.Millisecond), grace)
	if err != nil {
		t.Errorf("segfs exited with %v; log:\n%s", err, m.Log())
	}
	if took < grace {
		t.Errorf("segfs exited %v after SIGTERM, before the grace of %v was up", took, grace)
	}
	assertNotMounted(t, m.Dir)
	if !strings.Contains(m.Log(), "still mounted after --unmount-grace; detaching the mount") {
		t.Errorf("segfs did not log the end of the grace; log:\n%s", m.Log())
	}
	readFails(t, f)
}

// readFails fails the test unless a read of f, a file of a mount whose
// segfs has exited, returns an error within a bounded time.
func readFails(t *testing.T, f *os.File) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		_, err := f.ReadAt(buf, 2<<20)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("a read of the open file succeeded after segfs exited")
		}
	case <-time.After(hangGuard):
		t.Fatalf("a read of the open file still blocked %v after segfs exited", hangGuard)
	}
}
