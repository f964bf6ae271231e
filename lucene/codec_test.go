package lucene

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"
)

var testID = [IDLength]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

func TestParseHeader(t *testing.T) {
	good := AppendHeader(nil, "segment_md", 3)
	long := AppendHeader(nil, strings.Repeat("c", MaxCodecLength), 1)
	// A codec name of 128 bytes, which AppendHeader refuses to write.
	overlong := binary.BigEndian.AppendUint32(nil, CodecMagic)
	overlong = append(overlong, 0x80, 0x01)
	overlong = append(overlong, strings.Repeat("c", 128)...)
	overlong = binary.BigEndian.AppendUint32(overlong, 1)
	// Lucene's reader accepts a non-canonical two-byte VInt for 10.
	twoByteLen := append([]byte{0x3f, 0xd7, 0x6c, 0x17, 0x8a, 0x00}, "segment_md"...)
	twoByteLen = binary.BigEndian.AppendUint32(twoByteLen, 3)
	nonASCIIName := AppendHeader(nil, "abc", 1)
	nonASCIIName[5] = 0xc3

	tests := []struct {
		name    string
		b       []byte
		want    Header
		wantErr bool
	}{
		{"good", good, Header{Codec: "segment_md", Version: 3, Len: 19}, false},
		{"good with body after", append(bytes.Clone(good), 1, 2, 3), Header{Codec: "segment_md", Version: 3, Len: 19}, false},
		{"empty codec", AppendHeader(nil, "", 0xffffffff), Header{Version: 0xffffffff, Len: 9}, false},
		{"127-byte codec", long, Header{Codec: strings.Repeat("c", 127), Version: 1, Len: 136}, false},
		{"two-byte name length", twoByteLen, Header{Codec: "segment_md", Version: 3, Len: 20}, false},
		{"empty", nil, Header{}, true},
		{"bad magic", append([]byte{0x3f, 0xd7, 0x6c, 0x18}, good[4:]...), Header{}, true},
		{"footer magic", AppendFooter(nil), Header{}, true},
		{"truncated in magic", good[:3], Header{}, true},
		{"truncated in name", good[:8], Header{}, true},
		{"truncated in version", good[:len(good)-1], Header{}, true},
		{"overlong name", overlong, Header{}, true},
		{"name length past the end", append(bytes.Clone(good[:4]), 100), Header{}, true},
		{"negative name length", append(bytes.Clone(good[:4]), 0xff, 0xff, 0xff, 0xff, 0x0f), Header{}, true},
		{"non-ASCII name", nonASCIIName, Header{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseHeader(tt.b)
			if tt.wantErr {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("ParseHeader = %+v, %v; want an error wrapping ErrCorrupt", h, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseHeader: %v", err)
			}
			if h.Codec != tt.want.Codec || h.Version != tt.want.Version || h.ID != nil || h.Suffix != "" || h.Len != tt.want.Len {
				t.Fatalf("ParseHeader = %+v, want %+v", h, tt.want)
			}
		})
	}
}

func TestParseIndexHeader(t *testing.T) {
	good := AppendIndexHeader(nil, "Lucene90CompoundData", 0, testID, "5")
	wantLen := IndexHeaderLength("Lucene90CompoundData", "5")
	maxSuffix := AppendIndexHeader(nil, "c", 7, testID, strings.Repeat("s", MaxSuffixLength))
	nonASCIISuffix := bytes.Clone(good)
	nonASCIISuffix[len(nonASCIISuffix)-1] = 0xff

	tests := []struct {
		name    string
		b       []byte
		want    Header
		wantErr bool
	}{
		{"good", good, Header{Codec: "Lucene90CompoundData", ID: testID[:], Suffix: "5", Len: wantLen}, false},
		{"good with body after", append(bytes.Clone(good), 9, 9), Header{Codec: "Lucene90CompoundData", ID: testID[:], Suffix: "5", Len: wantLen}, false},
		{"empty suffix", AppendIndexHeader(nil, "x", 2, testID, ""), Header{Codec: "x", Version: 2, ID: testID[:], Len: 27}, false},
		{"255-byte suffix", maxSuffix, Header{Codec: "c", Version: 7, ID: testID[:], Suffix: strings.Repeat("s", 255), Len: 10 + 16 + 1 + 255}, false},
		{"plain header only", AppendHeader(nil, "Lucene90CompoundData", 0), Header{}, true},
		{"bad magic", append([]byte{0, 0, 0, 0}, good[4:]...), Header{}, true},
		{"truncated in id", good[:HeaderLength("Lucene90CompoundData")+15], Header{}, true},
		{"truncated before suffix length", good[:HeaderLength("Lucene90CompoundData")+16], Header{}, true},
		{"truncated in suffix", good[:len(good)-1], Header{}, true},
		{"non-ASCII suffix", nonASCIISuffix, Header{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := ParseIndexHeader(tt.b)
			if tt.wantErr {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("ParseIndexHeader = %+v, %v; want an error wrapping ErrCorrupt", h, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseIndexHeader: %v", err)
			}
			if h.Codec != tt.want.Codec || h.Version != tt.want.Version || !bytes.Equal(h.ID, tt.want.ID) || h.Suffix != tt.want.Suffix || h.Len != tt.want.Len {
				t.Fatalf("ParseIndexHeader = %+v, want %+v", h, tt.want)
			}
		})
	}
}

// The parsed id is a copy: changing the input afterwards leaves it alone.
func TestParseIndexHeaderCopiesID(t *testing.T) {
	b := AppendIndexHeader(nil, "c", 1, testID, "")
	h, err := ParseIndexHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	clear(b)
	if !bytes.Equal(h.ID, testID[:]) {
		t.Fatalf("ID = %x after clearing the input, want %x", h.ID, testID)
	}
}

func TestAppendHeaderPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"128-byte codec":   func() { AppendHeader(nil, strings.Repeat("c", 128), 0) },
		"non-ASCII codec":  func() { AppendHeader(nil, "cödec", 0) },
		"256-byte suffix":  func() { AppendIndexHeader(nil, "c", 0, testID, strings.Repeat("s", 256)) },
		"non-ASCII suffix": func() { AppendIndexHeader(nil, "c", 0, testID, "é") },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil {
					t.Fatal("no panic")
				} else if s, _ := r.(string); !strings.HasPrefix(s, "lucene: ") {
					t.Fatalf("panic %v does not name the package", r)
				}
			}()
			f()
		})
	}
}

