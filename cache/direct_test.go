package cache

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/segfs/segfs/directio"
)

// alignedCopy returns a copy of b at a 4096-byte aligned address, or at
// one byte past it when misalign is set.
func alignedCopy(b []byte, misalign bool) []byte {
	if !misalign {
		out := directio.Buf(int64(len(b)))
		copy(out, b)
		return out
	}
	out := directio.Buf(int64(len(b)) + 1)[1:]
	copy(out, b)
	return out
}

// TestDirectWrites checks which bytes of a part go with O_DIRECT (the
// whole 4096-byte blocks of an aligned buffer; none in buffered mode or
// from an unaligned buffer) and that every way yields the same file.
func TestDirectWrites(t *testing.T) {
	const n = 5*headerAlign + 100 // a short tail goes through the page cache
	for _, tc := range []struct {
		name      string
		writes    string
		misalign  bool
		wantBytes int64
	}{
		{"direct", IODirect, false, 5 * headerAlign},
		{"direct, unaligned buffer", IODirect, true, 0},
		{"buffered", IOBuffered, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.IO = tc.writes
			c := openTest(t, cfg)
			if tc.wantBytes > 0 {
				skipWithoutDirect(t, filepath.Dir(c.Dir()))
			}
			k := Key{Source: "s3://b", Object: "direct", ETag: `"e"`, PartSize: n, Index: 0}
			want := partData(k, n)
			mustPut(t, c, k, alignedCopy(want, tc.misalign))
			if got := c.Stats().DirectBytes; got != tc.wantBytes {
				t.Errorf("DirectBytes %d, want %d", got, tc.wantBytes)
			}
			file, err := os.ReadFile(partPath(c, k))
			if err != nil {
				t.Fatal(err)
			}
			hl := headerLen(k, n, testBlock)
			if hl%headerAlign != 0 || int64(len(file)) != hl+n {
				t.Fatalf("file of %d bytes, header %d: want a header padded to %d", len(file), hl, headerAlign)
			}
			if !bytes.Equal(file[hl:], want) {
				t.Error("the part file's data differs from the bytes put")
			}
			got, ok := read(t, c, k, 0, n)
			if !ok || !bytes.Equal(got, want) {
				t.Errorf("read back %d bytes (hit %v)", len(got), ok)
			}
		})
	}
}

// skipWithoutDirect skips the test where dir's file system refuses
// O_DIRECT.
func skipWithoutDirect(t *testing.T, dir string) {
	t.Helper()
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := setDirect(f, true, setDirectFd); err != nil {
		t.Skipf("the file system of %s refuses O_DIRECT: %v", dir, err)
	}
}

// TestDirectRefused: a file system that refuses O_DIRECT turns direct
// writes off for the cache, and the parts are written through the page
// cache, whole.
func TestDirectRefused(t *testing.T) {
	for _, where := range []string{"flag", "write"} {
		t.Run(where, func(t *testing.T) {
			cfg := testConfig(t)
			calls := 0
			cfg.setDirectFd = func(fd int, on bool) error {
				calls++
				if where == "flag" {
					return syscall.EINVAL
				}
				return nil // the flag is not set: the next hook refuses the write
			}
			cfg.writeDirect = func(f *os.File, b []byte) (int, error) {
				return 0, syscall.EINVAL
			}
			c := openTest(t, cfg)
			for i := range int64(3) {
				k := Key{Source: "s3://b", Object: "refused", ETag: `"e"`, PartSize: 3 * headerAlign, Index: i}
				want := partData(k, 3*headerAlign)
				mustPut(t, c, k, alignedCopy(want, false))
				if got, ok := read(t, c, k, 0, len(want)); !ok || !bytes.Equal(got, want) {
					t.Fatalf("part %d: read back %d bytes (hit %v)", i, len(got), ok)
				}
			}
			if st := c.Stats(); st.DirectBytes != 0 || st.Puts != 3 || st.PutErrors != 0 {
				t.Errorf("stats %+v", st)
			}
			if want := map[string]int{"flag": 1, "write": 2}[where]; calls != want {
				t.Errorf("%d O_DIRECT flag changes, want %d: direct writes should stop after the first refusal", calls, want)
			}
		})
	}
}

