package smile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func obj(kv ...any) *Object {
	o := &Object{}
	for i := 0; i < len(kv); i += 2 {
		o.Members = append(o.Members, Member{Name: kv[i].(string), Value: kv[i+1]})
	}
	return o
}

// Each token class of the specification, as bytes written by hand.
func TestTokenClasses(t *testing.T) {
	hdr := func(flags byte, b ...byte) []byte { return append([]byte{':', ')', '\n', flags}, b...) }
	for _, c := range []struct {
		name string
		in   []byte
		want any
	}{
		{"empty string", hdr(0, 0x20), ""},
		{"null", hdr(0, 0x21), nil},
		{"false", hdr(0, 0x22), false},
		{"true", hdr(0, 0x23), true},
		{"small int -16", hdr(0, 0xDF), int64(-16)},
		{"small int 15", hdr(0, 0xDE), int64(15)},
		{"int32 zigzag 300", hdr(0, 0x24, 0x09, 0x98), int64(300)},                             // zz(300) = 600 = 9<<6 | 24
		{"int32 -1000", hdr(0, 0x24, 0x1F, 0x8F), int64(-1000)},                                // zz = 1999 = 31<<6 | 15
		{"int64 2^40", hdr(0, 0x25, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80), int64(1) << 40}, // zz = 2^41 = 2^35<<6
		{"tiny ascii", hdr(0, 0x42, 'a', 'b', 'c'), "abc"},
		{"tiny unicode of 2 bytes", hdr(0, 0x80, 0xC3, 0xA9), "é"},
		{"long ascii", hdr(0, append(append([]byte{0xE0}, strings.Repeat("x", 70)...), 0xFC)...), strings.Repeat("x", 70)},
		{"float32 1.5", hdr(0, 0x28, 0x03, 0x7E, 0x00, 0x00, 0x00), 1.5}, // 0x3FC00000 in 7-bit groups
		{"raw binary", hdr(flagRawBinary, 0xFD, 0x83, 1, 2, 3), []byte{1, 2, 3}},
		{"7-bit binary", hdr(0, 0xE8, 0x82, 0x7F, 0x7F, 0x03), []byte{0xFF, 0xFF}},
		{"array", hdr(0, 0xF8, 0xC2, 0x21, 0xF9), []any{int64(1), nil}},
		{"empty object", hdr(0, 0xFA, 0xFB), &Object{}},
		{"object with a shared name", hdr(flagSharedNames, 0xF8, 0xFA, 0x80, 'a', 0xC2, 0xFB, 0xFA, 0x40, 0xC4, 0xFB, 0xF9),
			[]any{obj("a", int64(1)), obj("a", int64(2))}},
		{"long shared name reference", nil, nil}, // by the encoder below
		{"shared value", hdr(flagSharedValues, 0xF8, 0x41, 'h', 'i', 0x01, 0xF9), []any{"hi", "hi"}},
		{"end marker", hdr(0, 0x21, 0xFF), nil},
		{"BigInteger -1", hdr(0, 0x26, 0x81, 0x7F, 0x01), big.NewInt(-1)},
	} {
		if c.in == nil {
			continue
		}
		got, err := Decode(c.in, Limits{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !equal(got, c.want) {
			t.Errorf("%s: %#v, want %#v", c.name, got, c.want)
		}
	}
	// A BigDecimal: 12345 × 10^-2.
	in := hdr(0, 0x2A, 0x84, 0x82)
	e := &encoder{}
	e.sevenBit(big.NewInt(12345).Bytes())
	in = append(in, e.buf.Bytes()...)
	got, err := Decode(in, Limits{})
	if d, ok := got.(Decimal); err != nil || !ok || d.Scale != 2 || d.Unscaled.Int64() != 12345 {
		t.Errorf("BigDecimal: %#v, %v", got, err)
	}
}

func equal(a, b any) bool {
	switch a := a.(type) {
	case *big.Int:
		b, ok := b.(*big.Int)
		return ok && a.Cmp(b) == 0
	case float64:
		b, ok := b.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(b)
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equal(a[i], b[i]) {
				return false
			}
		}
		return true
	case *Object:
		b, ok := b.(*Object)
		if !ok || len(a.Members) != len(b.Members) {
			return false
		}
		for i := range a.Members {
			if a.Members[i].Name != b.Members[i].Name || !equal(a.Members[i].Value, b.Members[i].Value) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// randomValue makes a value of every kind the encoder writes, with
// names and strings drawn from small sets so that they repeat (shared
// references) and from long ones (no sharing, long forms).
func randomValue(r *rand.Rand, depth int) any {
	words := []string{"name", "physical_name", "length", "checksum", "part_size", "written_by", "meta_hash", "é", "日本語のファイル名",
		strings.Repeat("k", 64), strings.Repeat("k", 65), strings.Repeat("ü", 40)}
	switch k := r.IntN(10); {
	case k == 0 && depth < 5:
		n := r.IntN(5)
		a := make([]any, n)
		for i := range a {
			a[i] = randomValue(r, depth+1)
		}
		return a
	case k == 1 && depth < 5:
		o := &Object{}
		for range r.IntN(6) {
			o.Members = append(o.Members, Member{Name: words[r.IntN(len(words))] + fmt.Sprint(r.IntN(3)), Value: randomValue(r, depth+1)})
		}
		return o
	case k == 2:
		return []int64{0, -16, 15, 16, -17, math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, r.Int64() - r.Int64()}[r.IntN(10)]
	case k == 3:
		return words[r.IntN(len(words))]
	case k == 4:
		b := make([]byte, r.IntN(30))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	case k == 5:
		return r.NormFloat64()
	case k == 6:
		return []any{nil, true, false, ""}[r.IntN(4)]
	default:
		return strings.Repeat("a", r.IntN(80))
	}
}

// Values written by the encoder in every header configuration decode to
// themselves; many names (over a table's 1024) exercise the long
// references and the table's restart.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(36, 1))
	for i := range 300 {
		v := randomValue(r, 0)
		if i%50 == 0 { // more names than a table holds
			o := &Object{}
			for j := range 2500 {
				o.Members = append(o.Members, Member{Name: fmt.Sprintf("n%d", j%1300), Value: int64(j)})
			}
			v = o
		}
		for _, cfg := range [][3]bool{{true, true, true}, {true, false, true}, {false, false, false}, {true, true, false}} {
			in := Encode(v, EncodeOptions{SharedNames: cfg[0], SharedValues: cfg[1], RawBinary: cfg[2]})
			got, err := Decode(in, Limits{})
			if err != nil {
				t.Fatalf("value %d, config %v: %v", i, cfg, err)
			}
			if !equal(got, v) {
				t.Fatalf("value %d, config %v: decoded %#v, want %#v", i, cfg, got, v)
			}
		}
	}
}

// A shard snapshot's shape (docs: formats.md §2): header flags 0x05, the
// files' property names back-referenced after their first use.
func TestSnapshotShape(t *testing.T) {
	files := []any{}
	for i := range 3 {
		files = append(files, obj("name", fmt.Sprintf("__uuid%d", i), "physical_name", fmt.Sprintf("_0.f%d", i), "length", int64(1000+i),
			"checksum", "1x2y3z", "part_size", int64(math.MaxInt64), "written_by", "8.7.0"))
	}
	files = append(files, obj("name", "v__uuid", "physical_name", "_0.si", "length", int64(3), "checksum", "abc", "part_size", int64(math.MaxInt64),
		"written_by", "8.7.0", "meta_hash", []byte{1, 2, 3}))
	v := obj("name", "snap-1", "index_version", int64(7), "start_time", int64(1_700_000_000_000), "time", int64(12),
		"number_of_files", int64(4), "total_size", int64(3006), "files", files)
	in := Encode(v, EncodeOptions{SharedNames: true, RawBinary: true})
	if in[3] != 0x05 {
		t.Fatalf("flags %#x, want 0x05", in[3])
	}
	// The files' names after the first file's are back-references: one
	// byte each instead of the name.
	if plain := Encode(v, EncodeOptions{RawBinary: true}); len(in) >= len(plain)-3*len("physical_name") {
		t.Errorf("with shared names %d bytes, without %d: the names are not shared", len(in), len(plain))
	}
	got, err := Decode(in, Limits{})
	if err != nil || !equal(got, v) {
		t.Fatalf("decoded %#v, %v", got, err)
	}
	fs, _ := got.(*Object).Get("files")
	if n := len(fs.([]any)); n != 4 {
		t.Errorf("%d files, want 4", n)
	}
}

// Hostile inputs: one clear error each, never a panic, never an
// allocation of what a length claims beyond the input.
func TestHostile(t *testing.T) {
	hdr := func(flags byte, b ...byte) []byte { return append([]byte{':', ')', '\n', flags}, b...) }
	deep := hdr(0)
	for range 1000 {
		deep = append(deep, 0xF8)
	}
	for _, c := range []struct {
		name, want string
		in         []byte
	}{
		{"no header", "no smile header", []byte("{}")},
		{"version 1", "version 1", hdr(0x10, 0x21)},
		{"deep nesting", "nesting deeper than 64", deep},
		{"huge raw binary length", "more than the input holds", hdr(flagRawBinary, 0xFD, 0x7F, 0x7F, 0x7F, 0x7F, 0xBF)},
		{"raw binary beyond the input", "a length of 100 bytes, with 2 left",
			append(append(hdr(flagRawBinary, 0xF8, 0xE0), bytes.Repeat([]byte("a"), 100)...), 0xFC, 0xFD, 0x01, 0xA4, 1, 2)},
		{"raw binary with the flag off", "raw binary off", hdr(0, 0xFD, 0x81, 1)},
		{"7-bit binary beyond the input", "more than the input holds", hdr(0, 0xE8, 0x8A, 1, 2)},
		{"name never defined", "back-reference to name 5, of 0 defined", hdr(flagSharedNames, 0xFA, 0x45, 0x21, 0xFB)},
		{"long name reference never defined", "back-reference to name 770", hdr(flagSharedNames, 0xFA, 0x33, 0x02, 0x21, 0xFB)},
		{"value never defined", "back-reference to value 0, of 0 defined", hdr(flagSharedValues, 0x01)},
		{"shared value with the flag off", "shared values off", hdr(0, 0x01)},
		{"string beyond the input", "a length of 32 bytes", hdr(0, 0x5F, 'a')},
		{"long string with no end", "no end marker", hdr(0, 0xE0, 'a', 'b')},
		{"ascii string with a high byte", "non-ASCII", hdr(0, 0x41, 'a', 0xC3)},
		{"unicode string not UTF-8", "not UTF-8", hdr(0, 0x80, 0xFF, 0xFE)},
		{"VInt of 11 bytes", "above 64 bits", hdr(0, 0x25, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x81)},
		{"int32 above 32 bits", "above 32 bits", hdr(0, 0x24, 0x7F, 0x7F, 0x7F, 0x7F, 0x81)},
		{"reserved value token", "token 0x2C is not a value", hdr(0, 0x2C)},
		{"reserved key token", "token 0x21 is not a property name", hdr(0, 0xFA, 0x21)},
		{"truncated object", "truncated", hdr(0, 0xFA, 0x80, 'a')},
		{"trailing bytes", "1 bytes after the value", hdr(0, 0x21, 0x21)},
		{"double of 70 bits", "more than 64 bits", hdr(0, 0x29, 0x7F, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"end array in object", "not a property name", hdr(0, 0xFA, 0xF9)},
	} {
		_, err := Decode(c.in, Limits{})
		var se *Error
		if err == nil || !errors.As(err, &se) || !errors.Is(err, ErrSmile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		v := randomValue(r, 0)
		f.Add(Encode(v, EncodeOptions{SharedNames: true, SharedValues: true, RawBinary: true}))
		f.Add(Encode(v, EncodeOptions{SharedNames: true}))
	}
	f.Add([]byte(":)\n\x05\xfa\x80a\xfb"))
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := Decode(in, Limits{MaxDepth: 16})
		if err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("an error of type %T: %v", err, err)
			}
			return
		}
		// A small budget refuses it or changes nothing.
		if small, err := Decode(in, Limits{MaxDepth: 16, MaxBuilt: 512}); err != nil {
			if !errors.Is(err, ErrSmile) || !strings.Contains(err.Error(), "the most a decode may build") {
				t.Fatalf("under a budget of 512 bytes: %v, want it over the budget", err)
			}
		} else if !equal(small, v) {
			t.Fatalf("under a budget of 512 bytes: %#v, want %#v", small, v)
		}
		// What decodes re-encodes and decodes to the same value.
		if hasUnencodable(v) {
			return
		}
		again, err := Decode(Encode(v, EncodeOptions{SharedNames: true, SharedValues: true, RawBinary: true}), Limits{MaxDepth: 16})
		if err != nil || !equal(again, v) {
			t.Fatalf("re-encoded %#v: %#v, %v", v, again, err)
		}
	})
}

// hasUnencodable reports whether v holds a value the test encoder does
// not write (BigInteger, BigDecimal).
func hasUnencodable(v any) bool {
	switch v := v.(type) {
	case *big.Int, Decimal:
		return true
	case []any:
		for _, x := range v {
			if hasUnencodable(x) {
				return true
			}
		}
	case *Object:
		for _, m := range v.Members {
			if hasUnencodable(m.Value) {
				return true
			}
		}
	}
	return false
}