// footer builds a footer from its three fields, valid or not.
func footer(magic, alg uint32, sum uint64) []byte {
	b := binary.BigEndian.AppendUint32(nil, magic)
	b = binary.BigEndian.AppendUint32(b, alg)
	return binary.BigEndian.AppendUint64(b, sum)
}

func TestParseFooter(t *testing.T) {
	tests := []struct {
		name    string
		tail    []byte
		want    uint64
		wantErr bool
	}{
		{"good", footer(FooterMagic, 0, 0xdeadbeef), 0xdeadbeef, false},
		{"good zero", footer(FooterMagic, 0, 0), 0, false},
		{"bad magic", footer(CodecMagic, 0, 1), 0, true},
		{"algorithm 1", footer(FooterMagic, 1, 1), 0, true},
		{"upper bits set", footer(FooterMagic, 0, 1<<32|1), 0, true},
		{"top bit set", footer(FooterMagic, 0, 1<<63), 0, true},
		{"short tail", footer(FooterMagic, 0, 1)[1:], 0, true},
		{"long tail", append([]byte{0}, footer(FooterMagic, 0, 1)...), 0, true},
		{"empty", nil, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFooter(tt.tail)
			if tt.wantErr {
				if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrChecksum) {
					t.Fatalf("ParseFooter = %+v, %v; want an error wrapping ErrCorrupt only", f, err)
				}
				return
			}
			if err != nil || f.Checksum != tt.want {
				t.Fatalf("ParseFooter = %+v, %v; want checksum %#x", f, err, tt.want)
			}
		})
	}
}

func TestAppendFooter(t *testing.T) {
	body := AppendHeader(nil, "c", 1)
	b := AppendFooter(bytes.Clone(body))
	if len(b) != len(body)+FooterLength {
		t.Fatalf("AppendFooter added %d bytes, want %d", len(b)-len(body), FooterLength)
	}
	want := footer(FooterMagic, 0, uint64(crc32.ChecksumIEEE(b[:len(b)-8])))
	if !bytes.Equal(b[len(body):], want) {
		t.Fatalf("footer = %x, want %x", b[len(body):], want)
	}
}

func TestCheckFile(t *testing.T) {
	good := AppendFooter(AppendIndexHeader(nil, "c", 1, testID, "s"))
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		return b
	}
	tests := []struct {
		name      string
		data      []byte
		corrupt   bool // want ErrCorrupt
		mismatch  bool // want ErrChecksum as well
		wantNamed bool // the error names both checksums
	}{
		{"good", good, false, false, false},
		{"footer only", AppendFooter(nil), false, false, false},
		{"flipped body byte", flip(3), true, true, true},
		{"flipped footer magic", flip(len(good) - 16), true, false, false},
		{"flipped algorithm id", flip(len(good) - 9), true, false, false},
		{"flipped checksum byte", flip(len(good) - 1), true, true, true},
		{"flipped checksum upper byte", flip(len(good) - 8), true, false, false},
		{"shorter than a footer", good[len(good)-15:], true, false, false},
		{"empty", nil, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := CheckFile(tt.data)
			if !tt.corrupt {
				want := binary.BigEndian.Uint64(tt.data[len(tt.data)-8:])
				if err != nil || f.Checksum != want {
					t.Fatalf("CheckFile = %+v, %v; want checksum %#x", f, err, want)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrChecksum) != tt.mismatch {
				t.Fatalf("CheckFile error %v: want ErrCorrupt, ErrChecksum %v", err, tt.mismatch)
			}
			if tt.wantNamed {
				stored := binary.BigEndian.Uint64(tt.data[len(tt.data)-8:])
				computed := crc32.ChecksumIEEE(tt.data[:len(tt.data)-8])
				for _, v := range []uint64{stored, uint64(computed)} {
					if s := fmt.Sprintf("%#08x", v); !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name %s", err, s)
					}
				}
			}
		})
	}
}

