package lucene

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The codec header and footer, as Lucene's CodecUtil writes them. Both
// are big-endian, unlike the little-endian body of a Lucene 9+ file.
const (
	// CodecMagic starts every codec header.
	CodecMagic uint32 = 0x3FD76C17
	// FooterMagic starts every footer: the bitwise inverse of CodecMagic.
	FooterMagic uint32 = ^CodecMagic // 0xC02893E8
	// FooterLength is the size of a footer: magic, algorithm id, checksum.
	FooterLength = 16
	// IDLength is the size of an IndexHeader's id (the segment's id).
	IDLength = 16

	// MaxCodecLength is the longest codec name a header may hold; Lucene
	// requires fewer than 128 ASCII characters, so the VInt length is one
	// byte when written canonically.
	MaxCodecLength = 127
	// MaxSuffixLength is the longest IndexHeader suffix: its length is a u8.
	MaxSuffixLength = 255

	// checksumOffset is where the checksum starts, counted back from the
	// end of a file: the CRC covers every byte before it.
	checksumOffset = 8
)

// ErrChecksum marks a footer whose checksum does not match the file's
// bytes. It wraps ErrCorrupt, as Lucene throws CorruptIndexException for
// it: a caller that only asks "is this file bad" tests ErrCorrupt, one
// that must tell a damaged body from a malformed footer tests ErrChecksum.
var ErrChecksum = fmt.Errorf("%w: checksum mismatch", ErrCorrupt)

// Header is a codec header: CodecMagic, the codec name (VInt length and
// ASCII, at most MaxCodecLength bytes), a BE u32 version. An IndexHeader
// adds an IDLength-byte id and a u8-length ASCII suffix.
type Header struct {
	Codec   string
	Version uint32
	// ID is the IndexHeader's id, a copy (so a Header never pins the
	// buffer it was parsed from); nil for a plain header.
	ID []byte
	// Suffix is the IndexHeader's suffix ("" for a plain header), e.g. the
	// base-36 generation of segments_N or a per-field format's suffix.
	Suffix string
	// Len is how many bytes the header takes. Lucene writes the name's
	// VInt length in one byte, so Len is HeaderLength or
	// IndexHeaderLength; a reader also accepts a longer VInt, as Lucene's
	// does, and Len then counts the bytes actually read.
	Len int
}

// HeaderLength returns the length of a plain header for codec, as
// AppendHeader writes it.
func HeaderLength(codec string) int { return 9 + len(codec) }

// IndexHeaderLength returns the length of an IndexHeader for codec and
// suffix, as AppendIndexHeader writes it.
func IndexHeaderLength(codec, suffix string) int {
	return HeaderLength(codec) + IDLength + 1 + len(suffix)
}

// ParseHeader parses the plain codec header at the start of b; bytes
// after it are ignored. Any error wraps ErrCorrupt.
func ParseHeader(b []byte) (Header, error) {
	in := NewInput(b)
	h, err := parseHeader(in)
	if err != nil {
		return Header{}, fmt.Errorf("codec header: %w", err)
	}
	h.Len = in.Offset()
	return h, nil
}

// ParseIndexHeader parses the IndexHeader (codec header, id, suffix) at
// the start of b; bytes after it are ignored. Any error wraps ErrCorrupt.
func ParseIndexHeader(b []byte) (Header, error) {
	in := NewInput(b)
	h, err := parseHeader(in)
	if err != nil {
		return Header{}, fmt.Errorf("index header: %w", err)
	}
	id, err := in.Bytes(IDLength, "id")
	if err != nil {
		return Header{}, fmt.Errorf("index header %s: %w", h.Codec, err)
	}
	n, err := in.Byte()
	if err != nil {
		return Header{}, fmt.Errorf("index header %s: suffix length: %w", h.Codec, err)
	}
	suffix, err := in.Bytes(int64(n), "suffix")
	if err != nil {
		return Header{}, fmt.Errorf("index header %s: %w", h.Codec, err)
	}
	if i := nonASCII(suffix); i >= 0 {
		return Header{}, fmt.Errorf("%w: index header %s: suffix byte %d is %#x, not ASCII", ErrCorrupt, h.Codec, i, suffix[i])
	}
	h.ID = append([]byte(nil), id...)
	h.Suffix = string(suffix)
	h.Len = in.Offset()
	return h, nil
}

