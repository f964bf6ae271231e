package lucene

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParseHeaderFooter feeds arbitrary bytes to the header and footer
// parsers. None may panic; every error must wrap ErrCorrupt; a parsed
// header must lie within the input and re-encode to an equal header; and
// a Checker fed the bytes in two pieces must agree with CheckFile.
func FuzzParseHeaderFooter(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendHeader(nil, "segment_md", 3))
	f.Add(AppendFooter(AppendHeader(nil, "segment_md", 3)))
	f.Add(AppendFooter(AppendIndexHeader(nil, "Lucene90CompoundData", 0, testID, "")))
	// A whole file: an IndexHeader with a suffix, a body, a footer.
	f.Add(AppendFooter(append(AppendIndexHeader(nil, "Lucene912PostingsWriterDoc", 0, testID, "Lucene912_0"), bytes.Repeat([]byte{7, 0x80}, 80)...)))
	f.Add(footer(FooterMagic, 1, 1<<40))
	f.Add([]byte{0x3f, 0xd7, 0x6c, 0x17, 0xff, 0xff, 0xff, 0xff, 0x07})

	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := ParseHeader(b); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseHeader error %v does not wrap ErrCorrupt", err)
			}
		} else {
			if h.Len < HeaderLength(h.Codec) || h.Len > len(b) || h.ID != nil {
				t.Fatalf("ParseHeader = %+v on %d bytes", h, len(b))
			}
			again, err := ParseHeader(AppendHeader(nil, h.Codec, h.Version))
			if err != nil || again.Codec != h.Codec || again.Version != h.Version || again.Len != HeaderLength(h.Codec) {
				t.Fatalf("re-encoded %+v parses as %+v, %v", h, again, err)
			}
		}

		if h, err := ParseIndexHeader(b); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseIndexHeader error %v does not wrap ErrCorrupt", err)
			}
		} else {
			if h.Len < IndexHeaderLength(h.Codec, h.Suffix) || h.Len > len(b) || len(h.ID) != IDLength {
				t.Fatalf("ParseIndexHeader = %+v on %d bytes", h, len(b))
			}
			enc := AppendIndexHeader(nil, h.Codec, h.Version, [IDLength]byte(h.ID), h.Suffix)
			if h.Len == len(enc) && !bytes.Equal(enc, b[:h.Len]) {
				t.Fatalf("re-encoded %+v is %x, input %x", h, enc, b[:h.Len])
			}
		}

		want, wantErr := CheckFile(b)
		if wantErr != nil && !errors.Is(wantErr, ErrCorrupt) {
			t.Fatalf("CheckFile error %v does not wrap ErrCorrupt", wantErr)
		}
		c := NewChecker(int64(len(b)))
		cut := len(b) / 3
		c.Write(b[:cut])
		c.Write(b[cut:])
		got, gotErr := c.Check()
		if got != want || (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Fatalf("Checker = %+v, %v; CheckFile = %+v, %v", got, gotErr, want, wantErr)
		}
	})
}
