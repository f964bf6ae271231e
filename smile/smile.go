// Package smile decodes Smile, the binary JSON of Jackson that
// Elasticsearch and OpenSearch write their snapshot metadata in
// (snap-*.dat, the shard-level index-*), as the format specification
// (github.com/FasterXML/smile-format-specification, version 1.0.4)
// defines it: the header and its flags, every value and key token, 7-bit
// and raw binary, shared property names and shared string values.
//
// The input is untrusted: a repository may hold anything. Every length
// is checked against the bytes left before anything is allocated;
// nesting is bounded (Limits.MaxDepth); a back-reference to a name or
// value never defined, a reserved token, a truncated token or trailing
// bytes are errors naming the offset. Decode never panics on any input
// (the fuzz target checks it).
//
// The input's size does not bound what decoding it builds: one byte (a
// null, a shared value reference) becomes an array slot of 16 bytes and
// more, so 64 MB of them would take gigabytes (issue 42). What a decode
// builds is bounded instead (Limits.MaxBuilt): each node is charged an
// estimate of the heap it takes, no less than it takes, before it is
// allocated, and a decode that would build more fails.
package smile

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"unicode/utf8"
)

// A decoded value is one of: nil (null), bool, int64, *big.Int, float64,
// Decimal, string, []byte (binary), []any (an array) or *Object.

// Decimal is a BigDecimal: Unscaled × 10^-Scale, exactly.
type Decimal struct {
	Unscaled *big.Int
	Scale    int32
}

// Object is a decoded JSON object, its members in their order.
type Object struct {
	Members []Member
}

// Member is one property of an Object.
type Member struct {
	Name  string
	Value any
}

// Get returns the value of the first member named name.
func (o *Object) Get(name string) (any, bool) {
	for _, m := range o.Members {
		if m.Name == name {
			return m.Value, true
		}
	}
	return nil, false
}

// Limits bound what a decode accepts.
type Limits struct {
	// MaxDepth is the deepest nesting of arrays and objects; 0 means
	// DefaultMaxDepth.
	MaxDepth int
	// MaxBuilt is the most bytes a decode may build, as Decode charges
	// them; 0 (or less) means DefaultMaxBuilt. Besides it a decode holds
	// its two back-reference tables (32 KiB at most) and the garbage of
	// growing arrays and objects (at most as much again: capacity
	// doubles, and what it adds is charged).
	MaxBuilt int64
}

// DefaultMaxDepth is deeper than any snapshot metadata nests (four
// levels) by far, and shallow enough that a hostile file of nested
// brackets costs nothing.
const DefaultMaxDepth = 64

// DefaultMaxBuilt is far above what real snapshot metadata builds: a
// shard's snap-*.dat costs about 600 bytes a file as Decode charges it
// (an object of seven members, its strings, its slot in the files
// array), so 10,000 files build 6 MiB and 64 MiB holds some 110,000,
// more files than a shard has. A hostile document of one-byte tokens is
// refused after building 64 MiB, where it would otherwise take 35 bytes
// of heap a byte of input.
const DefaultMaxBuilt = 64 << 20

// What Decode charges against Limits.MaxBuilt, in bytes: the heap each
// node takes on a 64-bit platform, rounded up.
const (
	slotCost   = 16 // an array's element: an interface value
	memberCost = 32 // an object's member: its name and its value
	headerCost = 24 // an array or binary boxed in an interface, an *Object
	boxCost    = 16 // a string, int64, float64 or Decimal boxed in an interface
	bigCost    = 64 // a *big.Int, besides its words
)

// bytesCost is what n bytes of a string or binary cost: whole words.
func bytesCost(n int) int64 { return (int64(n) + 7) &^ 7 }

// Error is a decode failure at an offset of the input.
type Error struct {
	Offset int
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("smile: at byte %d: %s", e.Offset, e.Msg) }

// ErrSmile is what every decode error wraps (errors.Is).
var ErrSmile = errors.New("not valid smile")

func (e *Error) Unwrap() error { return ErrSmile }

// Header flags (byte 3 of the header).
const (
	flagSharedNames  = 0x01
	flagSharedValues = 0x02
	flagRawBinary    = 0x04
)

// maxShared is the size of each back-reference table; a table that is
// full starts over.
const maxShared = 1024