// parseHeader reads magic, codec name and version. The name is checked
// against MaxCodecLength before any byte of it is read, so a corrupt
// length costs nothing.
func parseHeader(in *Input) (Header, error) {
	magic, err := in.BEUint32()
	if err != nil {
		return Header{}, err
	}
	if magic != CodecMagic {
		return Header{}, fmt.Errorf("%w: magic %#08x, want %#08x", ErrCorrupt, magic, CodecMagic)
	}
	n, err := in.VInt()
	if err != nil {
		return Header{}, fmt.Errorf("codec name length: %w", err)
	}
	if n < 0 || n > MaxCodecLength {
		return Header{}, fmt.Errorf("%w: codec name of %d bytes, at most %d allowed", ErrCorrupt, n, MaxCodecLength)
	}
	name, err := in.Bytes(int64(n), "codec name")
	if err != nil {
		return Header{}, err
	}
	if i := nonASCII(name); i >= 0 {
		return Header{}, fmt.Errorf("%w: codec name byte %d is %#x, not ASCII", ErrCorrupt, i, name[i])
	}
	version, err := in.BEUint32()
	if err != nil {
		return Header{}, fmt.Errorf("codec %s: version: %w", name, err)
	}
	return Header{Codec: string(name), Version: version}, nil
}

// AppendHeader appends a plain codec header to b. A codec name that is
// not ASCII or longer than MaxCodecLength is a caller's bug and panics,
// as Lucene's writeHeader throws.
func AppendHeader(b []byte, codec string, version uint32) []byte {
	mustASCII("codec name", codec, MaxCodecLength)
	o := Output{B: b}
	o.BEUint32(CodecMagic)
	o.String(codec)
	o.BEUint32(version)
	return o.B
}

// AppendIndexHeader appends an IndexHeader to b. The codec name and the
// suffix must be ASCII of at most MaxCodecLength and MaxSuffixLength
// bytes; otherwise it panics.
func AppendIndexHeader(b []byte, codec string, version uint32, id [IDLength]byte, suffix string) []byte {
	mustASCII("suffix", suffix, MaxSuffixLength)
	b = AppendHeader(b, codec, version)
	b = append(b, id[:]...)
	b = append(b, byte(len(suffix)))
	return append(b, suffix...)
}

func mustASCII(what, s string, max int) {
	if len(s) > max {
		panic(fmt.Sprintf("lucene: %s %q is %d bytes, at most %d allowed", what, s, len(s), max))
	}
	if nonASCII([]byte(s)) >= 0 {
		panic(fmt.Sprintf("lucene: %s %q is not ASCII", what, s))
	}
}

// nonASCII returns the index of the first byte of p above 0x7f, or -1.
func nonASCII(p []byte) int {
	for i, c := range p {
		if c >= 0x80 {
			return i
		}
	}
	return -1
}

// Footer is the last FooterLength bytes of every Lucene file: FooterMagic,
// a BE u32 algorithm id 0 (zlib CRC32), and a BE u64 checksum whose upper
// 32 bits are zero: the CRC32 (IEEE) of every byte before the checksum,
// the footer's magic and algorithm id included.
type Footer struct {
	Checksum uint64
}

// ParseFooter parses a footer; tail must be exactly the file's last
// FooterLength bytes. It checks the magic, the algorithm id and the
// checksum's upper bits, as Lucene's validateFooter and readCRC do, but
// not the checksum itself (see CheckFile). Any error wraps ErrCorrupt.
func ParseFooter(tail []byte) (Footer, error) {
	if len(tail) != FooterLength {
		return Footer{}, fmt.Errorf("%w: footer of %d bytes, want %d", ErrCorrupt, len(tail), FooterLength)
	}
	if magic := binary.BigEndian.Uint32(tail); magic != FooterMagic {
		return Footer{}, fmt.Errorf("%w: footer magic %#08x, want %#08x", ErrCorrupt, magic, FooterMagic)
	}
	if alg := binary.BigEndian.Uint32(tail[4:]); alg != 0 {
		return Footer{}, fmt.Errorf("%w: footer checksum algorithm %d, want 0 (CRC32)", ErrCorrupt, alg)
	}
	sum := binary.BigEndian.Uint64(tail[8:])
	if sum>>32 != 0 {
		return Footer{}, fmt.Errorf("%w: footer checksum %#016x is not a CRC32 (upper 32 bits set)", ErrCorrupt, sum)
	}
	return Footer{Checksum: sum}, nil
}

