package lucenegen

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/segfs/segfs/lucene"
)

func TestGenerateFile(t *testing.T) {
	tests := []struct {
		name   string
		codec  string
		suffix string
	}{
		{"_0.cfs", "Lucene90CompoundData", ""},
		{"_0.si", "Lucene90SegmentInfo", ""},
		{"_a_Lucene912_0.doc", "Lucene912PostingsWriterDoc", "Lucene912_0"},
		{"_0_1.liv", "Lucene90LiveDocs", "1"},
		{"indices/x/0/_3.tim", "BlockTreeTermsDict", ""},
		{"write.lock", defaultGeneratedCodec, ""},
		{"noext", defaultGeneratedCodec, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			least := GeneratedMinSize(tt.name)
			if want := int64(lucene.IndexHeaderLength(tt.codec, tt.suffix) + lucene.FooterLength); least != want {
				t.Fatalf("GeneratedMinSize = %d, want %d", least, want)
			}
			for _, size := range []int64{least, least + 1, least + 7, least + 8, 1000, 100<<10 + 3} {
				b, err := GenerateFile(tt.name, size, 42)
				if err != nil {
					t.Fatalf("size %d: %v", size, err)
				}
				if int64(len(b)) != size {
					t.Fatalf("size %d: got %d bytes", size, len(b))
				}
				h, err := lucene.ParseIndexHeader(b)
				if err != nil {
					t.Fatalf("size %d: %v", size, err)
				}
				if h.Codec != tt.codec || h.Suffix != tt.suffix || len(h.ID) != lucene.IDLength {
					t.Fatalf("size %d: header %+v, want codec %q suffix %q", size, h, tt.codec, tt.suffix)
				}
				if _, err := lucene.CheckFile(b); err != nil {
					t.Fatalf("size %d: %v", size, err)
				}
			}
			if _, err := GenerateFile(tt.name, least-1, 42); err == nil {
				t.Fatalf("size %d below the minimum accepted", least-1)
			}
		})
	}
}

func TestGenerateFileDeterministic(t *testing.T) {
	a, _ := GenerateFile("_0.fdt", 5000, 7)
	b, _ := GenerateFile("_0.fdt", 5000, 7)
	if !bytes.Equal(a, b) {
		t.Fatal("same arguments, different bytes")
	}
	// A longer file starts with the same body bytes: size only cuts.
	long, _ := GenerateFile("_0.fdt", 9000, 7)
	if n := len(a) - lucene.FooterLength; !bytes.Equal(a[:n], long[:n]) {
		t.Fatal("the body depends on the size")
	}
	other, _ := GenerateFile("_0.fdt", 5000, 8)
	if bytes.Equal(a, other) {
		t.Fatal("different seeds, same bytes")
	}
	// One seed, one id, as the files of one segment share theirs; bodies
	// differ by name.
	tim, _ := GenerateFile("_0.tim", 5000, 7)
	ha, _ := lucene.ParseIndexHeader(a)
	ht, _ := lucene.ParseIndexHeader(tim)
	if !bytes.Equal(ha.ID, ht.ID) {
		t.Fatalf("ids %x and %x differ for one seed", ha.ID, ht.ID)
	}
	if bytes.Equal(a[ha.Len:ha.Len+64], tim[ht.Len:ht.Len+64]) {
		t.Fatal("two names, same body")
	}
}

type failWriter struct{ err error }

func (w failWriter) Write(p []byte) (int, error) { return 0, w.err }

func TestWriteGeneratedFile(t *testing.T) {
	// Streaming gives GenerateFile's bytes, and a lucene.Checker accepts them.
	const size = 300<<10 + 5
	want, err := GenerateFile("_1.vec", size, 3)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	c := lucene.NewChecker(size)
	if err := WriteGeneratedFile(&buf, "_1.vec", size, 3); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatal("WriteGeneratedFile and GenerateFile differ")
	}
	if err := WriteGeneratedFile(c, "_1.vec", size, 3); err != nil {
		t.Fatal(err)
	}
	if f, err := c.Check(); err != nil || f.Checksum != mustFooter(t, want).Checksum {
		t.Fatalf("lucene.Checker = %+v, %v", f, err)
	}
	boom := errors.New("boom")
	if err := WriteGeneratedFile(failWriter{boom}, "_1.vec", size, 3); !errors.Is(err, boom) {
		t.Fatalf("WriteGeneratedFile to a failing writer = %v, want it to wrap %v", err, boom)
	}
}

func mustFooter(t *testing.T, b []byte) lucene.Footer {
	t.Helper()
	f, err := lucene.CheckFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestGenerateSegmentsN(t *testing.T) {
	for _, tt := range []struct {
		gen   int64
		names []string
	}{
		{1, nil},
		{5, []string{"_0"}},
		{36, []string{"_0", "_1", "_a"}},
		{1 << 40, []string{"_zz"}},
	} {
		b := GenerateSegmentsN(tt.gen, tt.names, 9)
		if _, err := lucene.CheckFile(b); err != nil {
			t.Fatalf("gen %d: %v", tt.gen, err)
		}
		h, err := lucene.ParseIndexHeader(b)
		if err != nil {
			t.Fatalf("gen %d: %v", tt.gen, err)
		}
		if h.Codec != "segments" || h.Version != SegmentsVersion || h.Suffix != strconv.FormatInt(tt.gen, 36) {
			t.Fatalf("gen %d: header %+v", tt.gen, h)
		}
		// The body lists the names.
		in := lucene.NewInput(b[h.Len : len(b)-lucene.FooterLength])
		n, err := in.VInt()
		if err != nil || int(n) != len(tt.names) {
			t.Fatalf("gen %d: count %d, %v; want %d", tt.gen, n, err, len(tt.names))
		}
		for _, want := range tt.names {
			if s, err := in.String(255, "name"); err != nil || s != want {
				t.Fatalf("gen %d: name %q, %v; want %q", tt.gen, s, err, want)
			}
		}
		if in.Remaining() != 0 {
			t.Fatalf("gen %d: %d bytes left in the body", tt.gen, in.Remaining())
		}
	}
	if g := GenerateSegmentsN(5, []string{"_0"}, 9); !bytes.Equal(g, GenerateSegmentsN(5, []string{"_0"}, 9)) {
		t.Fatal("same arguments, different bytes")
	}
}
