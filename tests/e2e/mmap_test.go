package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
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