// AppendFooter appends a footer to b, a whole file but its footer: the
// magic, algorithm 0, and the CRC32 of b and those 8 bytes.
func AppendFooter(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, FooterMagic)
	b = binary.BigEndian.AppendUint32(b, 0)
	return binary.BigEndian.AppendUint64(b, uint64(crc32.ChecksumIEEE(b)))
}

// CheckFile checks a whole file's footer: it is valid (ParseFooter) and
// its checksum equals the CRC32 of data[:len(data)-8], as Lucene's
// checksumEntireFile does. A mismatch is an error wrapping ErrChecksum
// that names both values; any other error wraps ErrCorrupt.
func CheckFile(data []byte) (Footer, error) {
	if len(data) < FooterLength {
		return checkTail(int64(len(data)), nil, 0)
	}
	crc := crc32.ChecksumIEEE(data[:len(data)-checksumOffset])
	return checkTail(int64(len(data)), data[len(data)-FooterLength:], crc)
}

// checkTail is the part of CheckFile that Checker shares, so both report
// the same errors: tail is the file's last FooterLength bytes and crc the
// CRC32 of all but its last 8.
func checkTail(size int64, tail []byte, crc uint32) (Footer, error) {
	if size < FooterLength {
		return Footer{}, fmt.Errorf("%w: file of %d bytes is shorter than a footer (%d)", ErrCorrupt, size, FooterLength)
	}
	f, err := ParseFooter(tail)
	if err != nil {
		return Footer{}, err
	}
	if f.Checksum != uint64(crc) {
		return Footer{}, fmt.Errorf("%w: footer says %#08x, the %d bytes before it hash to %#08x", ErrChecksum, f.Checksum, size-checksumOffset, crc)
	}
	return f, nil
}

// Checker computes a file's checksum from its bytes written in order, for
// files too large to hold in memory: after exactly size bytes, Check
// reports what CheckFile would on those bytes. It keeps only the running
// CRC and the last FooterLength bytes, never the file. A Checker is not
// safe for concurrent use; its zero value is not usable (use NewChecker).
type Checker struct {
	// size is fixed at construction.
	size int64
	// n counts the bytes written so far, n <= size.
	n   int64
	crc uint32
	// tail holds the bytes at offsets [size-FooterLength, size) seen so far.
	tail [FooterLength]byte
	// err is sticky: once a write overflowed, the file is not size bytes.
	err error
}

// NewChecker returns a Checker for a file of size bytes. A size below
// FooterLength is accepted here and reported by Check, so a corrupt
// length read from metadata is an error, not a panic.
func NewChecker(size int64) *Checker { return &Checker{size: size} }

// Write feeds the next bytes of the file. It fails, writing nothing, if
// they would take the file past size; that failure is sticky, and Check
// reports it too.
func (c *Checker) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > c.size-c.n {
		c.err = fmt.Errorf("lucene: checker: write of %d bytes at offset %d passes the file's size %d", len(p), c.n, c.size)
		return 0, c.err
	}
	// The CRC covers offsets [0, size-8).
	if end := c.size - checksumOffset; c.n < end {
		c.crc = crc32.Update(c.crc, crc32.IEEETable, p[:min(int64(len(p)), end-c.n)])
	}
	// Copy what falls in [size-FooterLength, size) into tail.
	if start := c.size - FooterLength; c.n+int64(len(p)) > start {
		skip := max(start-c.n, 0)
		copy(c.tail[c.n+skip-start:], p[skip:])
	}
	c.n += int64(len(p))
	return len(p), nil
}

// Check reports on the file once all size bytes are written: the same
// Footer and error as CheckFile, or an error if a write overflowed or
// fewer than size bytes were written. It may be called more than once.
func (c *Checker) Check() (Footer, error) {
	if c.err != nil {
		return Footer{}, c.err
	}
	if c.n < c.size {
		return Footer{}, fmt.Errorf("lucene: checker: %d of %d bytes written", c.n, c.size)
	}
	return checkTail(c.size, c.tail[:], c.crc)
}
