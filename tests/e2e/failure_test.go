package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// mountFails runs segfs mount with opts and expects it to exit non-zero
// before mounting, leaving nothing mounted. It returns segfs's output.
func mountFails(t *testing.T, opts harness.MountOptions) string {
	t.Helper()
	opts.Bin = needSegfs(t)
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	m, err := harness.StartMount(context.Background(), opts)
	if err == nil {
		t.Cleanup(func() { m.Kill() })
		t.Fatalf("segfs mounted %s at %s; want it to exit with an error", opts.Source, m.Dir)
	}
	var exit *harness.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("want segfs to exit before mounting, got: %v", err)
	}
	if exit.Code == 0 {
		t.Errorf("segfs exited with status 0; want non-zero. Output:\n%s", exit.Log)
	}
	if opts.Dir != "" {
		assertNotMounted(t, opts.Dir)
	}
	t.Logf("segfs said: %s", strings.TrimSpace(exit.Log))
	return exit.Log
}

// containsAny reports whether s contains any of subs, ignoring case.
func containsAny(s string, subs ...string) bool {
	s = strings.ToLower(s)
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestMountMissingBucket(t *testing.T) {
	srv := needServer(t)
	out := mountFails(t, harness.MountOptions{Source: "s3://no-such-bucket-here/prefix", Server: srv, Dir: t.TempDir()})
	if !containsAny(out, "no such bucket") {
		t.Errorf("output does not say %q:\n%s", "no such bucket", out)
	}
}

func TestMountWrongCredentials(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	out := mountFails(t, harness.MountOptions{
		Source: "s3://" + bucket,
		Server: srv,
		Env:    harness.SetEnv(srv.Env(), "AWS_SECRET_ACCESS_KEY", "wrong"+srv.SecretKey()),
		Dir:    t.TempDir(),
	})
	if !containsAny(out, "credential", "access denied") {
		t.Errorf("output mentions neither credentials nor access denied:\n%s", out)
	}
}

func TestMountMissingMountpoint(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	dir := filepath.Join(t.TempDir(), "does-not-exist")
	out := mountFails(t, harness.MountOptions{Source: "s3://" + bucket, Server: srv, Dir: dir})
	if !containsAny(out, strings.ToLower(dir), "mountpoint", "mount point") {
		t.Errorf("output names neither the mountpoint nor the path %s:\n%s", dir, out)
	}
}

func TestMountBadSource(t *testing.T) {
	needSegfs(t)
	for _, source := range []string{"http://x", "s3://", "gs://bucket/prefix", "not a url"} {
		t.Run(source, func(t *testing.T) {
			mountFails(t, harness.MountOptions{Source: source, Dir: t.TempDir()})
		})
	}
}

// TestObjectChangedAfterMount overwrites an object after part 0 was read:
// a later part must then fail with ESTALE, and no read may return the new
// bytes, alone or mixed with the old.
func TestObjectChangedAfterMount(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	const size = 32 << 20
	oldData, newData := randomBytes(1, size), randomBytes(2, size)
	ctx := context.Background()
	if _, err := srv.PutBytes(ctx, bucket, "_0.fdt", oldData); err != nil {
		t.Fatal(err)
	}
	// No background prefetch: the parts not read must still be remote.
	m := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB", "--prefetch", "none")
	f, err := os.Open(filepath.Join(m.Dir, "_0.fdt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, oldData[:4096]) {
		t.Fatal("part 0 differs from the uploaded object")
	}

	if _, err := srv.PutBytes(ctx, bucket, "_0.fdt", newData); err != nil {
		t.Fatal(err)
	}

	// The last part cannot have been fetched yet: it must fail.
	off := int64(size - testPartSize + 1234)
	_, err = f.ReadAt(buf, off)
	switch {
	case errors.Is(err, syscall.ESTALE):
	case err != nil:
		t.Errorf("read of an unread part after the overwrite: %v, want ESTALE", err)
	case bytes.Equal(buf, newData[off:off+4096]):
		t.Errorf("read of an unread part after the overwrite returned the NEW bytes; want ESTALE")
	default:
		t.Errorf("read of an unread part after the overwrite succeeded; want ESTALE")
	}

	// Wherever the reads land, they return old bytes or ESTALE, never new
	// bytes or a mix.
	for _, off := range []int64{0, testPartSize - 100, 5*testPartSize + 7, 16 * testPartSize, size - 4096} {
		n, err := f.ReadAt(buf, off)
		got := buf[:n]
		switch {
		case errors.Is(err, syscall.ESTALE):
		case err != nil:
			t.Errorf("read at %d: %v, want old bytes or ESTALE", off, err)
		case !bytes.Equal(got, oldData[off:off+int64(n)]):
			t.Errorf("read at %d returned bytes that are not the old object's (new: %v)", off, bytes.Equal(got, newData[off:off+int64(n)]))
		}
	}
}

func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	var key [32]byte
	key[0] = byte(seed)
	rand.NewChaCha8(key).Read(b)
	return b
}

// TestReadOnly checks that every kind of write fails with EROFS.
func TestReadOnly(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	if _, err := srv.PutBytes(context.Background(), bucket, "dir/file", []byte("content\n")); err != nil {
		t.Fatal(err)
	}
	m := mountS3(t, srv, "s3://"+bucket)
	file := filepath.Join(m.Dir, "dir", "file")
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"open O_WRONLY", func() error { return openClose(file, os.O_WRONLY) }},
		{"open O_RDWR", func() error { return openClose(file, os.O_RDWR) }},
		{"open O_TRUNC", func() error { return openClose(file, os.O_WRONLY|os.O_TRUNC) }},
		{"create", func() error { return openClose(filepath.Join(m.Dir, "new"), os.O_WRONLY|os.O_CREATE) }},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(m.Dir, "newdir"), 0o755) }},
		{"remove file", func() error { return os.Remove(file) }},
		{"remove dir", func() error { return os.Remove(filepath.Join(m.Dir, "dir")) }},
		{"rename", func() error { return os.Rename(file, filepath.Join(m.Dir, "dir", "renamed")) }},
		{"truncate", func() error { return os.Truncate(file, 0) }},
		{"symlink", func() error { return os.Symlink("file", filepath.Join(m.Dir, "dir", "link")) }},
	} {
		if err := tc.op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s: %v, want EROFS", tc.name, err)
		}
	}
	if got, err := os.ReadFile(file); err != nil || string(got) != "content\n" {
		t.Errorf("after the failed writes: %q, %v", got, err)
	}
}

