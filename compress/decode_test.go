package compress

import (
	"bytes"
	"errors"
	"runtime"
	"sync"
	"testing"
)

func TestDecodeFrameReusesDst(t *testing.T) {
	d := newTestDecoder(t)
	data := taxiJSON(2, 5000)
	s := specFor(t, data, false)
	f := Frame{CompSize: int64(len(s.comp)), Size: 5000, Checksum: s.sum, HasChecksum: true}

	dst := make([]byte, 10, 8000)
	out, err := d.DecodeFrame(f, s.comp, dst)
	if err != nil || !bytes.Equal(out, data) {
		t.Fatalf("DecodeFrame: %v (equal %v)", err, bytes.Equal(out, data))
	}
	if &out[0] != &dst[:1][0] {
		t.Error("output does not reuse dst's capacity")
	}
	if cap(out) != 5000 {
		t.Errorf("cap(out) = %d, want the frame size", cap(out))
	}

	out, err = d.DecodeFrame(f, s.comp, make([]byte, 0, 4999))
	if err != nil || !bytes.Equal(out, data) || cap(out) != 5000 {
		t.Fatalf("small dst: %v, cap %d", err, cap(out))
	}
}

func TestDecodeFrameCorrupt(t *testing.T) {
	d := newTestDecoder(t)
	data := taxiJSON(3, 100)
	big := taxiJSON(4, 300<<10)
	truthful := func(s frameSpec) Frame {
		return Frame{CompSize: int64(len(s.comp)), Size: int64(s.size), Checksum: s.sum, HasChecksum: true}
	}
	tests := []struct {
		name string
		spec frameSpec
		f    func(Frame) Frame
	}{
		// The table says 10 bytes; the frame holds 100.
		{"longer than table, content size in header", specFor(t, data, false), func(f Frame) Frame { f.Size = 10; return f }},
		{"longer than table, no content size", specFor(t, data, true), func(f Frame) Frame { f.Size = 10; return f }},
		{"longer than table, many blocks", specFor(t, big, true), func(f Frame) Frame { f.Size = 200 << 10; return f }},
		{"longer than table, table says 0", specFor(t, data, true), func(f Frame) Frame { f.Size = 0; return f }},
		{"shorter than table, content size in header", specFor(t, data, false), func(f Frame) Frame { f.Size = 200; return f }},
		{"shorter than table, no content size", specFor(t, data, true), func(f Frame) Frame { f.Size = 200; return f }},
		{"checksum mismatch", specFor(t, data, false), func(f Frame) Frame { f.Checksum ^= 1; return f }},
		{"not zstd", frameSpec{comp: []byte("plain text, not a frame"), size: 23}, nil},
		{"truncated frame", func() frameSpec { s := specFor(t, big, true); s.comp = s.comp[:len(s.comp)/2]; return s }(), nil},
		{"skippable frame only, table says 5", frameSpec{comp: []byte{0x50, 0x2A, 0x4D, 0x18, 1, 0, 0, 0, 9}, size: 5}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := truthful(tt.spec)
			if tt.f != nil {
				f = tt.f(f)
			}
			out, err := d.DecodeFrame(f, tt.spec.comp, nil)
			if !errors.Is(err, ErrCorrupt) || out != nil {
				t.Fatalf("DecodeFrame = %d bytes, %v; want ErrCorrupt", len(out), err)
			}
			t.Log(err)
		})
	}
}

func TestDecodeFrameBadCall(t *testing.T) {
	d := newTestDecoder(t)
	s := specFor(t, []byte("hello"), false)
	for _, f := range []Frame{
		{CompSize: int64(len(s.comp)) + 1, Size: 5},
		{CompSize: int64(len(s.comp)), Size: -1},
		{CompSize: int64(len(s.comp)), Size: MaxFrameSize + 1},
	} {
		if _, err := d.DecodeFrame(f, s.comp, nil); err == nil || errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeFrame(%+v) = %v, want a caller error", f, err)
		}
	}
	if _, err := d.DecodeFrame(Frame{}, nil, nil); err == nil || errors.Is(err, ErrCorrupt) {
		t.Errorf("empty frame: %v, want a caller error", err)
	}
}

// TestDecodeFrameFlippedBytes flips every bit of a frame in turn: each
// decode either fails with ErrCorrupt or returns exactly the original
// bytes (a flip zstd does not depend on); never other bytes.
func TestDecodeFrameFlippedBytes(t *testing.T) {
	d := newTestDecoder(t)
	data := taxiJSON(5, 2000)
	for _, streaming := range []bool{false, true} {
		s := specFor(t, data, streaming)
		for _, checksum := range []bool{true, false} {
			f := Frame{CompSize: int64(len(s.comp)), Size: int64(s.size), Checksum: s.sum, HasChecksum: checksum}
			survived := 0
			for i := range len(s.comp) * 8 {
				comp := append([]byte(nil), s.comp...)
				comp[i/8] ^= 1 << (i % 8)
				out, err := d.DecodeFrame(f, comp, nil)
				switch {
				case err == nil && !bytes.Equal(out, data):
					t.Fatalf("streaming %v checksum %v: bit %d flipped: wrong bytes returned", streaming, checksum, i)
				case err == nil:
					survived++
				case !errors.Is(err, ErrCorrupt):
					t.Fatalf("bit %d: %v, want ErrCorrupt", i, err)
				}
			}
			t.Logf("streaming %v checksum %v: %d of %d bit flips decode to the original", streaming, checksum, survived, len(s.comp)*8)
		}
	}
}