// TestPromoteDirect: a whole-object file is written with O_DIRECT too,
// every whole 4096-byte block of it when the part size is a multiple of
// 4096, and reads back the object.
func TestPromoteDirect(t *testing.T) {
	c := openTest(t, testConfig(t))
	skipWithoutDirect(t, filepath.Dir(c.Dir()))
	const partSize, size = 3 * headerAlign, 2*3*headerAlign + headerAlign + 100
	var want []byte
	for i := int64(0); i*partSize < size; i++ {
		k := Key{Source: "s3://b", Object: "whole", ETag: `"e"`, PartSize: partSize, Index: i}
		d := partData(k, int(min(partSize, size-i*partSize)))
		mustPut(t, c, k, alignedCopy(d, false))
		want = append(want, d...)
	}
	before := c.Stats().DirectBytes
	ok := ObjectKey{Source: "s3://b", Object: "whole", ETag: `"e"`, Size: size}
	if err := c.Promote(context.Background(), ok, partSize); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Stats().DirectBytes-before, int64(size)&^(headerAlign-1); got != want {
		t.Errorf("%d bytes of the whole-object file written with O_DIRECT, want %d", got, want)
	}
	if got, found := readObject(t, c, ok); !found || !bytes.Equal(got, want) {
		t.Fatalf("whole-object file: found %v, equal %v", found, bytes.Equal(got, want))
	}
}

// TestReadsFormatVersion1 reads a part file written by earlier releases:
// its header is not padded.
func TestReadsFormatVersion1(t *testing.T) {
	c := openTest(t, testConfig(t))
	k := key("version/1", 0)
	want := partData(k, testPart)
	mustPut(t, c, k, want)
	path := partPath(c, k)
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	fields := headerFields(int64(len(k.Source)), int64(len(k.Object)), int64(len(k.ETag)), blockCount(testPart, testBlock))
	v1 := append([]byte(nil), file[:fields]...)
	le.PutUint16(v1[8:], 1)
	le.PutUint32(v1[12:], uint32(fields+4))
	v1 = le.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	v1 = append(v1, want...)
	if err := os.WriteFile(path, v1, 0o600); err != nil {
		t.Fatal(err)
	}
	got, ok := read(t, c, k, 0, testPart)
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("version 1 part: read %d bytes (hit %v)", len(got), ok)
	}
	// A version 1 header that claims version 2's padding is refused.
	le.PutUint16(v1[8:], 2)
	binary.LittleEndian.PutUint32(v1[fields:], crc32.Checksum(v1[:fields], castagnoli))
	if err := os.WriteFile(path, v1, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := read(t, c, k, 0, testPart); ok {
		t.Error("an unpadded header marked version 2 was served")
	}
	if st := c.Stats(); st.CorruptRemoved != 1 {
		t.Errorf("CorruptRemoved %d, want 1", st.CorruptRemoved)
	}
}

// readInto reads len(p) bytes of k at off into p.
func readInto(t *testing.T, c *Cache, k Key, p []byte, off int64) bool {
	t.Helper()
	n, ok, err := c.ReadAt(context.Background(), k, p, off)
	if err != nil {
		t.Fatalf("ReadAt %s at %d: %v", k, off, err)
	}
	return ok && n == len(p)
}

