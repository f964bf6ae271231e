package smile

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/segfs/segfs/internal/testmem"
	"math"
	"slices"
	"strings"
	"testing"
)

// hostileDoc returns a document of header flags, open, then body
// repeated until the document holds about size bytes, then close.
func hostileDoc(flags byte, open []byte, body []byte, close []byte, size int) []byte {
	b := append([]byte{':', ')', '\n', flags}, open...)
	b = append(b, bytes.Repeat(body, size/len(body))...)
	return append(b, close...)
}

// Issue 42: a body of 60 MB of one-byte shared value references, which
// decoded to a []any of 60 million strings took 7 GB of heap to build.
// It is refused after building the default budget, at most about twice
// that allocated (what growing the array leaves behind).
func TestBudgetSharedReferences(t *testing.T) {
	in := hostileDoc(flagSharedValues, []byte{0xF8, 0x40, 'a'}, []byte{0x01}, []byte{0xF9}, 60<<20)
	var err error
	n := testmem.Allocated(func() { _, err = Decode(in, Limits{}) })
	var se *Error
	if !errors.As(err, &se) || !errors.Is(err, ErrSmile) || !strings.Contains(err.Error(), fmt.Sprintf("more than %d bytes", DefaultMaxBuilt)) {
		t.Fatalf("%v, want an error naming the budget of %d bytes", err, DefaultMaxBuilt)
	}
	t.Logf("%v; %d MiB allocated", err, n>>20)
	if se.Offset < 5 || se.Offset >= len(in) {
		t.Errorf("error at offset %d of %d", se.Offset, len(in))
	}
	if n > 2*DefaultMaxBuilt+DefaultMaxBuilt/4 {
		t.Errorf("refusing it allocated %d bytes, more than 2.25 times the budget of %d", n, DefaultMaxBuilt)
	}
}

// Every kind of node costs what Decode charges for it, or less: a
// document made of many of one kind is refused once it has charged the
// budget, having allocated at most twice the budget (the charged
// capacity and the garbage of growing it), and the same document
// decodes under a budget large enough.
func TestBudgetEveryNode(t *testing.T) {
	const budget, size = 1 << 20, 2 << 20 // input bytes; every shape builds more than budget from them
	arr := func(flags byte, elem ...byte) []byte {
		return hostileDoc(flags, []byte{0xF8}, elem, []byte{0xF9}, size)
	}
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"shared value references", hostileDoc(flagSharedValues, []byte{0xF8, 0x40, 'a'}, []byte{0x01}, []byte{0xF9}, size)},
		{"long shared value references", hostileDoc(flagSharedValues, []byte{0xF8, 0x40, 'a'}, []byte{0xEC, 0x00}, []byte{0xF9}, size)},
		{"nulls", arr(0, 0x21)},
		{"empty strings", arr(0, 0x20)},
		{"empty arrays", arr(0, 0xF8, 0xF9)},
		{"empty objects", arr(0, 0xFA, 0xFB)},
		{"small negative integers", arr(0, 0xDF)},
		{"int32s", arr(0, 0x24, 0x09, 0x98)},
		{"doubles", arr(0, 0x29, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"tiny strings", arr(0, 0x40, 'x')},
		{"strings of 9 bytes", arr(0, 0x48, '1', '2', '3', '4', '5', '6', '7', '8', '9')},
		{"raw binaries of one byte", arr(flagRawBinary, 0xFD, 0x81, 7)},
		{"7-bit binaries of one byte", arr(0, 0xE8, 0x81, 0x01, 0x01)},
		{"BigIntegers -1", arr(0, 0x26, 0x81, 0x7F, 0x01)},
		{"BigDecimals", arr(0, 0x2A, 0x84, 0x81, 0x7F, 0x01)},
		{"members with a shared name", hostileDoc(flagSharedNames, []byte{0xFA, 0x80, 'a', 0x21}, []byte{0x40, 0x21}, []byte{0xFB}, size)},
		{"members with long names", hostileDoc(0, []byte{0xFA}, append(append([]byte{0x34}, strings.Repeat("n", 9)...), 0xFC, 0x21), []byte{0xFB}, size)},
		{"one long string", hostileDoc(0, []byte{0xE0}, []byte("s"), []byte{0xFC}, size)},
		{"one raw binary", Encode(make([]byte, size), EncodeOptions{RawBinary: true})},
		{"one 7-bit binary", Encode(make([]byte, size), EncodeOptions{})},
		{"arrays 60 deep", arr(0, slices.Concat(bytes.Repeat([]byte{0xF8}, 60), []byte{0x21}, bytes.Repeat([]byte{0xF9}, 60))...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			var err error
			n := testmem.Allocated(func() { _, err = Decode(in, Limits{MaxBuilt: budget}) })
			if !errors.Is(err, ErrSmile) || !strings.Contains(err.Error(), "the most a decode may build") {
				t.Fatalf("%d bytes under a budget of %d: %v, want it refused", len(in), budget, err)
			}
			t.Logf("%.2f times the budget allocated", float64(n)/budget)
			if n > 2*budget+budget/8 {
				t.Errorf("refused after allocating %d bytes, more than twice the budget of %d: Decode charges less than it builds", n, budget)
			}
			if _, err := Decode(in, Limits{MaxBuilt: math.MaxInt64}); err != nil {
				t.Errorf("under no budget: %v", err)
			}
		})
	}
}

// A shard snapshot of 10,000 files, as clusters write it, builds well
// within the default budget (about 600 bytes a file).
func TestBudgetRealisticDocument(t *testing.T) {
	var files []any
	for i := range 10_000 {
		files = append(files, obj("name", fmt.Sprintf("__%022d", i), "physical_name", fmt.Sprintf("_%d.%s", i/12, []string{"cfs", "cfe", "si"}[i%3]),
			"length", int64(1000+i*7919), "checksum", fmt.Sprintf("%x", i*2654435761), "part_size", int64(math.MaxInt64), "written_by", "9.10.0",
			"meta_hash", []byte(strings.Repeat("m", i%3*20))))
	}
	v := obj("name", "snap-1", "index_version", int64(7), "start_time", int64(1_700_000_000_000), "time", int64(12),
		"number_of_files", int64(len(files)), "total_size", int64(1<<40), "files", files)
	in := Encode(v, EncodeOptions{SharedNames: true, RawBinary: true})
	got, err := Decode(in, Limits{MaxBuilt: 7 << 20})
	if err != nil {
		t.Fatalf("%d bytes, 10,000 files: %v", len(in), err)
	}
	if !equal(got, v) {
		t.Fatal("decoded another value")
	}
	if _, err := Decode(in, Limits{}); err != nil {
		t.Fatalf("under the default budget: %v", err)
	}
}

// Nesting is bounded as it was: 64 levels decode, 65 are refused, each
// level costing its array's few bytes.
func TestBudgetDepth(t *testing.T) {
	nest := func(n int) []byte {
		b := []byte{':', ')', '\n', 0}
		b = append(b, bytes.Repeat([]byte{0xF8}, n)...)
		return append(b, bytes.Repeat([]byte{0xF9}, n)...)
	}
	if _, err := Decode(nest(64), Limits{MaxBuilt: 64 * (headerCost + 4*slotCost)}); err != nil {
		t.Errorf("64 levels: %v", err)
	}
	if _, err := Decode(nest(65), Limits{}); err == nil || !strings.Contains(err.Error(), "nesting deeper than 64") {
		t.Errorf("65 levels: %v, want nesting deeper than 64", err)
	}
}