// TestDecodeFrameBomb: a 16 MiB frame of zeros (about 500 bytes) under a
// table entry claiming 1 KiB fails without allocating anything like 16 MiB.
func TestDecodeFrameBomb(t *testing.T) {
	d := newTestDecoder(t)
	const bombSize = 16 << 20
	bombs := map[string][]byte{
		"hand-built RLE blocks, no content size": rleFrame(bombSize, 0),
		"streaming encoder, no content size":     specFor(t, make([]byte, bombSize), true).comp,
		"content size in header":                 specFor(t, make([]byte, bombSize), false).comp,
	}
	for name, comp := range bombs {
		t.Run(name, func(t *testing.T) {
			f := Frame{CompSize: int64(len(comp)), Size: 1 << 10}
			// Warm up the decoder's own buffers, which are reused.
			if _, err := d.DecodeFrame(f, comp, nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := d.DecodeFrame(f, comp, nil)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d compressed bytes: allocated %d bytes: %v", len(comp), alloc, err)
			if alloc > 1<<20 {
				t.Errorf("allocated %d bytes decoding a bomb under a 1 KiB entry", alloc)
			}
		})
	}
	// Under an entry claiming 4 MiB, the overshoot costs one reallocation
	// of the output (Go's append growth, 1.25x), whatever the bomb's size.
	t.Run("claim 4 MiB", func(t *testing.T) {
		const claim = 4 << 20
		comp := rleFrame(bombSize, 0)
		f := Frame{CompSize: int64(len(comp)), Size: claim}
		dst := make([]byte, claim)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := d.DecodeFrame(f, comp, dst)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("allocated %d bytes beyond dst: %v", alloc, err)
		if !errors.Is(err, ErrCorrupt) || alloc > claim*5/4+256<<10 {
			t.Errorf("err = %v, allocated %d bytes beyond dst", err, alloc)
		}
	})
	// The same frame with a truthful entry decodes (the bound is the
	// table's size, not a fixed limit).
	comp := rleFrame(bombSize, 7)
	out, err := d.DecodeFrame(Frame{CompSize: int64(len(comp)), Size: bombSize}, comp, nil)
	if err != nil || len(out) != bombSize || out[bombSize-1] != 7 {
		t.Fatalf("truthful entry: %d bytes, %v", len(out), err)
	}
}

func TestDecodeFrameConcurrent(t *testing.T) {
	d := newTestDecoder(t)
	data := taxiJSON(6, 1<<20)
	obj := encodeBytes(t, data, EncoderOptions{FrameSize: 64 << 10})
	tab := parseObject(t, obj)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			var buf []byte
			for i := range tab.Frames {
				f := tab.Frames[(i+g)%len(tab.Frames)]
				var err error
				buf, err = d.DecodeFrame(f, obj[f.CompOff:f.CompOff+f.CompSize], buf)
				if err != nil || !bytes.Equal(buf, data[f.Off:f.Off+f.Size]) {
					t.Errorf("goroutine %d, %v: %v", g, f, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestDecodeCost: what DecodeFrame allocates given no dst, plus the
// compressed bytes the caller holds, stays within DecodeCost, for
// truthful frames and for bombs overrunning their entry alike.
func TestDecodeCost(t *testing.T) {
	d := newTestDecoder(t)
	json := taxiJSON(16, 4<<20)
	tests := []struct {
		name    string
		comp    []byte
		size    int64 // the entry's claim
		corrupt bool
	}{
		{"json 1 KiB", specFor(t, json[:1<<10], false).comp, 1 << 10, false},
		{"json 256 KiB", specFor(t, json[:256<<10], true).comp, 256 << 10, false},
		{"json 4 MiB", specFor(t, json, true).comp, 4 << 20, false},
		{"zeros 4 MiB", rleFrame(4<<20, 0), 4 << 20, false},
		{"bomb under 1 KiB", rleFrame(16<<20, 0), 1 << 10, true},
		{"bomb under 300 KiB", rleFrame(16<<20, 0), 300 << 10, true},
		{"bomb under 4 MiB", rleFrame(16<<20, 0), 4 << 20, true},
		{"streaming bomb under 4 MiB", specFor(t, make([]byte, 16<<20), true).comp, 4 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Frame{CompSize: int64(len(tt.comp)), Size: tt.size}
			// Warm up the decoder's own buffers, which are reused.
			if _, err := d.DecodeFrame(f, tt.comp, nil); errors.Is(err, ErrCorrupt) != tt.corrupt {
				t.Fatalf("DecodeFrame: %v, want corrupt %v", err, tt.corrupt)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := d.DecodeFrame(f, tt.comp, nil)
			runtime.ReadMemStats(&after)
			held := int64(after.TotalAlloc-before.TotalAlloc) + f.CompSize
			t.Logf("%d compressed bytes, entry %d: %d bytes held of DecodeCost %d: %v", f.CompSize, f.Size, held, DecodeCost(f), err)
			if held > DecodeCost(f) {
				t.Errorf("held %d bytes, DecodeCost says at most %d", held, DecodeCost(f))
			}
		})
	}
	if got, want := MaxDecodeCost(DefaultFrameLimit), DecodeCost(Frame{Size: DefaultFrameLimit, CompSize: CompressBound(DefaultFrameLimit)}); got != want {
		t.Errorf("MaxDecodeCost = %d, want %d", got, want)
	}
}