// TestDirectReads checks which reads of a part's data go with O_DIRECT
// (at least directReadMin bytes of whole blocks, aligned in the file and
// in memory) and that every one returns the part's bytes.
func TestDirectReads(t *testing.T) {
	const n = 4 * directReadMin
	for _, tc := range []struct {
		name   string
		io     string
		off    int64
		len    int
		shift  int // the buffer starts this far past a 4096-byte boundary
		direct bool
	}{
		{"large, aligned", IODirect, 0, 2 * directReadMin, 0, true},
		{"large, from a 4096 boundary", IODirect, headerAlign, directReadMin, 0, true},
		{"large, to the end", IODirect, n - directReadMin, directReadMin, 0, true},
		{"small", IODirect, 0, directReadMin - headerAlign, 0, false},
		{"from a block that is not 4096-aligned", IODirect, testBlock, directReadMin, 0, false},
		{"into an unaligned buffer", IODirect, 0, directReadMin, 1, false},
		{"buffered mode", IOBuffered, 0, 2 * directReadMin, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.IO = tc.io
			c := openTest(t, cfg)
			if tc.direct {
				skipWithoutDirect(t, filepath.Dir(c.Dir()))
			}
			k := Key{Source: "s3://b", Object: "reads", ETag: `"e"`, PartSize: n, Index: 0}
			want := partData(k, n)
			mustPut(t, c, k, want)
			p := directio.Buf(int64(tc.len + tc.shift))[tc.shift:]
			if !readInto(t, c, k, p, tc.off) || !bytes.Equal(p, want[tc.off:tc.off+int64(tc.len)]) {
				t.Fatal("read back other bytes than were put")
			}
			wantDirect := int64(0)
			if tc.direct {
				wantDirect = int64(tc.len)
			}
			if got := c.Stats().DirectReadBytes; got != wantDirect {
				t.Errorf("DirectReadBytes %d, want %d", got, wantDirect)
			}
		})
	}
}

// TestDirectReadFindsCorruption: a flipped data byte is caught by a
// direct read as by any other, and the part is removed.
func TestDirectReadFindsCorruption(t *testing.T) {
	c := openTest(t, testConfig(t))
	skipWithoutDirect(t, filepath.Dir(c.Dir()))
	const n = 2 * directReadMin
	k := Key{Source: "s3://b", Object: "flip", ETag: `"e"`, PartSize: n, Index: 0}
	mustPut(t, c, k, partData(k, n))
	flipByte(t, partPath(c, k), func(size, hdrLen int64) int64 { return hdrLen + n/2 })
	if readInto(t, c, k, directio.Buf(n), 0) {
		t.Fatal("a part with a flipped byte was served")
	}
	st := c.Stats()
	if st.CorruptRemoved != 1 || st.DirectReadBytes != n || fileExists(partPath(c, k)) {
		t.Errorf("CorruptRemoved %d, DirectReadBytes %d, file left %v: want 1, %d, false",
			st.CorruptRemoved, st.DirectReadBytes, fileExists(partPath(c, k)), n)
	}
}

// TestDirectReadRefused: a file system that refuses O_DIRECT on a read
// gets the read through the page cache, and direct I/O stops for the
// cache, writes included.
func TestDirectReadRefused(t *testing.T) {
	cfg := testConfig(t)
	sets, refusals := 0, 0
	cfg.setDirectFd = func(fd int, on bool) error {
		if !on {
			return setDirectFd(fd, on)
		}
		// The first is the write of part 0, which goes direct; the second
		// is the read of it, which the file system refuses.
		if sets++; sets == 2 {
			refusals++
			return syscall.EINVAL
		}
		return setDirectFd(fd, on)
	}
	c := openTest(t, cfg)
	skipWithoutDirect(t, filepath.Dir(c.Dir()))
	const n = 2 * directReadMin
	for i := range int64(2) {
		k := Key{Source: "s3://b", Object: "refused-read", ETag: `"e"`, PartSize: n, Index: i}
		want := partData(k, n)
		mustPut(t, c, k, alignedCopy(want, false))
		p := directio.Buf(n)
		if !readInto(t, c, k, p, 0) || !bytes.Equal(p, want) {
			t.Fatalf("part %d: read back other bytes than were put", i)
		}
	}
	st := c.Stats()
	if refusals != 1 || st.DirectReadBytes != 0 {
		t.Errorf("%d refusals, DirectReadBytes %d: want 1 and 0", refusals, st.DirectReadBytes)
	}
	// The second part was written after the refusal: through the page cache.
	if st.DirectBytes != n {
		t.Errorf("DirectBytes %d, want %d (the first part only)", st.DirectBytes, n)
	}
}
