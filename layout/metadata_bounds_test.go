package layout_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/segfs/segfs/internal/testmem"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/tests/hostile"
)

// Issue 42: a metadata file of 62 MB of tiny entries took 1.8 GB to
// parse. Its count is refused before anything is allocated for it; a
// file of layout.MaxMetadataFiles entries parses, at a cost proportional to
// them.
func TestMetadataFilesBound(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
	}{{"62 MB of tiny entries", 62 << 20 / 13}, {"one entry too many", layout.MaxMetadataFiles + 1}} {
		data, err := hostile.TinyEntriesMetadata(&layout.Metadata{Version: 2, Body: layout.Body210, Checkpoint: &layout.Checkpoint{}}, c.n)
		if err != nil {
			t.Fatal(err)
		}
		n := testmem.Allocated(func() { _, err = layout.ParseMetadata(data) })
		t.Logf("%s: %d bytes, %d allocated: %v", c.name, len(data), n, err)
		want := fmt.Sprintf("count %d at offset", c.n)
		if !errors.Is(err, layout.ErrBadMetadata) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "MaxMetadataFiles") {
			t.Errorf("%s: %v, want the count refused, naming MaxMetadataFiles", c.name, err)
		}
		if n > 1<<20 {
			t.Errorf("%s: %d bytes allocated to refuse it", c.name, n)
		}
	}

	// One value of 30 MB of "::" split into 15 million fields took 480 MB.
	o := &lucene.Output{B: lucene.AppendHeader(nil, layout.MetadataCodec, 2)}
	o.VInt(1)
	o.String("k")
	o.String(strings.Repeat("::", 15<<20))
	data := lucene.AppendFooter(o.B)
	var err error
	if n := testmem.Allocated(func() { _, err = layout.ParseMetadata(data) }); n > 1<<20 || !errors.Is(err, layout.ErrBadMetadata) || !strings.Contains(err.Error(), "value of 31457280 bytes, at most 4096 allowed") {
		t.Errorf("a value of 30 MB: %d bytes allocated, %.200v; want it refused by its length", n, err)
	}

	var files []layout.FileEntry
	for i := range layout.MaxMetadataFiles {
		files = append(files, layout.FileEntry{Name: fmt.Sprintf("_%x.cfs", i), Uploaded: fmt.Sprintf("_%x.cfs__gX7bNIIBrs0AUNsR2yEG", i), Checksum: uint64(i), Length: int64(i), WrittenByMajor: 10})
	}
	data, err = layout.EncodeMetadata(&layout.Metadata{Version: 2, Body: layout.Body210, Files: files, Checkpoint: &layout.Checkpoint{}, Generation: 0, PrimaryTerm: 0})
	if err != nil {
		t.Fatal(err)
	}
	var m *layout.Metadata
	n := testmem.Allocated(func() { m, err = layout.ParseMetadata(data) })
	if err != nil || len(m.Files) != layout.MaxMetadataFiles {
		t.Fatalf("%d files: %v", layout.MaxMetadataFiles, err)
	}
	t.Logf("%d files, %d bytes: %d allocated, %.1f a byte", layout.MaxMetadataFiles, len(data), n, float64(n)/float64(len(data)))
	if n > 4*uint64(len(data)) {
		t.Errorf("%d files of %d bytes: %d bytes allocated, more than four a byte of the file", layout.MaxMetadataFiles, len(data), n)
	}
}