// maxShareable is the longest string, in bytes, that a table keeps.
const maxShareable = 64

// Decode decodes data, a Smile document: the header ":)\n" and its flags,
// one value, and optionally the end marker 0xFF.
//
// It charges what it builds against lim.MaxBuilt before allocating it:
// an array or object 24 bytes, and each slot it adds (capacity, not
// length) 16 bytes an array element, 32 an object member; a string 16
// bytes and its bytes in whole words, a binary 24 and its bytes, both
// even when the string is a back-reference to one already built (a
// shared name likewise its bytes); an int64 or float64 16; a BigInteger
// 64 and five times its bytes (the 7-bit buffer, the words and the
// temporaries of a negative value), a BigDecimal 16 more; null, booleans
// and the empty string nothing beyond their slot. A decode that would
// build more fails with an *Error at the offset of the token that would
// exceed it.
func Decode(data []byte, lim Limits) (any, error) {
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultMaxDepth
	}
	if lim.MaxBuilt <= 0 {
		lim.MaxBuilt = DefaultMaxBuilt
	}
	d := &decoder{data: data, lim: lim, left: lim.MaxBuilt}
	if len(data) < 4 || data[0] != ':' || data[1] != ')' || data[2] != '\n' {
		return nil, d.fail(0, "no smile header")
	}
	flags := data[3]
	if v := flags >> 4; v != 0 {
		return nil, d.fail(3, fmt.Sprintf("version %d (this decoder reads version 0)", v))
	}
	d.sharedNames = flags&flagSharedNames != 0
	d.sharedValues = flags&flagSharedValues != 0
	d.rawBinary = flags&flagRawBinary != 0
	d.pos = 4
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.pos < len(data) && data[d.pos] == 0xFF {
		d.pos++
	}
	if d.pos != len(data) {
		return nil, d.fail(d.pos, fmt.Sprintf("%d bytes after the value", len(data)-d.pos))
	}
	return v, nil
}

type decoder struct {
	data []byte
	pos  int
	lim  Limits
	left int64 // of lim.MaxBuilt, the bytes not yet charged

	sharedNames, sharedValues, rawBinary bool
	names, values                        []string // the back-reference tables
}

func (d *decoder) fail(at int, msg string) error { return &Error{Offset: at, Msg: msg} }

// charge takes n bytes of the build budget for what the token at offset
// at is about to allocate, or fails.
func (d *decoder) charge(at int, n int64) error {
	if n > d.left {
		return d.overBudget(at)
	}
	d.left -= n
	return nil
}

func (d *decoder) overBudget(at int) error {
	return d.fail(at, fmt.Sprintf("the decoded value would take more than %d bytes, the most a decode may build (Limits.MaxBuilt)", d.lim.MaxBuilt))
}

// grow returns s with room for one more element of size bytes, charging
// the capacity it adds: twice as much, or what the budget has left.
func grow[T any](d *decoder, s []T, at int, size int64) ([]T, error) {
	if len(s) < cap(s) {
		return s, nil
	}
	n := int64(max(4, 2*cap(s)))
	if room := int64(cap(s)) + d.left/size; n > room {
		n = room
	}
	if n <= int64(len(s)) {
		return nil, d.overBudget(at)
	}
	d.left -= (n - int64(cap(s))) * size
	t := make([]T, len(s), n)
	copy(t, s)
	return t, nil
}

func (d *decoder) byte() (byte, error) {
	if d.pos >= len(d.data) {
		return 0, d.fail(d.pos, "truncated")
	}
	b := d.data[d.pos]
	d.pos++
	return b, nil
}