// checkStream feeds data to a Checker in the given chunk sizes (the last
// chunk takes what is left) and returns Check's result.
func checkStream(t *testing.T, data []byte, chunks []int) (Footer, error) {
	t.Helper()
	c := NewChecker(int64(len(data)))
	rest := data
	for _, n := range chunks {
		n = min(n, len(rest))
		if w, err := c.Write(rest[:n]); err != nil || w != n {
			t.Fatalf("Write(%d bytes) = %d, %v", n, w, err)
		}
		rest = rest[n:]
	}
	if w, err := c.Write(rest); err != nil || w != len(rest) {
		t.Fatalf("Write(%d bytes) = %d, %v", len(rest), w, err)
	}
	return c.Check()
}

// randomChunks splits size bytes into random pieces, empty ones included.
func randomChunks(r *rand.Rand, size int) []int {
	var chunks []int
	for left := size; left > 0; {
		var n int
		switch r.IntN(4) {
		case 0:
			n = 0
		case 1:
			n = 1 + r.IntN(3)
		case 2:
			n = 1 + r.IntN(20)
		default:
			n = 1 + r.IntN(size)
		}
		n = min(n, left)
		chunks = append(chunks, n)
		left -= n
	}
	return chunks
}

// A Checker reports exactly what CheckFile does, whatever the chunking,
// on valid files, damaged ones, and ones shorter than a footer.
func TestCheckerMatchesCheckFile(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		size := r.IntN(300)
		if i%50 == 0 {
			size = r.IntN(200 << 10)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		if size >= FooterLength {
			data = AppendFooter(data[:size-FooterLength])
			switch r.IntN(4) {
			case 0: // leave it valid
			case 1: // damage any one byte
				data[r.IntN(size)] ^= byte(1 + r.IntN(255))
			case 2: // damage the checksum only
				data[size-1-r.IntN(4)] ^= 0x80
			case 3: // a valid footer over a changed body
				data[r.IntN(size-8)] ^= 0x01
			}
		}
		wantF, wantErr := CheckFile(data)
		gotF, gotErr := checkStream(t, data, randomChunks(r, size))
		if gotF != wantF || (gotErr == nil) != (wantErr == nil) ||
			(gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Fatalf("size %d: Checker = %+v, %v; CheckFile = %+v, %v", size, gotF, gotErr, wantF, wantErr)
		}
		if wantErr == nil && size < FooterLength {
			t.Fatalf("size %d: CheckFile accepted a file shorter than a footer", size)
		}
	}
}

func TestCheckerSizeErrors(t *testing.T) {
	data := AppendFooter(AppendHeader(nil, "c", 1))

	t.Run("under-write", func(t *testing.T) {
		c := NewChecker(int64(len(data)))
		c.Write(data[:len(data)-1])
		if _, err := c.Check(); err == nil {
			t.Fatal("Check after a short write succeeded")
		}
		// Finishing the file afterwards makes it good.
		c.Write(data[len(data)-1:])
		if _, err := c.Check(); err != nil {
			t.Fatalf("Check after the last byte: %v", err)
		}
	})
	t.Run("nothing written", func(t *testing.T) {
		if _, err := NewChecker(int64(len(data))).Check(); err == nil {
			t.Fatal("Check with nothing written succeeded")
		}
	})
	t.Run("over-write", func(t *testing.T) {
		c := NewChecker(int64(len(data)))
		if _, err := c.Write(data); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Write([]byte{0}); err == nil || n != 0 {
			t.Fatalf("Write past size = %d, %v; want 0 and an error", n, err)
		}
		// The overflow is sticky: the file was not size bytes.
		if _, err := c.Check(); err == nil {
			t.Fatal("Check after an over-write succeeded")
		}
		if _, err := c.Write(nil); err == nil {
			t.Fatal("Write after an over-write succeeded")
		}
	})
	t.Run("one write past size", func(t *testing.T) {
		c := NewChecker(int64(len(data)) - 1)
		if n, err := c.Write(data); err == nil || n != 0 {
			t.Fatalf("Write = %d, %v; want 0 and an error", n, err)
		}
	})
	t.Run("size below footer", func(t *testing.T) {
		for _, size := range []int64{-1, 0, 8, FooterLength - 1} {
			c := NewChecker(size)
			if size > 0 {
				c.Write(make([]byte, size))
			}
			if _, err := c.Check(); !errors.Is(err, ErrCorrupt) {
				t.Errorf("size %d: Check = %v, want ErrCorrupt", size, err)
			}
		}
	})
}

func BenchmarkChecker(b *testing.B) {
	data := AppendFooter(make([]byte, 1<<20))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		c := NewChecker(int64(len(data)))
		for p := data; len(p) > 0; p = p[min(len(p), 64<<10):] {
			c.Write(p[:min(len(p), 64<<10)])
		}
		if _, err := c.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
