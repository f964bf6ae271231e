package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/tests/harness"
)

// TestMmap maps the largest file read-only, as Lucene's MMapDirectory
// does, compares it, drops its pages from the page cache and compares a
// fresh mapping again, so that the second pass faults through segfs too.
func TestMmap(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "")
	m := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB")

	f := shared.shard.Largest()
	want := shared.local[f.Name]
	fd, err := os.Open(filepath.Join(m.Dir, f.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()

	compareMapping(t, fd, want, "first mapping")

	if err := unix.Fadvise(int(fd.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Errorf("fadvise(DONTNEED): %v", err)
	}
	if os.Geteuid() == 0 {
		// Best effort: containers often refuse it.
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
			t.Logf("drop_caches: %v (continuing with fadvise alone)", err)
		}
	}
	compareMapping(t, fd, want, "mapping after dropping pages")
}

// compareMapping maps fd read-only, logs how much of it is resident before
// touching it, compares it with want and unmaps it.
func compareMapping(t *testing.T, fd *os.File, want []byte, what string) {
	t.Helper()
	data, err := syscall.Mmap(int(fd.Fd()), 0, len(want), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("%s: mmap: %v", what, err)
	}
	defer func() {
		if err := syscall.Munmap(data); err != nil {
			t.Errorf("%s: munmap: %v", what, err)
		}
	}()
	pageSize := os.Getpagesize()
	vec := make([]byte, (len(data)+pageSize-1)/pageSize)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno == 0 {
		resident := 0
		for _, v := range vec {
			resident += int(v & 1)
		}
		t.Logf("%s: %d of %d pages resident before reading", what, resident, len(vec))
	}
	if !bytes.Equal(data, want) {
		t.Errorf("%s: mapped bytes differ from the source (first difference at %d)", what, firstDiff(data, want))
	}
}

// TestMappedFaultAcrossPartBorder faults one page of a cold mapping just
// below a part border. The kernel reads 1 MiB around the fault (the
// mount's readahead), half in each part: segfs serves each half by a GET
// of its own range, both at once, and the mapped bytes are the object's.
func TestMappedFaultAcrossPartBorder(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	const size, part = 32 << 20, 8 << 20
	data := randomBytes(5, size)
	ctx := context.Background()
	if _, err := srv.PutBytes(ctx, bucket, "_0.dvd", data); err != nil {
		t.Fatal(err)
	}
	m := mountS3(t, srv, "s3://"+bucket, "--prefetch", "none")
	before, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(filepath.Join(m.Dir, "_0.dvd"))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	mapped, err := syscall.Mmap(int(fd.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	defer syscall.Munmap(mapped)

	const off = 2*part - 4096 // the last page of part 1
	got := bytes.Clone(mapped[off : off+4096])
	if !bytes.Equal(got, data[off:off+4096]) {
		t.Fatalf("the faulted page differs from the object (first difference at %d)", off+firstDiff(got, data[off:off+4096]))
	}
	after := harness.WaitIdle(t, m)
	delta := func(k string) int64 { return after[k] - before[k] }
	t.Logf("one fault at %d: %d FUSE reads of %d bytes, %d range GETs, %d parts fetched, %d GETs",
		off, delta("reads"), delta("read_bytes"), delta("range_reads"), delta("parts_fetched"), delta("gets"))
	if delta("read_bytes") < 8192 || delta("reads") < 1 {
		t.Fatalf("the fault read %d bytes in %d reads; the kernel reads around it", delta("read_bytes"), delta("reads"))
	}
	// Both halves are cold small reads: range GETs of their own (a half
	// of more than two reader.RangePieceMin in pieces read at once), and
	// their parts queued in the background. The kernel reads the mount's
	// 1 MiB readahead around the fault, from 512 KiB before its page.
	pieces := func(n int64) int64 { return max(1, min(reader.MaxRangePieces, n/reader.RangePieceMin)) }
	start := int64(off - 512<<10)
	want := pieces(2*part-start) + pieces(start+1<<20-2*part)
	if delta("range_reads") != want || delta("parts_fetched") != 2 {
		t.Errorf("%d range GETs and %d parts fetched; want %d and 2 (each part's half by its own GETs)", delta("range_reads"), delta("parts_fetched"), want)
	}
	// The bytes the kernel read around the fault are in the page cache now:
	// compare them all.
	lo, hi := off-(512<<10), off+(512<<10)
	if !bytes.Equal(mapped[lo:hi], data[lo:hi]) {
		t.Errorf("mapped bytes around the fault differ from the object (first difference at %d)", lo+firstDiff(mapped[lo:hi], data[lo:hi]))
	}
}
