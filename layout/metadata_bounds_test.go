package layout

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/segfs/segfs/lucene"
)

// tinyEntries returns a version 2 metadata file whose map holds n
// entries of 13 bytes, each another file, with no body after it: the
// count is refused, or the body is, once the entries are read.
func tinyEntries(n int) []byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	o := &lucene.Output{B: lucene.AppendHeader(make([]byte, 0, 13*n+64), MetadataCodec, 2)}
	o.VInt(int32(n))
	key := make([]byte, 4)
	for i := range n {
		for j, v := 0, i; j < len(key); j, v = j+1, v/len(alphabet) {
			key[j] = alphabet[v%len(alphabet)]
		}
		o.String(string(key))
		o.String("a::b::0")
	}
	return lucene.AppendFooter(o.B)
}

// Issue 42: a metadata file of 62 MB of tiny entries took 1.8 GB to
// parse. Its count is refused before anything is allocated for it; a
// file of MaxMetadataFiles entries parses, at a cost proportional to
// them.
func TestMetadataFilesBound(t *testing.T) {
	allocated := func(fn func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		fn()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"62 MB of tiny entries", 62 << 20 / 13}, {"one entry too many", MaxMetadataFiles + 1}} {
		data := tinyEntries(c.n)
		var err error
		n := allocated(func() { _, err = ParseMetadata(data) })
		t.Logf("%s: %d bytes, %d allocated: %v", c.name, len(data), n, err)
		want := fmt.Sprintf("count %d at offset", c.n)
		if !errors.Is(err, ErrBadMetadata) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "MaxMetadataFiles") {
			t.Errorf("%s: %v, want the count refused, naming MaxMetadataFiles", c.name, err)
		}
		if n > 1<<20 {
			t.Errorf("%s: %d bytes allocated to refuse it", c.name, n)
		}
	}

	// One value of 30 MB of "::" split into 15 million fields took 480 MB.
	o := &lucene.Output{B: lucene.AppendHeader(nil, MetadataCodec, 2)}
	o.VInt(1)
	o.String("k")
	o.String(strings.Repeat("::", 15<<20))
	data := lucene.AppendFooter(o.B)
	var err error
	if n := allocated(func() { _, err = ParseMetadata(data) }); n > 1<<20 || !errors.Is(err, ErrBadMetadata) || !strings.Contains(err.Error(), "value of 31457280 bytes, at most 4096 allowed") {
		t.Errorf("a value of 30 MB: %d bytes allocated, %.200v; want it refused by its length", n, err)
	}

	var files []FileEntry
	for i := range MaxMetadataFiles {
		files = append(files, FileEntry{Name: fmt.Sprintf("_%x.cfs", i), Uploaded: fmt.Sprintf("_%x.cfs__gX7bNIIBrs0AUNsR2yEG", i), Checksum: uint64(i), Length: int64(i), WrittenByMajor: 10})
	}
	data, err = EncodeMetadata(&Metadata{Version: 2, Body: Body210, Files: files, Checkpoint: &Checkpoint{}, Generation: 0, PrimaryTerm: 0})
	if err != nil {
		t.Fatal(err)
	}
	var m *Metadata
	n := allocated(func() { m, err = ParseMetadata(data) })
	if err != nil || len(m.Files) != MaxMetadataFiles {
		t.Fatalf("%d files: %v", MaxMetadataFiles, err)
	}
	t.Logf("%d files, %d bytes: %d allocated, %.1f a byte", MaxMetadataFiles, len(data), n, float64(n)/float64(len(data)))
	if n > 4*uint64(len(data)) {
		t.Errorf("%d files of %d bytes: %d bytes allocated, more than four a byte of the file", MaxMetadataFiles, len(data), n)
	}
}
