package lucene

import (
	"errors"
	"testing"
)

func TestDataRoundTrip(t *testing.T) {
	var o Output
	o.BEUint32(0x3FD76C17)
	o.VInt(0)
	o.VInt(127)
	o.VInt(128)
	o.VInt(1 << 28)
	o.VInt(-1)
	o.String("segment_md")
	o.LEInt64(-5)
	o.BEUint64(1 << 40)
	in := NewInput(o.B)
	if v, err := in.BEUint32(); err != nil || v != 0x3FD76C17 {
		t.Fatalf("BEUint32 = %x, %v", v, err)
	}
	for _, want := range []int32{0, 127, 128, 1 << 28, -1} {
		if v, err := in.VInt(); err != nil || v != want {
			t.Fatalf("VInt = %d, %v; want %d", v, err, want)
		}
	}
	if s, err := in.String(64, "name"); err != nil || s != "segment_md" {
		t.Fatalf("String = %q, %v", s, err)
	}
	if v, err := in.LEInt64(); err != nil || v != -5 {
		t.Fatalf("LEInt64 = %d, %v", v, err)
	}
	if v, err := in.BEUint64(); err != nil || v != 1<<40 {
		t.Fatalf("BEUint64 = %d, %v", v, err)
	}
	if in.Remaining() != 0 {
		t.Fatalf("%d bytes left", in.Remaining())
	}
}

// Lengths that claim more than is left fail without allocating.
func TestInputBounds(t *testing.T) {
	for name, f := range map[string]func(*Input) error{
		"string past the end": func(in *Input) error { _, err := in.String(1<<30, "s"); return err },
		"string past max":     func(in *Input) error { _, err := in.String(2, "s"); return err },
		"bytes past the end":  func(in *Input) error { _, err := in.Bytes(1<<40, "b"); return err },
		"negative bytes":      func(in *Input) error { _, err := in.Bytes(-1, "b"); return err },
		"vint too long": func(in *Input) error {
			_, err := NewInput([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}).VInt()
			return err
		},
		"int64 short": func(in *Input) error { _, err := NewInput([]byte{1, 2, 3}).LEInt64(); return err },
	} {
		var o Output
		o.VInt(100) // a string length of 100 with 3 bytes after it
		o.Bytes([]byte("abc"))
		if err := f(NewInput(o.B)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