// take returns the next n bytes, n checked against what is left.
func (d *decoder) take(n int) ([]byte, error) {
	if n < 0 || n > len(d.data)-d.pos {
		return nil, d.fail(d.pos, fmt.Sprintf("a length of %d bytes, with %d left", n, len(d.data)-d.pos))
	}
	b := d.data[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

// vint reads an unsigned VInt of at most bits bits: big-endian groups of
// 7 bits, the last byte with its top bit set carrying 6.
func (d *decoder) vint(bits int) (uint64, error) {
	start := d.pos
	var v uint64
	for {
		b, err := d.byte()
		if err != nil {
			return 0, err
		}
		if b&0x80 != 0 {
			if b&0x40 != 0 {
				return 0, d.fail(d.pos-1, "a VInt's last byte with bit 6 set")
			}
			if v>>58 != 0 {
				return 0, d.fail(start, "a VInt above 64 bits")
			}
			v = v<<6 | uint64(b&0x3F)
			break
		}
		if v>>57 != 0 {
			return 0, d.fail(start, "a VInt above 64 bits")
		}
		v = v<<7 | uint64(b)
	}
	if bits < 64 && v>>bits != 0 {
		return 0, d.fail(start, fmt.Sprintf("a VInt above %d bits", bits))
	}
	return v, nil
}

func zigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// length reads a VInt length, refusing one above the input's size (the
// data it counts must follow in the input).
func (d *decoder) length() (int, error) {
	at := d.pos
	u, err := d.vint(64)
	if err != nil {
		return 0, err
	}
	if u > uint64(len(d.data)) {
		return 0, d.fail(at, fmt.Sprintf("a length of %d, more than the input holds", u))
	}
	return int(u), nil
}

// text reads n bytes of UTF-8 (ascii: all below 0x80).
func (d *decoder) text(n int, ascii bool) (string, error) {
	at := d.pos
	b, err := d.take(n)
	if err != nil {
		return "", err
	}
	if ascii {
		for _, c := range b {
			if c >= 0x80 {
				return "", d.fail(at, "a non-ASCII byte in an ASCII string")
			}
		}
	} else if !utf8.Valid(b) {
		return "", d.fail(at, "a string that is not UTF-8")
	}
	if err := d.charge(at, bytesCost(n)); err != nil {
		return "", err
	}
	return string(b), nil
}

// until reads UTF-8 up to the end-of-string marker 0xFC.
func (d *decoder) until() (string, error) {
	at := d.pos
	for i := d.pos; i < len(d.data); i++ {
		if d.data[i] == 0xFC {
			b := d.data[d.pos:i]
			d.pos = i + 1
			if !utf8.Valid(b) {
				return "", d.fail(at, "a string that is not UTF-8")
			}
			if err := d.charge(at, bytesCost(len(b))); err != nil {
				return "", err
			}
			return string(b), nil
		}
	}
	return "", d.fail(at, "a string with no end marker")
}

// sevenBit decodes n raw bytes from their 7-bit encoding: each 7 bytes
// as 8 bytes of 7 bits; a last group of k < 7 bytes as k bytes of 7 bits
// and one byte holding the last k bits, right-aligned. It charges cost
// (at the token's offset at) once the bytes are there.
func (d *decoder) sevenBit(n, at int, cost int64) ([]byte, error) {
	enc := n/7*8 + n%7
	if n%7 != 0 {
		enc++
	}
	in, err := d.take(enc)
	if err != nil {
		return nil, err
	}
	if err := d.charge(at, cost); err != nil {
		return nil, err
	}
	out := make([]byte, 0, n)
	for len(in) > 0 {
		k := min(7, n-len(out)) // raw bytes of this group
		var acc uint64
		if k == 7 {
			for _, c := range in[:8] {
				acc = acc<<7 | uint64(c&0x7F)
			}
			in = in[8:]
		} else {
			for _, c := range in[:k] {
				acc = acc<<7 | uint64(c&0x7F)
			}
			acc = acc<<k | uint64(in[k])&(1<<k-1)
			in = in[k+1:]
		}
		for i := k - 1; i >= 0; i-- {
			out = append(out, byte(acc>>(8*i)))
		}
	}
	return out, nil
}

// sevenBitValue reads a length, then that many bytes of 7-bit encoded
// binary (a BigInteger's or BigDecimal's magnitude, a binary value),
// charging fixed and perWord for each word of them.
func (d *decoder) sevenBitValue(at int, fixed, perWord int64) ([]byte, error) {
	n, err := d.length()
	if err != nil {
		return nil, err
	}
	return d.sevenBit(n, at, fixed+perWord*bytesCost(n))
}

// refValue is a back-reference to a shared value string: it costs what
// the string would, though its bytes are the table's.
func (d *decoder) refValue(i, at int) (any, error) {
	s, err := d.ref(d.values, i, at, "value")
	if err != nil {
		return nil, err
	}
	if err := d.charge(at, boxCost+bytesCost(len(s))); err != nil {
		return nil, err
	}
	return s, nil
}

// fixed7 reads n bytes of 7 bits each, right-aligned (a float's bits).
func (d *decoder) fixed7(n int) (uint64, error) {
	b, err := d.take(n)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, c := range b {
		if c >= 0x80 {
			return 0, d.fail(d.pos-n, "a float byte with its top bit set")
		}
		v = v<<7 | uint64(c)
	}
	return v, nil
}

// share keeps s in table t, if short enough, starting the table over
// when it is full.
func share(t *[]string, s string) {
	if len(s) > maxShareable {
		return
	}
	if len(*t) >= maxShared {
		*t = (*t)[:0]
	}
	*t = append(*t, s)
}

func (d *decoder) ref(t []string, i int, at int, what string) (string, error) {
	if i < 0 || i >= len(t) {
		return "", d.fail(at, fmt.Sprintf("a back-reference to %s %d, of %d defined", what, i, len(t)))
	}
	return t[i], nil
}

// value decodes one value in value mode, at nesting depth.
func (d *decoder) value(depth int) (any, error) {
	at := d.pos
	t, err := d.byte()
	if err != nil {
		return nil, err
	}
	// A number costs its box (tokens 0x24 to 0x29, small integers; a
	// BigDecimal's is charged with its magnitude).
	if t >= 0x24 && t <= 0x29 || t >= 0xC0 && t <= 0xDF {
		if err := d.charge(at, boxCost); err != nil {
			return nil, err
		}
	}
	switch {
	case t >= 0x01 && t <= 0x1F: // short shared value reference: 1-31
		if !d.sharedValues {
			return nil, d.fail(at, "a shared value reference, with shared values off in the header")
		}
		return d.refValue(int(t)-1, at)
	case t == 0x20:
		return "", nil
	case t == 0x21:
		return nil, nil
	case t == 0x22:
		return false, nil
	case t == 0x23:
		return true, nil
	case t == 0x24:
		u, err := d.vint(32)
		if err != nil {
			return nil, err
		}
		return int64(int32(zigzag(u))), nil
	case t == 0x25:
		u, err := d.vint(64)
		if err != nil {
			return nil, err
		}
		return zigzag(u), nil
	case t == 0x26:
		mag, err := d.sevenBitValue(at, bigCost, 5)
		if err != nil {
			return nil, err
		}
		return signedBig(mag), nil
	case t == 0x28:
		v, err := d.fixed7(5)
		if err != nil {
			return nil, err
		}
		if v>>32 != 0 {
			return nil, d.fail(at, "a float of more than 32 bits")
		}
		return float64(math.Float32frombits(uint32(v))), nil
	case t == 0x29:
		v, err := d.fixed7(10)
		if err != nil {
			return nil, err
		}
		if d.data[d.pos-10] > 1 { // 70 bits carry 64: the first byte holds one
			return nil, d.fail(at, "a double of more than 64 bits")
		}
		return math.Float64frombits(v), nil
	case t == 0x2A:
		u, err := d.vint(32)
		if err != nil {
			return nil, err
		}
		scale := int32(zigzag(u))
		mag, err := d.sevenBitValue(at, boxCost+bigCost, 5)
		if err != nil {
			return nil, err
		}
		return Decimal{Unscaled: signedBig(mag), Scale: scale}, nil
	case t >= 0x40 && t <= 0xBF:
		// Tiny (1-32) and short (33-64) ASCII, tiny (2-33) and short
		// (34-65) Unicode: 5 bits of length, offset by the class.
		ascii := t < 0x80
		n := int(t&0x1F) + 1
		if !ascii {
			n++
		}
		if t&0x20 != 0 {
			n += 32
		}
		if err := d.charge(at, boxCost); err != nil {
			return nil, err
		}
		s, err := d.text(n, ascii)
		if err != nil {
			return nil, err
		}
		if d.sharedValues {
			share(&d.values, s)
		}
		return s, nil
	case t >= 0xC0 && t <= 0xDF:
		return zigzag(uint64(t & 0x1F)), nil
	case t == 0xE0, t == 0xE4: // long ASCII, long Unicode: never shared
		if err := d.charge(at, boxCost); err != nil {
			return nil, err
		}
		return d.until()
	case t == 0xE8:
		return d.sevenBitValue(at, headerCost, 1)
	case t >= 0xEC && t <= 0xEF: // long shared value reference
		if !d.sharedValues {
			return nil, d.fail(at, "a shared value reference, with shared values off in the header")
		}
		lo, err := d.byte()
		if err != nil {
			return nil, err
		}
		return d.refValue(int(t&0x03)<<8|int(lo), at)
	case t == 0xF8:
		return d.array(depth + 1)
	case t == 0xFA:
		return d.object(depth + 1)
	case t == 0xFD:
		if !d.rawBinary {
			return nil, d.fail(at, "raw binary, with raw binary off in the header")
		}
		n, err := d.length()
		if err != nil {
			return nil, err
		}
		b, err := d.take(n)
		if err != nil {
			return nil, err
		}
		if err := d.charge(at, headerCost+bytesCost(n)); err != nil {
			return nil, err
		}
		out := make([]byte, n)
		copy(out, b)
		return out, nil
	}
	return nil, d.fail(at, fmt.Sprintf("token 0x%02X is not a value", t))
}

// signedBig is a BigInteger's two's-complement big-endian magnitude.
func signedBig(b []byte) *big.Int {
	v := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return v
}

func (d *decoder) array(depth int) (any, error) {
	at := d.pos - 1
	if depth > d.lim.MaxDepth {
		return nil, d.fail(at, fmt.Sprintf("nesting deeper than %d", d.lim.MaxDepth))
	}
	if err := d.charge(at, headerCost); err != nil {
		return nil, err
	}
	out := []any{}
	for {
		if d.pos < len(d.data) && d.data[d.pos] == 0xF9 {
			d.pos++
			return out, nil
		}
		var err error
		if out, err = grow(d, out, d.pos, slotCost); err != nil {
			return nil, err
		}
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

func (d *decoder) object(depth int) (any, error) {
	at := d.pos - 1
	if depth > d.lim.MaxDepth {
		return nil, d.fail(at, fmt.Sprintf("nesting deeper than %d", d.lim.MaxDepth))
	}
	if err := d.charge(at, headerCost); err != nil {
		return nil, err
	}
	o := &Object{}
	for {
		kat := d.pos
		name, end, err := d.key()
		if err != nil {
			return nil, err
		}
		if end {
			return o, nil
		}
		if o.Members, err = grow(d, o.Members, kat, memberCost); err != nil {
			return nil, err
		}
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		o.Members = append(o.Members, Member{Name: name, Value: v})
	}
}

// key decodes one token in key mode: a property name, or the end of the
// object.
func (d *decoder) key() (name string, end bool, err error) {
	at := d.pos
	t, err := d.byte()
	if err != nil {
		return "", false, err
	}
	switch {
	case t == 0xFB:
		return "", true, nil
	case t == 0x20:
		return "", false, nil
	case t >= 0x30 && t <= 0x33, t >= 0x40 && t <= 0x7F: // a shared name: long (10 bits), short (0-63)
		if !d.sharedNames {
			return "", false, d.fail(at, "a shared name reference, with shared names off in the header")
		}
		i := int(t & 0x3F)
		if t < 0x40 {
			lo, err := d.byte()
			if err != nil {
				return "", false, err
			}
			i = int(t&0x03)<<8 | int(lo)
		}
		s, err := d.ref(d.names, i, at, "name")
		if err != nil {
			return "", false, err
		}
		return s, false, d.charge(at, bytesCost(len(s)))
	}
	// A name sent in full, which takes the next index of the table.
	var s string
	switch {
	case t == 0x34: // long Unicode name
		s, err = d.until()
	case t >= 0x80 && t <= 0xBF: // short ASCII name: 1-64 bytes
		s, err = d.text(int(t&0x3F)+1, true)
	case t >= 0xC0 && t <= 0xF7: // short Unicode name: 2-57 bytes
		s, err = d.text(int(t&0x3F)+2, false)
	default:
		return "", false, d.fail(at, fmt.Sprintf("token 0x%02X is not a property name", t))
	}
	if err != nil {
		return "", false, err
	}
	if d.sharedNames {
		share(&d.names, s)
	}
	return s, false, nil
}