func openClose(path string, flag int) error {
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// TestUnmountWithActiveReaders sends SIGTERM while readers are busy: segfs
// must exit cleanly and take its mount with it within the grace period.
func TestUnmountWithActiveReaders(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "")
	// The readers hold their files open through the grace, which then
	// detaches the mount: a short grace keeps the test short.
	m := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB", "--unmount-grace", "2s")

	var files []*os.File
	for _, f := range shared.shard.BySize()[:6] {
		file, err := os.Open(filepath.Join(m.Dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		files = append(files, file)
	}
	var reads atomic.Int64
	var unmounting atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, file := range files {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			buf := make([]byte, 64<<10)
			size := shared.shard.BySize()[i].Size
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := file.ReadAt(buf, rng.Int64N(size)); err != nil && !errors.Is(err, io.EOF) {
					if !unmounting.Load() {
						t.Errorf("reader %d before the unmount: %v", i, err)
					}
					return // the mount is going away
				}
				reads.Add(1)
			}
		})
	}
	readersDone := make(chan struct{})
	go func() { wg.Wait(); close(readersDone) }()
	// The readers end on their own once the mount is gone; a reader still
	// blocked after that is a bug, reported rather than waited for forever.
	defer func() {
		close(stop)
		select {
		case <-readersDone:
		case <-time.After(30 * time.Second):
			t.Error("readers still blocked 30s after the unmount")
		}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for reads.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	unmounting.Store(true)
	err := m.Unmount()
	elapsed := time.Since(start)
	t.Logf("unmount with %d reads done took %v", reads.Load(), elapsed.Round(time.Millisecond))
	if err != nil {
		t.Error(err)
	}
	if elapsed > harness.UnmountGrace+5*time.Second {
		t.Errorf("unmount took %v", elapsed)
	}
	assertNotMounted(t, m.Dir)
}

// TestUnmountCommand unmounts with `segfs unmount` from another process;
// the daemon must exit 0.
func TestUnmountCommand(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "")
	m := mountS3(t, srv, "s3://"+bucket)
	if _, err := os.ReadFile(filepath.Join(m.Dir, shared.shard.Files[0].Name)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), harness.UnmountGrace)
	defer cancel()
	cmd := exec.CommandContext(ctx, needSegfs(t), "unmount", m.Dir)
	cmd.Env = harness.ChildEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("segfs unmount: %v\n%s", err, out)
	}
	if err := m.Wait(ctx); err != nil {
		t.Errorf("daemon after segfs unmount: %v\n%s", err, m.Log())
	}
	assertNotMounted(t, m.Dir)
}
