package view

import (
	"errors"
	"testing"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
)

// An uploaded name is a plain blob name or the metadata file is refused
// (issue 42): a name with separators or dot elements would be fetched
// as another key than the one it names.
func TestCheckBlobName(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"_0.fdt__gX7bNIIBrs0AUNsR2yEH", true},
		{"segments_5__u-_", true},
		{"a..b", true},
		{"...", true},
		{"x y", true},
		{"", false},
		{".", false},
		{"..", false},
		{"../x", false},
		{"../../../../other/0/segments/data/_0.fdt__u", false},
		{"a/b", false},
		{"/abs", false},
		{"a/", false},
		{`a\b`, false},
		{`..\x`, false},
		{"a\x00b", false},
	} {
		if err := layout.CheckBlobName(tt.name); (err == nil) != tt.ok {
			t.Errorf("layout.CheckBlobName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// ParseMetadata refuses a file naming a blob that is not a plain blob
// name, whatever else is right with it; EncodeMetadata writes one (tests
// build hostile files with it).
func TestMetadataRefusesBlobPaths(t *testing.T) {
	for _, uploaded := range []string{"../../../../other/0/segments/data/_0.fdt__u", "..", ".", "sub/_0.fdt__u", `x\_0.fdt__u`, "_0.fdt__u\x00"} {
		m := &layout.Metadata{Version: 2, Body: layout.Body210, Generation: 1, PrimaryTerm: 1,
			Checkpoint:   &layout.Checkpoint{IndexName: "i", Codec: "c", SegmentsGen: 1, PrimaryTerm: 1},
			SegmentInfos: []byte("si"),
			Files: []layout.FileEntry{
				{Name: "_0.fdt", Uploaded: uploaded, Checksum: 1, Length: 10},
				{Name: "_0.si", Uploaded: "_0.si__u", Checksum: 2, Length: 10},
			}}
		raw, err := layout.EncodeMetadata(m)
		if err != nil {
			t.Fatalf("encode %q: %v", uploaded, err)
		}
		if _, err := layout.ParseMetadata(raw); !errors.Is(err, layout.ErrBadMetadata) {
			t.Errorf("a file uploaded as %q: %v; want layout.ErrBadMetadata", uploaded, err)
		}
		if _, _, err := shardEntries(m, nil, fetcher.Object{}); err == nil {
			t.Errorf("shardEntries took a file uploaded as %q", uploaded)
		}
	}
}

// layout.MetadataNewer orders metadata files as OpenSearch picks the newest:
// primary term, generation, then translog generation and upload counter
// (refreshes of one commit); never back, never the same state twice.
func TestMetadataNewer(t *testing.T) {
	name := func(term, gen, tlog, counter int64) string {
		return layout.FormatMetadataName(layout.MetadataName{PrimaryTerm: term, Generation: gen, TranslogGeneration: tlog,
			UploadCounter: counter, NodeHash: "-1234567", CreatedMillis: 1_700_000_000_000, Version: 2})
	}
	cur := name(2, 25, 25, 7)
	for _, tt := range []struct {
		what  string
		name  string
		newer bool
	}{
		{"an older generation (segments_5 after segments_p)", name(2, 5, 5, 9), false},
		{"an older primary term at a higher generation", name(1, 99, 99, 99), false},
		{"the same state under another node hash", layout.FormatMetadataName(layout.MetadataName{PrimaryTerm: 2, Generation: 25,
			TranslogGeneration: 25, UploadCounter: 7, NodeHash: "42", CreatedMillis: 1, Version: 2}), false},
		{"a lower upload counter of the commit", name(2, 25, 25, 6), false},
		{"a higher generation", name(2, 26, 26, 1), true},
		{"a higher primary term at a lower generation", name(3, 4, 4, 1), true},
		{"a later refresh of the same commit (translog)", name(2, 25, 26, 1), true},
		{"a later refresh of the same commit (counter)", name(2, 25, 25, 8), true},
	} {
		if got := layout.MetadataNewer(tt.name, cur); got != tt.newer {
			t.Errorf("%s: newer %v, want %v", tt.what, got, tt.newer)
		}
		if tt.newer && layout.MetadataNewer(cur, tt.name) {
			t.Errorf("%s: each is newer than the other", tt.what)
		}
	}
	if layout.MetadataNewer(cur, cur) {
		t.Error("a name is newer than itself")
	}
}

// An index path file is an index's by the UUID field of its name, not by
// a name that contains the UUID.
func TestIndexPathFileUUID(t *testing.T) {
	for _, tt := range []struct {
		name, uuid string
		ok         bool
	}{
		{"remote_path_idx#2#1#abc", "idx", true},
		{"remote_path_other-idx-x#1#1#x", "other-idx-x", true},
		{"remote_path_idx", "idx", true},
		{"remote_path_#1#1#x", "", false},
		{"remote_pathidx#1", "", false},
		{"x/remote_path_idx#1", "", false},
	} {
		uuid, ok := layout.IndexPathFileUUID(tt.name)
		if uuid != tt.uuid || ok != tt.ok {
			t.Errorf("layout.IndexPathFileUUID(%q) = %q, %v; want %q, %v", tt.name, uuid, ok, tt.uuid, tt.ok)
		}
	}
}
