package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/segfs/segfs/tests/harness"
)

// TestCacheDirectIO fills a cache with --prefetch all and no reads, so
// that nothing but the writes touches the part files: with the default
// --cache-io direct, their data went to the disk with O_DIRECT and no
// data page of theirs is in the page cache; with buffered, none went
// direct. Both caches then serve a remount byte-exact with no GET, the
// direct one with its large reads made with O_DIRECT.
func TestCacheDirectIO(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := cacheObjects()
	putObjects(t, srv, bucket, objs)
	parts := partCount(objs, testPartSize)
	ps := strconv.Itoa(testPartSize)

	for _, mode := range []string{"direct", "buffered"} {
		t.Run(mode, func(t *testing.T) {
			cacheDir := filepath.Join(t.TempDir(), "cache")
			m := mountCached(t, srv, bucket, cacheDir, "--part-size", ps, "--prefetch", "all", "--cache-io", mode)
			s := waitCached(t, m, parts)
			if err := m.Unmount(); err != nil {
				t.Fatal(err)
			}
			files, _ := mustScanCache(t, cacheDir)
			// Parts of more than half a part are fetched into part-sized
			// buffers, which are 4096-aligned; the smaller ones may not be.
			var least, most, resident int64
			for _, f := range files {
				pages := residentPages(t, f.path) // before reading the file
				p, err := readPartInfo(f.path)
				if err != nil {
					t.Fatal(err)
				}
				if p.hdrLen%4096 != 0 {
					t.Errorf("%s: header of %d bytes, want a multiple of 4096", p, p.hdrLen)
				}
				aligned := p.dataLen &^ 4095
				most += aligned
				if p.dataLen > testPartSize/2 {
					least += aligned
					resident += countFrom(pages, p.hdrLen, p.hdrLen+aligned)
				}
			}
			got := s["cache_direct_bytes"]
			t.Logf("%s: %d part files, %d bytes written with O_DIRECT (between %d and %d possible), %d pages of their aligned data in the page cache",
				mode, len(files), got, least, most, resident)
			switch mode {
			case "direct":
				if got < least || got > most {
					t.Errorf("cache_direct_bytes %d, want between %d and %d", got, least, most)
				}
				if resident != 0 {
					t.Errorf("%d pages of the part files' aligned data are in the page cache; O_DIRECT writes leave none", resident)
				}
			case "buffered":
				if got != 0 {
					t.Errorf("cache_direct_bytes %d with --cache-io buffered, want 0", got)
				}
			}

			harness.DropPageCache(t)
			m = mountCached(t, srv, bucket, cacheDir, "--part-size", ps, "--prefetch", "none", "--cache-io", mode)
			before := harness.MustStats(t, m)
			checkObjects(t, m.Dir, objs)
			after := harness.WaitIdle(t, m)
			if n := harness.Delta(before, after, "gets"); n != 0 {
				t.Errorf("remount made %d GETs; every part was cached", n)
			}
			if n := after["cache_corrupt_removed"]; n != 0 {
				t.Errorf("remount removed %d parts as corrupt", n)
			}
			read := harness.Delta(before, after, "cache_direct_read_bytes")
			t.Logf("%s: remount read %d bytes of part data with O_DIRECT", mode, read)
			if mode == "direct" && read == 0 {
				t.Error("the remount's reads went through the page cache; the large ones should go with O_DIRECT")
			}
			if mode == "buffered" && read != 0 {
				t.Errorf("cache_direct_read_bytes %d with --cache-io buffered, want 0", read)
			}
		})
	}
}

// residentPages reports which pages of path are in the page cache
// (mincore over a read-only mapping that is never touched).
func residentPages(t *testing.T, path string) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() == 0 {
		return nil
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(fmt.Errorf("mmap %s: %w", path, err))
	}
	defer unix.Munmap(mem)
	page := int64(os.Getpagesize())
	vec := make([]byte, (fi.Size()+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(fmt.Errorf("mincore %s: %w", path, errno))
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// countFrom counts the resident pages among those holding bytes [from, to).
func countFrom(pages []bool, from, to int64) int64 {
	page := int64(os.Getpagesize())
	var n int64
	for i := from / page; i < (to+page-1)/page && i < int64(len(pages)); i++ {
		if pages[i] {
			n++
		}
	}
	return n
}
