package fetcher

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// checkLatencies checks a store's GET histograms against its counters:
// one total per attempt, one first byte per attempt that received a
// body byte (noBody attempts did not), and no first byte later than its
// attempt's end.
func checkLatencies(t *testing.T, c *Counters, noBody int64) {
	t.Helper()
	gets := c.Gets.Load()
	first, total := c.GetFirstByte.Snapshot(), c.GetTime.Snapshot()
	if int64(total.Count) != gets {
		t.Errorf("GetTime.Count = %d, want %d (Gets)", total.Count, gets)
	}
	if int64(first.Count) != gets-noBody {
		t.Errorf("GetFirstByte.Count = %d, want %d (Gets %d less %d attempts without a body byte)", first.Count, gets-noBody, gets, noBody)
	}
	if first.Sum > total.Sum {
		t.Errorf("GetFirstByte.Sum %v > GetTime.Sum %v", first.Sum, total.Sum)
	}
	if total.Count > 0 && total.Sum <= 0 {
		t.Errorf("GetTime.Sum = %v after %d attempts", total.Sum, total.Count)
	}
}

// Every ranged GET attempt against S3 is timed, retries included.
func TestS3GetLatencies(t *testing.T) {
	checkGoroutines(t)
	f := newFakeS3(t)
	data := randomBytes(64 << 10)
	etag := f.put("bucket", "k", data)
	s := openTestS3(t, f, "")
	obj := Object{Key: "k", Size: int64(len(data)), ETag: etag}

	read := func(off, n int) {
		t.Helper()
		p := make([]byte, n)
		if err := s.ReadRange(t.Context(), obj, int64(off), p); err != nil {
			t.Fatalf("ReadRange(%d, %d): %v", off, n, err)
		}
		if !bytes.Equal(p, data[off:off+n]) {
			t.Fatalf("ReadRange(%d, %d): wrong bytes", off, n)
		}
	}
	read(0, 100)
	read(1000, 30_000)
	read(0, len(data))
	if got := s.Counters().Gets.Load(); got != 3 {
		t.Fatalf("Gets = %d, want 3", got)
	}
	checkLatencies(t, s.Counters(), 0)

	// A 503 (an SDK retry) fails before its body; a reset after 10 bytes
	// (re-requested by ReadRange) fails after its first byte.
	f.inject(fault{kind: fault503}, fault{kind: faultReset, n: 10})
	read(500, 20_000)
	if got := s.Counters().Gets.Load(); got != 6 {
		t.Fatalf("Gets = %d, want 6", got)
	}
	checkLatencies(t, s.Counters(), 1)

	// A read of a changed object fails on its 412: no body.
	f.put("bucket", "k", []byte("other"))
	if err := s.ReadRange(t.Context(), obj, 0, make([]byte, 10)); err == nil {
		t.Fatal("ReadRange of a changed object succeeded")
	}
	checkLatencies(t, s.Counters(), 2)
}

// A directory store times each ReadRange as one GET.
func TestDirGetLatencies(t *testing.T) {
	dir := t.TempDir()
	data := randomBytes(10_000)
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := Open(t.Context(), "file://"+dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(t.Context())
	if err != nil || len(objs) != 1 {
		t.Fatalf("List = %v, %v", objs, err)
	}
	for _, r := range [][2]int{{0, 10}, {100, 5000}, {0, len(data)}} {
		if err := st.ReadRange(t.Context(), objs[0], int64(r[0]), make([]byte, r[1])); err != nil {
			t.Fatalf("ReadRange(%v): %v", r, err)
		}
	}
	if got := st.Counters().Gets.Load(); got != 3 {
		t.Fatalf("Gets = %d, want 3", got)
	}
	checkLatencies(t, st.Counters(), 0)

	// A file replaced since it was listed fails before any byte.
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.ReadRange(t.Context(), objs[0], 0, make([]byte, 10)); err == nil {
		t.Fatal("ReadRange of a changed file succeeded")
	}
	checkLatencies(t, st.Counters(), 1)
}
