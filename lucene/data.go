// Package lucene reads and writes the small parts of Lucene's file
// formats that segfs checks: Lucene's DataInput encodings (VInts,
// strings, integers of both byte orders), the codec header, and the
// codec footer with its CRC32 checksum. Every reader is bounded by the
// bytes it is given: a length that claims more than is left is an error
// wrapping ErrCorrupt, never an allocation.
package lucene

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrCorrupt marks bytes that are not what the format says.
var ErrCorrupt = errors.New("lucene: corrupt data")

// Input reads Lucene DataInput encodings from a byte slice. Integers in
// a file's body are little-endian (Lucene 9 and later); the codec header
// and footer are big-endian. Every method fails with an error wrapping
// ErrCorrupt when the slice ends first.
type Input struct {
	b   []byte
	off int
}

// NewInput returns an Input over b.
func NewInput(b []byte) *Input { return &Input{b: b} }

// Offset returns how many bytes have been read.
func (in *Input) Offset() int { return in.off }

// Remaining returns how many bytes are left.
func (in *Input) Remaining() int { return len(in.b) - in.off }

func (in *Input) need(n int, what string) error {
	if n < 0 || n > in.Remaining() {
		return fmt.Errorf("%w: %s of %d bytes at offset %d, %d left", ErrCorrupt, what, n, in.off, in.Remaining())
	}
	return nil
}

// Byte reads one byte.
func (in *Input) Byte() (byte, error) {
	if err := in.need(1, "byte"); err != nil {
		return 0, err
	}
	in.off++
	return in.b[in.off-1], nil
}

// Bytes returns the next n bytes, a sub-slice of the input (not a copy).
func (in *Input) Bytes(n int64, what string) ([]byte, error) {
	if n < 0 || n > int64(in.Remaining()) {
		return nil, fmt.Errorf("%w: %s of %d bytes at offset %d, %d left", ErrCorrupt, what, n, in.off, in.Remaining())
	}
	p := in.b[in.off : in.off+int(n)]
	in.off += int(n)
	return p, nil
}

// BEUint32 reads a big-endian 32-bit integer.
func (in *Input) BEUint32() (uint32, error) {
	if err := in.need(4, "uint32"); err != nil {
		return 0, err
	}
	in.off += 4
	return binary.BigEndian.Uint32(in.b[in.off-4:]), nil
}

// BEUint64 reads a big-endian 64-bit integer.
func (in *Input) BEUint64() (uint64, error) {
	if err := in.need(8, "uint64"); err != nil {
		return 0, err
	}
	in.off += 8
	return binary.BigEndian.Uint64(in.b[in.off-8:]), nil
}

// LEInt64 reads a little-endian 64-bit integer.
func (in *Input) LEInt64() (int64, error) {
	if err := in.need(8, "int64"); err != nil {
		return 0, err
	}
	in.off += 8
	return int64(binary.LittleEndian.Uint64(in.b[in.off-8:])), nil
}

// VInt reads a variable-length int: 7 bits per byte, low bits first, the
// high bit set on every byte but the last; at most 5 bytes.
func (in *Input) VInt() (int32, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		c, err := in.Byte()
		if err != nil {
			return 0, err
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return int32(v), nil
		}
	}
	return 0, fmt.Errorf("%w: VInt longer than 5 bytes at offset %d", ErrCorrupt, in.off)
}

// String reads a VInt length and that many bytes of UTF-8. A length
// past max, or past the bytes left, is an error.
func (in *Input) String(max int, what string) (string, error) {
	n, err := in.VInt()
	if err != nil {
		return "", err
	}
	if n < 0 || int(n) > max {
		return "", fmt.Errorf("%w: %s of %d bytes, at most %d allowed", ErrCorrupt, what, n, max)
	}
	p, err := in.Bytes(int64(n), what)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(p) {
		return "", fmt.Errorf("%w: %s is not UTF-8", ErrCorrupt, what)
	}
	return string(p), nil
}

// Output appends Lucene DataOutput encodings to B: the inverse of Input,
// for writing the files segfs's tests and encoders produce.
type Output struct {
	B []byte
}

// BEUint32 appends a big-endian 32-bit integer.
func (o *Output) BEUint32(v uint32) { o.B = binary.BigEndian.AppendUint32(o.B, v) }

// BEUint64 appends a big-endian 64-bit integer.
func (o *Output) BEUint64(v uint64) { o.B = binary.BigEndian.AppendUint64(o.B, v) }

// LEInt64 appends a little-endian 64-bit integer.
func (o *Output) LEInt64(v int64) { o.B = binary.LittleEndian.AppendUint64(o.B, uint64(v)) }

// Byte appends one byte.
func (o *Output) Byte(c byte) { o.B = append(o.B, c) }

// Bytes appends p as it is.
func (o *Output) Bytes(p []byte) { o.B = append(o.B, p...) }

// VInt appends a variable-length int (a negative one takes 5 bytes).
func (o *Output) VInt(v int32) {
	u := uint32(v)
	for u >= 0x80 {
		o.B = append(o.B, byte(u)|0x80)
		u >>= 7
	}
	o.B = append(o.B, byte(u))
}

// String appends a VInt length and the string's bytes.
func (o *Output) String(s string) {
	o.VInt(int32(len(s)))
	o.B = append(o.B, s...)
}
