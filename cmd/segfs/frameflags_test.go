package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/reader"
)

// TestFrameFlagDefaults: the defaults written in the flags' tags are the
// packages' defaults, which the help texts and the docs quote.
func TestFrameFlagDefaults(t *testing.T) {
	typ := reflect.TypeFor[mountCmd]()
	for field, want := range map[string]int64{
		"FrameCache":   reader.DefaultFrameCache,
		"DecodeMemory": reader.DefaultDecodeMemory,
		"MaxFrameSize": compress.DefaultFrameLimit,
	} {
		f, ok := typ.FieldByName(field)
		if !ok {
			t.Fatalf("no field %s", field)
		}
		got, err := parseByteSize(f.Tag.Get("default"))
		if err != nil || got != want {
			t.Errorf("--%s default %q (%v), want %v", f.Tag.Get("name"), f.Tag.Get("default"), err, byteSize(want))
		}
	}
}

func TestFrameFlagBounds(t *testing.T) {
	base := defaultMountCmd(t)
	for _, c := range []struct {
		name   string
		change func(*mountCmd)
		flag   string // named by the error; "" if valid
	}{
		{"defaults", func(*mountCmd) {}, ""},
		{"no frame cache", func(m *mountCmd) { m.FrameCache = 0 }, ""},
		{"negative frame cache", func(m *mountCmd) { m.FrameCache = -1 }, "--frame-cache"},
		{"max frame size 0", func(m *mountCmd) { m.MaxFrameSize = 0 }, "--max-frame-size"},
		{"max frame size past the format", func(m *mountCmd) { m.MaxFrameSize = 1<<30 + 1 }, "--max-frame-size"},
		{"decode memory exactly one frame", func(m *mountCmd) { m.DecodeMemory = byteSize(reader.MinDecodeMemory(16 << 20)) }, ""},
		{"decode memory below one frame", func(m *mountCmd) { m.DecodeMemory = byteSize(reader.MinDecodeMemory(16<<20) - 1) }, "--decode-memory"},
		{"larger frames need more decode memory", func(m *mountCmd) { m.MaxFrameSize = 64 << 20 }, "--decode-memory"},
		{"small frames, small budget", func(m *mountCmd) { m.MaxFrameSize, m.DecodeMemory = 1<<20, 4<<20 }, ""},
	} {
		m := base
		c.change(&m)
		err := m.validate()
		if (err == nil) != (c.flag == "") || err != nil && !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%s: err %v, want one naming %q", c.name, err, c.flag)
		}
	}
}
