package cache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// tmpfs mounts a tmpfs of the given size on a fresh directory for the
// test, or skips the test if it cannot (not root, no CAP_SYS_ADMIN).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestFullDisk fills a 16 MiB tmpfs with 1 MiB parts. With no floor, the
// file system fills: every Put either succeeds or returns ErrNoSpace, no
// temporary file is left, and every part kept reads back intact. With
// the default floor (5%), eviction keeps the free space above it.
func TestFullDisk(t *testing.T) {
	const partSize = 1 << 20
	for _, tc := range []struct {
		name    string
		minFree int64
	}{
		{"no floor", -1},
		{"default floor", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := tmpfs(t, "16m")
			cfg := Config{Dir: filepath.Join(mnt, "cache"), MinFree: tc.minFree, Logger: quietLogger()}
			c := openTest(t, cfg) // closed before the unmount: cleanups run last-in first-out
			var noSpace int64
			for i := range 40 {
				k := Key{Source: "s3://b", Object: "big", ETag: "e", PartSize: partSize, Index: int64(i)}
				err := c.Put(context.Background(), k, partData(k, partSize))
				switch {
				case err == nil:
				case errors.Is(err, ErrNoSpace):
					noSpace++
				default:
					t.Fatalf("Put %d: %v", i, err)
				}
				if _, _, temps := diskUsage(t, cfg.Dir); temps != 0 {
					t.Fatalf("Put %d left %d temporary files", i, temps)
				}
				sp, err := statfs(mnt)
				if err != nil {
					t.Fatal(err)
				}
				if f := c.floor(sp); f >= 0 && sp.avail < f {
					t.Fatalf("after Put %d: %d bytes free, floor %d", i, sp.avail, f)
				}
			}
			st := c.Stats()
			t.Logf("%d Puts, %d skipped for space, %d evictions, %d parts (%d bytes) kept", 40, st.NoSpace, st.Evictions, st.Parts, st.Bytes)
			if st.NoSpace != noSpace {
				t.Errorf("NoSpace counter %d, ErrNoSpace returned %d times", st.NoSpace, noSpace)
			}
			if tc.minFree < 0 && noSpace == 0 {
				t.Error("40 MiB fit in a 16 MiB tmpfs")
			}
			if tc.minFree == 0 && noSpace != 0 {
				t.Errorf("%d Puts skipped although eviction could keep the floor", noSpace)
			}
			checkAccounting(t, c)
			for i := range 40 {
				k := Key{Source: "s3://b", Object: "big", ETag: "e", PartSize: partSize, Index: int64(i)}
				p := make([]byte, partSize)
				n, ok, err := c.ReadAt(context.Background(), k, p, 0)
				if err != nil {
					t.Fatal(err)
				}
				if ok && !bytes.Equal(p[:n], partData(k, partSize)) {
					t.Fatalf("part %d reads back wrong", i)
				}
			}
		})
	}
}
