package cache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// supportsDirect reports whether dir's file system takes O_DIRECT.
func supportsDirect(t *testing.T, dir string) bool {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "probe"), os.O_WRONLY|os.O_CREATE|unix.O_DIRECT, 0o600)
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(filepath.Join(dir, "probe"))
	return true
}

// TestDirectAndBufferedWrites writes parts of lengths around the
// alignment, from aligned and unaligned buffers, with direct I/O and
// through the page cache, and reads each back whole.
func TestDirectAndBufferedWrites(t *testing.T) {
	const partSize = 64 << 10
	lengths := []int{1, 100, align - 1, align, align + 1, 3 * align, 3*align + 5, partSize - 1, partSize}
	for _, buffered := range []bool{false, true} {
		t.Run(fmt.Sprintf("buffered=%v", buffered), func(t *testing.T) {
			cfg := testConfig(t)
			direct := !buffered && supportsDirect(t, filepath.Dir(cfg.Dir))
			c := openTest(t, cfg)
			c.noDirect.Store(buffered)
			rng := rand.New(rand.NewPCG(1, 2))
			for i, n := range lengths {
				for _, unaligned := range []bool{false, true} {
					k := Key{Source: "s3://b", Object: fmt.Sprintf("obj-%d-%v", i, unaligned), ETag: `"e"`, PartSize: partSize, Index: 0}
					data := alignedBuf(int64(n) + 1)[:n]
					if unaligned {
						data = alignedBuf(int64(n) + 1)[1:]
					}
					for j := range data {
						data[j] = byte(rng.Uint32())
					}
					if err := c.Put(context.Background(), k, data); err != nil {
						t.Fatalf("Put %d bytes (unaligned %v): %v", n, unaligned, err)
					}
					fi, err := os.Stat(partPath(c, k))
					if err != nil {
						t.Fatal(err)
					}
					if want := headerLen(k, int64(n), testBlock) + int64(n); fi.Size() != want {
						t.Fatalf("%d bytes (unaligned %v): file of %d bytes, want %d", n, unaligned, fi.Size(), want)
					}
					got := make([]byte, partSize)
					m, ok, err := c.ReadAt(context.Background(), k, got, 0)
					if err != nil || !ok || m != n || !bytes.Equal(got[:m], data) {
						t.Fatalf("%d bytes (unaligned %v): read back %d bytes, ok %v, err %v, equal %v", n, unaligned, m, ok, err, bytes.Equal(got[:m], data))
					}
				}
			}
			if c.noDirect.Load() == direct {
				t.Errorf("noDirect = %v after writing, want %v (file system takes O_DIRECT: %v)", c.noDirect.Load(), !direct, direct)
			}
		})
	}
}

// TestDirectRefusedFallsBack: where the file system refuses O_DIRECT
// (EINVAL at open, as older tmpfs does), parts are written through the
// page cache from then on.
func TestDirectRefusedFallsBack(t *testing.T) {
	cfg := testConfig(t)
	var directOpens atomic.Int64
	cfg.openFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		if flag&unix.O_DIRECT != 0 {
			directOpens.Add(1)
			return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EINVAL}
		}
		return os.OpenFile(name, flag, perm)
	}
	c := openTest(t, cfg)
	data := bytes.Repeat([]byte("segfs"), 2000)
	for i := range 3 {
		k := key("refused", int64(i))
		if err := c.Put(context.Background(), k, data); err != nil {
			t.Fatalf("Put: %v", err)
		}
		got := make([]byte, len(data))
		if n, ok, err := c.ReadAt(context.Background(), k, got, 0); err != nil || !ok || n != len(data) || !bytes.Equal(got, data) {
			t.Fatalf("read back: %d bytes, ok %v, err %v", n, ok, err)
		}
	}
	if !c.noDirect.Load() {
		t.Error("noDirect not set after O_DIRECT was refused")
	}
	if n := directOpens.Load(); n != 1 {
		t.Errorf("%d O_DIRECT opens, want 1 (the refusal is remembered)", n)
	}
}

// TestDirectWriteRefusedRewrites: a direct write refused with EINVAL
// (here an unaligned header) is redone through the page cache.
func TestDirectWriteRefusedRewrites(t *testing.T) {
	cfg := testConfig(t)
	c := openTest(t, cfg)
	path := filepath.Join(t.TempDir(), "part")
	f, direct, err := c.createTemp(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !direct {
		t.Skip("this file system refuses O_DIRECT")
	}
	hdr := append(alignedBuf(align + 1)[1:1], "not an aligned header"...)
	data := bytes.Repeat([]byte{7}, 3*align+3)
	if err := c.writePart(f, direct, hdr, data); err != nil {
		t.Fatalf("writePart: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(append([]byte(nil), hdr...), data...); !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes, want the %d of header and data", len(got), len(want))
	}
	if !c.noDirect.Load() {
		t.Error("noDirect not set after a refused direct write")
	}
}

func TestAlignedBuf(t *testing.T) {
	for _, n := range []int64{0, 1, align - 1, align, 5 * align, 1 << 20} {
		b := alignedBuf(n)
		if int64(len(b)) != n || int64(cap(b)) != n {
			t.Fatalf("alignedBuf(%d): len %d cap %d", n, len(b), cap(b))
		}
		if n > 0 && !isAligned(b) {
			t.Fatalf("alignedBuf(%d) is not aligned", n)
		}
	}
}
