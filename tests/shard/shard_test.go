package shard

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestGenerateDeterministicAndWellFormed(t *testing.T) {
	spec := Spec{Seed: 7, Scale: 8 << 20, Segments: 3, JSONStoredFields: true, BigFile: 3 << 20}
	a, err := Generate(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b, err := Generate(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Files) != len(b.Files) {
		t.Fatalf("file counts differ: %d vs %d", len(a.Files), len(b.Files))
	}
	for i := range a.Files {
		if a.Files[i] != b.Files[i] {
			t.Errorf("file %d differs between runs: %+v vs %+v", i, a.Files[i], b.Files[i])
		}
	}
	if err := Verify(dir, b); err != nil {
		t.Fatal(err)
	}
	want := 3*17 + 2 // per-segment files, segments_N, the big file
	if len(b.Files) != want {
		t.Errorf("got %d files, want %d: %v", len(b.Files), want, b.Names())
	}
	total := b.TotalSize() - spec.BigFile
	if total < spec.Scale*95/100 || total > spec.Scale*105/100 {
		t.Errorf("total %d, want within 5%% of %d", total, spec.Scale)
	}
	if big, ok := b.Lookup(BigFileName); !ok || big.Size != spec.BigFile {
		t.Errorf("big file: %+v, %v", big, ok)
	}
	for _, f := range b.Files {
		checkLuceneFile(t, filepath.Join(dir, f.Name))
	}
}

// checkLuceneFile checks the header magic, the codec name and the footer
// checksum as Lucene's CodecUtil would.
func checkLuceneFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(path)
	if got := binary.BigEndian.Uint32(data); got != 0x3FD76C17 {
		t.Errorf("%s: header magic %#x", name, got)
	}
	n := int(data[4])
	if codec := string(data[5 : 5+n]); codec == "" || strings.ContainsFunc(codec, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		t.Errorf("%s: codec name %q", name, codec)
	}
	foot := data[len(data)-16:]
	if got := binary.BigEndian.Uint32(foot); got != 0xC02893E8 {
		t.Errorf("%s: footer magic %#x", name, got)
	}
	if got := binary.BigEndian.Uint32(foot[4:]); got != 0 {
		t.Errorf("%s: footer algorithm %d", name, got)
	}
	if got, want := binary.BigEndian.Uint64(foot[8:]), uint64(crc32.ChecksumIEEE(data[:len(data)-8])); got != want {
		t.Errorf("%s: footer checksum %#x, want %#x", name, got, want)
	}
}

func TestJSONStoredFields(t *testing.T) {
	dir := t.TempDir()
	m, err := Generate(dir, Spec{Seed: 1, Scale: 4 << 20, Segments: 1, JSONStoredFields: true})
	if err != nil {
		t.Fatal(err)
	}
	var fdt File
	for _, f := range m.Files {
		if strings.HasSuffix(f.Name, ".fdt") {
			fdt = f
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, fdt.Name))
	if err != nil {
		t.Fatal(err)
	}
	n := int(data[4])
	suffixAt := 4 + 1 + n + 4 + 16
	body := data[suffixAt+1+int(data[suffixAt]) : len(data)-16]
	if body[0] != '{' {
		t.Fatalf("%s body starts with %q", fdt.Name, body[:10])
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	lines, bad := 0, 0
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			bad++ // only the last, cut-off line may fail
			continue
		}
		lines++
		if rec["cab_color"] == nil || rec["total_amount"] == nil {
			t.Fatalf("record lacks fields: %s", sc.Text())
		}
	}
	if lines < 1000 || bad > 1 {
		t.Errorf("%d records, %d unparsable lines", lines, bad)
	}
}

func TestGenerateReusesCache(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Seed: 3, Scale: 2 << 20, Segments: 2}
	m, err := Generate(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, m.Largest().Name)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(victim, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(victim); !st.ModTime().Equal(old) {
		t.Errorf("cached shard was rewritten")
	}
	// A file of the wrong size forces a regeneration.
	if err := os.Truncate(victim, 10); err != nil {
		t.Fatal(err)
	}
	m2, err := Generate(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir, m2); err != nil {
		t.Fatal(err)
	}
	// Another spec replaces the old files.
	m3, err := Generate(dir, Spec{Seed: 4, Scale: 1 << 20, Segments: 1})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(m3.Files)+1 {
		t.Errorf("dir holds %d entries, want %d files and the manifest", len(entries), len(m3.Files))
	}
}

func TestPlanShapeAtFullScale(t *testing.T) {
	files, err := plan(Spec{Seed: 1, Scale: 1500 << 20, Segments: 3})
	if err != nil {
		t.Fatal(err)
	}
	var huge, small int
	for _, f := range files {
		switch {
		case f.size >= 100<<20:
			huge++
		case f.size <= 8<<20:
			small++
		}
	}
	if huge < 3 || small < 20 {
		t.Errorf("%d files of >= 100 MiB, %d of <= 8 MiB; want a few and tens", huge, small)
	}
}

func TestPlanRejectsBadSpecs(t *testing.T) {
	for _, spec := range []Spec{{Scale: 0, Segments: 1}, {Scale: 1, Segments: 0}, {Scale: 1, Segments: 1, BigFile: -1}} {
		if _, err := Generate(t.TempDir(), spec); err == nil {
			t.Errorf("Generate(%+v) succeeded", spec)
		}
	}
}

func TestAppendFixed(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		dec  int
		want string
	}{{1205, 2, "12.05"}, {5, 2, "0.05"}, {-73993896, 6, "-73.993896"}, {7, 0, "7"}, {0, 2, "0.00"}} {
		if got := string(appendFixed(nil, tc.v, tc.dec)); got != tc.want {
			t.Errorf("appendFixed(%d, %d) = %q, want %q", tc.v, tc.dec, got, tc.want)
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	for _, jsonFields := range []bool{false, true} {
		name := "random"
		if jsonFields {
			name = "json"
		}
		b.Run(name, func(b *testing.B) {
			spec := Spec{Seed: 1, Scale: 64 << 20, Segments: 3, JSONStoredFields: jsonFields}
			b.SetBytes(spec.Scale)
			for i := 0; b.Loop(); i++ {
				spec.Seed = int64(i) // defeat the cache
				if _, err := Generate(b.TempDir(), spec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
