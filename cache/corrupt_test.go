package cache

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"testing"
)

// rewriteHeader applies edit to the header of the part file at path and
// fixes the header checksum, so that only the field checks can object.
func rewriteHeader(t *testing.T, path string, edit func(h []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hl := binary.LittleEndian.Uint32(b[12:])
	edit(b[:hl])
	binary.LittleEndian.PutUint32(b[hl-4:], crc32.Checksum(b[:hl-4], castagnoli))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, at func(size, hdrLen int64) int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := at(int64(len(b)), int64(binary.LittleEndian.Uint32(b[12:])))
	b[i] ^= 0x40
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string, to func(size, hdrLen int64) int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, to(int64(len(b)), int64(binary.LittleEndian.Uint32(b[12:])))); err != nil {
		t.Fatal(err)
	}
}

// TestCorruption damages a cached part in each way a disk, a crash or a
// person can, and checks that the read misses, the file is removed and
// counted, and the part can be cached again.
func TestCorruption(t *testing.T) {
	const n = 3*testBlock + 100
	other := key("corrupt/other", 1)
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, c *Cache, path string)
	}{
		{"flipped first data byte", func(t *testing.T, _ *Cache, p string) {
			flipByte(t, p, func(_, hl int64) int64 { return hl })
		}},
		{"flipped last data byte", func(t *testing.T, _ *Cache, p string) {
			flipByte(t, p, func(size, _ int64) int64 { return size - 1 })
		}},
		{"flipped magic", func(t *testing.T, _ *Cache, p string) {
			flipByte(t, p, func(int64, int64) int64 { return 0 })
		}},
		{"flipped header length", func(t *testing.T, _ *Cache, p string) {
			flipByte(t, p, func(int64, int64) int64 { return 12 })
		}},
		{"flipped data length", func(t *testing.T, _ *Cache, p string) {
			flipByte(t, p, func(int64, int64) int64 { return 24 })
		}},
		{"flipped object key byte", func(t *testing.T, _ *Cache, p string) {
			flipByte(t, p, func(int64, int64) int64 { return fixedHeaderLen + 20 })
		}},
		{"flipped block checksum", func(t *testing.T, _ *Cache, p string) {
			k := key("corrupt/victim", 1)
			last := headerFields(int64(len(k.Source)), int64(len(k.Object)), int64(len(k.ETag)), blockCount(n, testBlock)) - 1
			flipByte(t, p, func(int64, int64) int64 { return last })
		}},
		{"flipped header checksum", func(t *testing.T, _ *Cache, p string) {
			flipByte(t, p, func(_, hl int64) int64 { return hl - 1 })
		}},
		{"empty file", func(t *testing.T, _ *Cache, p string) {
			truncate(t, p, func(int64, int64) int64 { return 0 })
		}},
		{"truncated in the header", func(t *testing.T, _ *Cache, p string) {
			truncate(t, p, func(int64, int64) int64 { return 40 })
		}},
		{"header only", func(t *testing.T, _ *Cache, p string) {
			truncate(t, p, func(_, hl int64) int64 { return hl })
		}},
		{"one byte short", func(t *testing.T, _ *Cache, p string) {
			truncate(t, p, func(size, _ int64) int64 { return size - 1 })
		}},
		{"one byte long", func(t *testing.T, _ *Cache, p string) {
			truncate(t, p, func(size, _ int64) int64 { return size + 1 })
		}},
		{"length u64 max, header checksum fixed", func(t *testing.T, _ *Cache, p string) {
			rewriteHeader(t, p, func(h []byte) { binary.LittleEndian.PutUint64(h[24:], math.MaxUint64) })
		}},
		{"offset u64 max, header checksum fixed", func(t *testing.T, _ *Cache, p string) {
			rewriteHeader(t, p, func(h []byte) { binary.LittleEndian.PutUint64(h[16:], math.MaxUint64) })
		}},
		{"block count u32 max, header checksum fixed", func(t *testing.T, _ *Cache, p string) {
			rewriteHeader(t, p, func(h []byte) { binary.LittleEndian.PutUint32(h[52:], math.MaxUint32) })
		}},
		{"block size 3, header checksum fixed", func(t *testing.T, _ *Cache, p string) {
			rewriteHeader(t, p, func(h []byte) { binary.LittleEndian.PutUint32(h[48:], 3) })
		}},
		{"string length overruns, header checksum fixed", func(t *testing.T, _ *Cache, p string) {
			rewriteHeader(t, p, func(h []byte) { binary.LittleEndian.PutUint16(h[58:], math.MaxUint16) })
		}},
		{"older format version", func(t *testing.T, _ *Cache, p string) {
			rewriteHeader(t, p, func(h []byte) { binary.LittleEndian.PutUint16(h[8:], 0) })
		}},
		{"newer format version", func(t *testing.T, _ *Cache, p string) {
			rewriteHeader(t, p, func(h []byte) { binary.LittleEndian.PutUint16(h[8:], formatVersion+1) })
		}},
		{"another key's file swapped in", func(t *testing.T, c *Cache, p string) {
			mustPut(t, c, other, partData(other, n))
			b, err := os.ReadFile(partPath(c, other))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		// Entries that are not files at all: TestUnusablePartFiles.
	} {
		// warm: the part was read before the damage, so its header is in
		// the header cache.
		for _, warm := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/warm=%v", tc.name, warm), func(t *testing.T) {
				corruptOnce(t, n, other, warm, tc.damage)
			})
		}
	}
}

