package cache

import (
	"bytes"
	"context"
	"os"
	"testing"
)

// TestSumsAsBytesArrive: checksums summed in uneven steps as a buffer
// fills are the ones Put computes, and PutSummed stores a part that reads
// back whole; the file is the one Put writes, byte for byte.
func TestSumsAsBytesArrive(t *testing.T) {
	c := openTest(t, testConfig(t))
	const n = 5*testBlock + 123
	k := Key{Source: "s3://b", Object: "summed", ETag: `"e"`, PartSize: 8 * testBlock, Index: 0}
	want := partData(k, n)
	buf := make([]byte, n)
	s := c.NewSums(buf)
	for filled, step := 0, 1; filled < n; step = step*2 + 1 {
		next := min(filled+step, n)
		copy(buf[filled:next], want[filled:next])
		s.Filled(next)
		if next < n && s.done%testBlock != 0 {
			t.Fatalf("after %d bytes: summed %d, not whole blocks", next, s.done)
		}
		s.Filled(filled) // going back is ignored
		filled = next
	}
	if !bytes.Equal(s.crcs, appendBlockCRCs(nil, want, testBlock)) {
		t.Fatal("sums taken as the bytes arrived differ from the part's")
	}
	if err := c.PutSummed(context.Background(), k, buf, s); err != nil {
		t.Fatal(err)
	}
	if got, ok := read(t, c, k, 0, n); !ok || !bytes.Equal(got, want) {
		t.Fatal("a part stored with arrived sums did not read back")
	}
	summed, err := os.ReadFile(partPath(c, k))
	if err != nil {
		t.Fatal(err)
	}
	c2 := openTest(t, testConfig(t))
	mustPut(t, c2, k, want)
	plain, err := os.ReadFile(partPath(c2, k))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(summed, plain) {
		t.Error("PutSummed wrote another file than Put")
	}
}

// TestSumsNotTrusted: sums that do not cover the data (a read that
// stopped reporting early, or the sums of another buffer) are not used,
// and bytes changed after they were summed are never served.
func TestSumsNotTrusted(t *testing.T) {
	c := openTest(t, testConfig(t))
	const n = 4 * testBlock
	ctx := context.Background()
	put := func(obj string, data []byte, s *Sums) Key {
		t.Helper()
		k := Key{Source: "s3://b", Object: obj, ETag: `"e"`, PartSize: n, Index: 0}
		if err := c.PutSummed(ctx, k, data, s); err != nil {
			t.Fatalf("PutSummed %s: %v", obj, err)
		}
		return k
	}

	data := partData(key("partial", 0), n)
	s := c.NewSums(data)
	s.Filled(2 * testBlock)
	if k := put("partial", data, s); !readOK(t, c, k, data) {
		t.Error("with sums of half the part: the part did not read back")
	}

	other := make([]byte, n)
	s = c.NewSums(other)
	s.Filled(n) // the sums of zeros
	data = partData(key("other", 0), n)
	if k := put("other", data, s); !readOK(t, c, k, data) {
		t.Error("with the sums of another buffer: the part did not read back")
	}

	if k := put("nil", data, nil); !readOK(t, c, k, data) {
		t.Error("with no sums: the part did not read back")
	}

	data = partData(key("changed", 0), n)
	s = c.NewSums(data)
	s.Filled(n)
	data[testBlock+7] ^= 1 // changed after it was summed
	k := put("changed", data, s)
	if got, ok := read(t, c, k, testBlock, testBlock); ok {
		t.Errorf("bytes changed after they were summed were served (%d bytes)", len(got))
	}
	if st := c.Stats(); st.CorruptRemoved != 1 {
		t.Errorf("CorruptRemoved %d, want 1", st.CorruptRemoved)
	}
}

func readOK(t *testing.T, c *Cache, k Key, want []byte) bool {
	t.Helper()
	got, ok := read(t, c, k, 0, len(want))
	return ok && bytes.Equal(got, want)
}
