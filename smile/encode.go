package smile

import (
	"bytes"
	"fmt"
	"math"
)

// EncodeOptions are the header flags Encode writes with.
type EncodeOptions struct {
	SharedNames, SharedValues, RawBinary bool
}

// Encode writes v (a value of the kinds Decode returns, but *big.Int and
// Decimal) as Smile, as Jackson's generator does: with SharedNames,
// every name of at most 64 bytes takes the next index and a name sent
// again is a back-reference (0x40+i, or 0x30+(i>>8) and i&0xFF), never
// to an index whose low byte is 0xFE or 0xFF (sent again instead); value
// strings of at most 64 bytes likewise with SharedValues; the shortest
// form of each token. It is for tests and tools: segfs reads Smile, it
// never writes it. It panics on a value of another kind.
func Encode(v any, o EncodeOptions) []byte {
	e := &encoder{sharedNames: o.SharedNames, sharedVals: o.SharedValues, rawBinary: o.RawBinary, names: map[string]int{}, vals: map[string]int{}}
	flags := byte(0)
	if o.SharedNames {
		flags |= flagSharedNames
	}
	if o.SharedValues {
		flags |= flagSharedValues
	}
	if o.RawBinary {
		flags |= flagRawBinary
	}
	e.buf.Write([]byte{':', ')', '\n', flags})
	e.value(v)
	return e.buf.Bytes()
}

type encoder struct {
	buf                     bytes.Buffer
	sharedNames, sharedVals bool
	names, vals             map[string]int
	nameCount, valCount     int
	rawBinary               bool
}

func (e *encoder) vint(u uint64) {
	var groups []byte
	groups = append(groups, byte(u&0x3F)|0x80)
	u >>= 6
	for u > 0 {
		groups = append(groups, byte(u&0x7F))
		u >>= 7
	}
	for i := len(groups) - 1; i >= 0; i-- {
		e.buf.WriteByte(groups[i])
	}
}

func zz(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func (e *encoder) sevenBit(b []byte) {
	for len(b) >= 7 {
		var acc uint64
		for _, c := range b[:7] {
			acc = acc<<8 | uint64(c)
		}
		for i := 7; i >= 0; i-- {
			e.buf.WriteByte(byte(acc>>(7*i)) & 0x7F)
		}
		b = b[7:]
	}
	if k := len(b); k > 0 {
		var acc uint64
		for _, c := range b {
			acc = acc<<8 | uint64(c)
		}
		// k bytes of 7 bits, then the last k bits right-aligned.
		for i := 0; i < k; i++ {
			e.buf.WriteByte(byte(acc>>(8*k-7*(i+1))) & 0x7F)
		}
		e.buf.WriteByte(byte(acc) & (1<<k - 1))
	}
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func (e *encoder) str(s string) {
	n := len(s)
	if n == 0 {
		e.buf.WriteByte(0x20)
		return
	}
	if e.sharedVals && n <= maxShareable {
		if i, ok := e.vals[s]; ok {
			if i < 31 {
				e.buf.WriteByte(byte(i + 1))
			} else {
				e.buf.Write([]byte{0xEC | byte(i>>8), byte(i)})
			}
			return
		}
	}
	switch a := ascii(s); {
	case a && n <= 32:
		e.buf.WriteByte(0x40 + byte(n-1))
	case a && n <= 64:
		e.buf.WriteByte(0x60 + byte(n-33))
	case !a && n >= 2 && n <= 33:
		e.buf.WriteByte(0x80 + byte(n-2))
	case !a && n >= 34 && n <= 65:
		e.buf.WriteByte(0xA0 + byte(n-34))
	default:
		if a {
			e.buf.WriteByte(0xE0)
		} else {
			e.buf.WriteByte(0xE4)
		}
		e.buf.WriteString(s)
		e.buf.WriteByte(0xFC)
		return
	}
	e.buf.WriteString(s)
	if e.sharedVals && n <= maxShareable {
		if e.valCount == maxShared {
			e.vals, e.valCount = map[string]int{}, 0
		}
		e.vals[s] = e.valCount
		e.valCount++
	}
}

func (e *encoder) key(s string) {
	n := len(s)
	if n == 0 {
		e.buf.WriteByte(0x20)
		return
	}
	if e.sharedNames {
		if i, ok := e.names[s]; ok && i&0xFF < 0xFE {
			if i < 64 {
				e.buf.WriteByte(0x40 + byte(i))
			} else {
				e.buf.Write([]byte{0x30 | byte(i>>8), byte(i)})
			}
			return
		}
	}
	switch a := ascii(s); {
	case a && n <= 64:
		e.buf.WriteByte(0x80 + byte(n-1))
		e.buf.WriteString(s)
	case !a && n >= 2 && n <= 57:
		e.buf.WriteByte(0xC0 + byte(n-2))
		e.buf.WriteString(s)
	default:
		e.buf.WriteByte(0x34)
		e.buf.WriteString(s)
		e.buf.WriteByte(0xFC)
	}
	if e.sharedNames && n <= maxShareable {
		if e.nameCount == maxShared {
			e.names, e.nameCount = map[string]int{}, 0
		}
		e.names[s] = e.nameCount // a name sent again takes a new index
		e.nameCount++
	}
}

func (e *encoder) value(v any) {
	switch v := v.(type) {
	case nil:
		e.buf.WriteByte(0x21)
	case bool:
		if v {
			e.buf.WriteByte(0x23)
		} else {
			e.buf.WriteByte(0x22)
		}
	case int64:
		switch {
		case v >= -16 && v <= 15:
			e.buf.WriteByte(0xC0 + byte(zz(v)))
		case v >= math.MinInt32 && v <= math.MaxInt32:
			e.buf.WriteByte(0x24)
			e.vint(zz(v))
		default:
			e.buf.WriteByte(0x25)
			e.vint(zz(v))
		}
	case float64:
		e.buf.WriteByte(0x29)
		bits := math.Float64bits(v)
		for i := 9; i >= 0; i-- {
			e.buf.WriteByte(byte(bits>>(7*i)) & 0x7F)
		}
	case string:
		e.str(v)
	case []byte:
		if e.rawBinary {
			e.buf.WriteByte(0xFD)
			e.vint(uint64(len(v)))
			e.buf.Write(v)
		} else {
			e.buf.WriteByte(0xE8)
			e.vint(uint64(len(v)))
			e.sevenBit(v)
		}
	case []any:
		e.buf.WriteByte(0xF8)
		for _, x := range v {
			e.value(x)
		}
		e.buf.WriteByte(0xF9)
	case *Object:
		e.buf.WriteByte(0xFA)
		for _, m := range v.Members {
			e.key(m.Name)
			e.value(m.Value)
		}
		e.buf.WriteByte(0xFB)
	default:
		panic(fmt.Sprintf("smile.Encode: a value of type %T", v))
	}
}