func corruptOnce(t *testing.T, n int, other Key, warm bool, damage func(t *testing.T, c *Cache, path string)) {
	c := openTest(t, testConfig(t))
	k := key("corrupt/victim", 1)
	data := partData(k, n)
	mustPut(t, c, k, data)
	hits := int64(0)
	if warm {
		if got, ok := read(t, c, k, 0, n); !ok || !bytes.Equal(got, data) {
			t.Fatalf("intact part: hit %v, %d bytes", ok, len(got))
		}
		hits = 1
	}
	path := partPath(c, k)
	damage(t, c, path)

	if got, ok := read(t, c, k, 0, n); ok {
		t.Fatalf("damaged part served (%d bytes)", len(got))
	}
	st := c.Stats()
	if st.CorruptRemoved != 1 || st.Misses != 1 || st.Hits != hits {
		t.Errorf("corrupt removed %d, misses %d, hits %d; want 1, 1 and %d", st.CorruptRemoved, st.Misses, st.Hits, hits)
	}
	if fileExists(path) {
		t.Fatal("damaged part file not removed")
	}
	checkAccounting(t, c)

	mustPut(t, c, k, data)
	if got, ok := read(t, c, k, 0, n); !ok || !bytes.Equal(got, data) {
		t.Fatalf("after Put again: hit %v, %d bytes", ok, len(got))
	}
	if c.Contains(other) { // the swapped-in key is intact where it belongs
		if got, ok := read(t, c, other, 0, n); !ok || !bytes.Equal(got, partData(other, n)) {
			t.Fatal("the other part was harmed")
		}
	}
}

// TestOnlyTouchedBlocksChecked shows that a read checks only the blocks
// it returns: a damaged block is caught by the read that touches it, not
// by reads of other blocks.
func TestOnlyTouchedBlocksChecked(t *testing.T) {
	c := openTest(t, testConfig(t))
	k := key("blocks", 0)
	data := partData(k, 4*testBlock)
	mustPut(t, c, k, data)
	flipByte(t, partPath(c, k), func(_, hl int64) int64 { return hl + 3*testBlock + 5 }) // block 3

	for _, off := range []int64{0, testBlock, 2*testBlock + 100} {
		if got, ok := read(t, c, k, off, testBlock/2); !ok || !bytes.Equal(got, data[off:off+testBlock/2]) {
			t.Fatalf("read at %d of intact blocks: hit %v", off, ok)
		}
	}
	if _, ok := read(t, c, k, 3*testBlock-1, 2); ok {
		t.Fatal("a read touching the damaged block was served")
	}
	if st := c.Stats(); st.CorruptRemoved != 1 || st.Hits != 3 {
		t.Errorf("stats %+v", st)
	}
}
