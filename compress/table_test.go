package compress

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// threeFrames returns a valid hand-built object of three frames with
// checksums: 100, 1000 and 10 logical bytes.
func threeFrames(t testing.TB) (obj []byte, specs []frameSpec) {
	t.Helper()
	data := taxiJSON(1, 1110)
	specs = []frameSpec{specFor(t, data[:100], false), specFor(t, data[100:1100], false), specFor(t, data[1100:], true)}
	return buildObject(specs, true), specs
}

func TestParseSeekTableValid(t *testing.T) {
	obj, specs := threeFrames(t)
	tab := parseObject(t, obj)
	var compOff, off int64
	for i, f := range tab.Frames {
		want := Frame{CompOff: compOff, CompSize: int64(len(specs[i].comp)), Off: off, Size: int64(specs[i].size),
			Checksum: specs[i].sum, HasChecksum: true}
		if f != want {
			t.Errorf("frame %d = %+v, want %+v", i, f, want)
		}
		compOff += want.CompSize
		off += want.Size
	}
	if tab.CompressedSize != compOff || tab.Size != 1110 || !tab.Checksums || len(tab.Frames) != 3 {
		t.Errorf("table = {CompressedSize %d Size %d Checksums %v, %d frames}", tab.CompressedSize, tab.Size, tab.Checksums, len(tab.Frames))
	}

	// The unused descriptor bits 1-0 are ignored.
	obj[len(obj)-5] |= 0x03
	if _, err := ParseSeekTable(obj, int64(len(obj))); err != nil {
		t.Errorf("unused descriptor bits set: %v", err)
	}

	// An object with no frames is the empty file.
	empty := appendTable(nil, nil, true)
	if tab, err := ParseSeekTable(empty, int64(len(empty))); err != nil || tab.Size != 0 || len(tab.Frames) != 0 {
		t.Errorf("empty object: %+v, %v", tab, err)
	}
}

func TestParseSeekTableCorrupt(t *testing.T) {
	obj, specs := threeFrames(t)
	n := len(obj)
	footer := n - FooterSize
	tableSize := skippableHeader + 3*entrySizeSum + FooterSize
	table := n - tableSize
	entryAt := func(i int) int { return table + skippableHeader + i*entrySizeSum }
	put := func(b []byte, at int, v uint32) { binary.LittleEndian.PutUint32(b[at:], v) }
	comp0 := uint32(len(specs[0].comp))

	tests := []struct {
		name   string
		mutate func(b []byte) []byte
	}{
		{"seekable magic", func(b []byte) []byte { b[n-1] ^= 0x80; return b }},
		{"skippable magic", func(b []byte) []byte { put(b, table, skippableMagic-1); return b }},
		{"reserved bit 2", func(b []byte) []byte { b[footer+4] |= 1 << 2; return b }},
		{"reserved bit 6", func(b []byte) []byte { b[footer+4] |= 1 << 6; return b }},
		{"checksum flag cleared", func(b []byte) []byte { b[footer+4] = 0; return b }}, // Frame_Size now disagrees
		{"frame size field", func(b []byte) []byte { put(b, table+4, uint32(tableSize-8+1)); return b }},
		{"frame count +1", func(b []byte) []byte { put(b, footer, 4); return b }},
		{"frame count -1", func(b []byte) []byte { put(b, footer, 2); return b }},
		{"frame count max uint32", func(b []byte) []byte { put(b, footer, math.MaxUint32); return b }},
		{"frame count past limit", func(b []byte) []byte { put(b, footer, MaxFrames+1); return b }},
		{"frame count larger than object", func(b []byte) []byte { put(b, footer, MaxFrames); return b }},
		{"compressed sizes past the object", func(b []byte) []byte { put(b, entryAt(0), comp0+1); return b }},
		{"compressed sizes leave a gap", func(b []byte) []byte { put(b, entryAt(0), comp0-1); return b }},
		{"compressed size max uint32", func(b []byte) []byte { put(b, entryAt(1), math.MaxUint32); return b }},
		{"compressed size 0", func(b []byte) []byte { put(b, entryAt(2), 0); return b }},
		{"decompressed size past the limit", func(b []byte) []byte { put(b, entryAt(1), MaxFrameSize+1); return b }},
		{"decompressed size max uint32", func(b []byte) []byte { put(b, entryAt(1)+4, math.MaxUint32); return b }},
		{"decompression ratio", func(b []byte) []byte { put(b, entryAt(0)+4, comp0*MaxRatio+1); return b }},
		{"object shorter than a table", func(b []byte) []byte { return b[n-minTableSize+1:] }},
		{"object is only the table, frames claimed", func(b []byte) []byte { return b[table:] }},
		{"extra byte before the table", func(b []byte) []byte {
			return append(append(append([]byte(nil), b[:table]...), 0), b[table:]...)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mutate(append([]byte(nil), obj...))
			tab, err := ParseSeekTable(b, int64(len(b)))
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseSeekTable = %+v, %v; want ErrCorrupt", tab, err)
			}
			t.Log(err)
		})
	}
}

func TestParseSeekTableArgs(t *testing.T) {
	obj, _ := threeFrames(t)
	size := int64(len(obj))
	for _, tc := range []struct {
		name string
		tail []byte
		size int64
	}{
		{"negative object size", obj[len(obj)-20:], -1},
		{"tail longer than object", obj, size - 1},
		{"object too small", obj[len(obj)-16:], 16},
	} {
		if _, err := ParseSeekTable(tc.tail, tc.size); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", tc.name, err)
		}
	}
}

func TestParseSeekTableNeedMore(t *testing.T) {
	obj, _ := threeFrames(t)
	size := int64(len(obj))
	tableSize := int64(skippableHeader + 3*entrySizeSum + FooterSize)
	for _, have := range []int64{0, 1, FooterSize - 1, FooterSize, tableSize - 1} {
		_, err := ParseSeekTable(obj[size-have:], size)
		var nm *NeedMoreError
		if !errors.As(err, &nm) || !errors.Is(err, ErrNeedMore) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("tail %d: err = %v, want a NeedMoreError", have, err)
		}
		want := tableSize
		if have < FooterSize {
			want = TailSize(size)
		}
		if nm.Need != want || nm.Have != have {
			t.Errorf("tail %d: NeedMoreError %+v, want Need %d", have, nm, want)
		}
	}

	// A table longer than TailSize: 10000 one-byte frames (content
	// irrelevant to parsing) need two fetches, the second of the exact size.
	es := make([]entry, 10000)
	for i := range es {
		es[i] = entry{comp: 1, size: 1}
	}
	big := appendTable(make([]byte, len(es)), es, true)
	bs := int64(len(big))
	_, err := ParseSeekTable(big[bs-TailSize(bs):], bs)
	var nm *NeedMoreError
	if !errors.As(err, &nm) || nm.Need != bs-10000 {
		t.Fatalf("big table: err = %v, want Need %d", err, bs-10000)
	}
	if tab := parseObject(t, big); len(tab.Frames) != 10000 || tab.Size != 10000 {
		t.Errorf("big table: %d frames, size %d", len(tab.Frames), tab.Size)
	}
}

// TestParseSeekTableMaxSize: frames that are each valid but sum past
// MaxSize. Only the table is materialised; the object size is claimed.
func TestParseSeekTableMaxSize(t *testing.T) {
	const frames = MaxSize/MaxFrameSize + 1
	es := make([]entry, frames)
	for i := range es {
		es[i] = entry{comp: MaxFrameSize / MaxRatio, size: MaxFrameSize}
	}
	table := appendTable(nil, es, false)
	size := int64(len(table)) + frames*MaxFrameSize/MaxRatio
	if _, err := ParseSeekTable(table, size); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	// One frame fewer is exactly MaxSize and fine.
	table = appendTable(nil, es[1:], false)
	size = int64(len(table)) + (frames-1)*MaxFrameSize/MaxRatio
	tab, err := ParseSeekTable(table, size)
	if err != nil || tab.Size != MaxSize {
		t.Fatalf("exactly MaxSize: err = %v", err)
	}
}

func TestFrameAt(t *testing.T) {
	// Frames of sizes 10, 0, 5, 0, 0, 1 (zero-size frames are legal: the
	// spec uses them for skippable frames).
	sizes := []int64{10, 0, 5, 0, 0, 1}
	tab := &SeekTable{}
	var off int64
	for _, s := range sizes {
		tab.Frames = append(tab.Frames, Frame{CompSize: 1, Off: off, Size: s})
		off += s
	}
	tab.Size = off
	for _, tc := range []struct {
		off  int64
		want int
	}{
		{-1, -1}, {0, 0}, {9, 0}, {10, 2}, {14, 2}, {15, 5}, {16, -1}, {math.MaxInt64, -1}, {math.MinInt64, -1},
	} {
		if got := tab.FrameAt(tc.off); got != tc.want {
			t.Errorf("FrameAt(%d) = %d, want %d", tc.off, got, tc.want)
		}
	}
	for _, tc := range []struct {
		off, n      int64
		first, last int
	}{
		{0, 1, 0, 0},
		{0, 10, 0, 0},
		{9, 2, 0, 2},
		{10, 5, 2, 2},
		{0, 16, 0, 5},
		{0, math.MaxInt64, 0, 5},
		{15, math.MaxInt64, 5, 5},
		{-5, 6, 0, 0},
		{-5, 5, 0, -1},
		{math.MinInt64, math.MaxInt64, 0, -1}, // [MinInt64, -1)
		{math.MinInt64 + 1, math.MaxInt64, 0, -1},
		{-1, math.MaxInt64, 0, 5},
		{16, 1, 0, -1},
		{3, 0, 0, -1},
		{3, -1, 0, -1},
		{math.MaxInt64, math.MaxInt64, 0, -1},
	} {
		first, last := tab.FramesFor(tc.off, tc.n)
		if first != tc.first || last != tc.last {
			t.Errorf("FramesFor(%d, %d) = %d, %d, want %d, %d", tc.off, tc.n, first, last, tc.first, tc.last)
		}
	}
	if f, l := (&SeekTable{}).FramesFor(0, 10); f <= l {
		t.Errorf("empty table: FramesFor = %d, %d", f, l)
	}
}

func TestTailSize(t *testing.T) {
	for n, want := range map[int64]int64{
		-1: 0, 0: 0, 17: 17, 64 << 10: 64 << 10, 1 << 28: 64 << 10, 1 << 30: 1 << 18, 1 << 36: 1 << 24,
		// Past 192 GiB the share of the object would exceed the largest
		// table the format allows.
		1 << 40: MaxTableSize, 1 << 62: MaxTableSize, math.MaxInt64: MaxTableSize,
	} {
		if got := TailSize(n); got != want {
			t.Errorf("TailSize(%d) = %d, want %d", n, got, want)
		}
	}
	// The largest table, MaxFrames entries with checksums, is exactly
	// MaxTableSize: a NeedMoreError never asks for more.
	footer := binary.LittleEndian.AppendUint32(nil, MaxFrames)
	footer = append(footer, checksumFlag)
	footer = binary.LittleEndian.AppendUint32(footer, seekableMagic)
	_, err := ParseSeekTable(footer, 1<<62)
	var nm *NeedMoreError
	if !errors.As(err, &nm) || nm.Need != MaxTableSize {
		t.Fatalf("footer of MaxFrames frames: %v, want a NeedMoreError for %d bytes", err, int64(MaxTableSize))
	}
}

func TestCompressBound(t *testing.T) {
	for n, want := range map[int64]int64{0: 64, 1: 64, 128 << 10: 128<<10 + 512, 16 << 20: 16<<20 + 64<<10} {
		if got := CompressBound(n); got != want {
			t.Errorf("CompressBound(%d) = %d, want %d", n, got, want)
		}
	}
	// Incompressible data is the worst case: no frame Encode writes
	// exceeds the bound of its size.
	for _, fs := range []int{1, 100, 4 << 10, 128 << 10, 1 << 20} {
		obj := encodeBytes(t, randomData(uint64(fs), 3*fs+1), EncoderOptions{FrameSize: fs})
		for _, f := range parseObject(t, obj).Frames {
			if f.CompSize > CompressBound(f.Size) {
				t.Errorf("frame size %d: %v has %d compressed bytes, bound %d", fs, f, f.CompSize, CompressBound(f.Size))
			}
		}
	}
}

// hugeFrameObject is the hostile object of the frame limit: about 32 KiB
// of RLE blocks whose table entry claims (truthfully) one frame of 1 GiB
// of zeros, the most MaxFrameSize allows.
func hugeFrameObject() []byte {
	return buildObject([]frameSpec{{comp: rleFrame(MaxFrameSize, 0), size: MaxFrameSize}}, false)
}

func TestCheckFrameLimit(t *testing.T) {
	huge := hugeFrameObject()
	tab := parseObject(t, huge)
	if len(huge) > 40<<10 || tab.LargestSize != MaxFrameSize || tab.LargestCompSize != int64(len(huge))-int64(minTableSize+entrySizeNoSum) {
		t.Fatalf("hostile object of %d bytes: %+v", len(huge), tab)
	}
	obj, specs := threeFrames(t)
	small := parseObject(t, obj)
	// A table of small frames whose middle one claims a compressed size
	// past the bound of the limit (the frames are not decoded here).
	es := []entry{{comp: 10, size: 10}, {comp: uint32(CompressBound(DefaultFrameLimit)) + 1, size: 10}, {comp: 10, size: 10}}
	bigComp := appendTable(make([]byte, 20+CompressBound(DefaultFrameLimit)+1), es, false)
	bigCompTab := parseObject(t, bigComp)

	tests := []struct {
		name  string
		tab   *SeekTable
		limit int64
		ok    bool
	}{
		{"1 GiB frame, default limit", tab, DefaultFrameLimit, false},
		{"1 GiB frame, limit 1 GiB", tab, MaxFrameSize, true},
		{"1 GiB frame, limit one byte short", tab, MaxFrameSize - 1, false},
		{"small frames, default limit", small, DefaultFrameLimit, true},
		{"small frames, limit = largest frame", small, int64(specs[1].size), true},
		{"small frames, limit below largest frame", small, int64(specs[1].size) - 1, false},
		{"compressed size past the bound", bigCompTab, DefaultFrameLimit, false},
		{"compressed size at the bound of a larger limit", bigCompTab, DefaultFrameLimit + 1, true},
		{"empty table", parseObject(t, appendTable(nil, nil, true)), 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tab.CheckFrameLimit(tt.limit)
			switch {
			case tt.ok && err != nil:
				t.Fatalf("CheckFrameLimit(%d) = %v, want nil", tt.limit, err)
			case !tt.ok && (!errors.Is(err, ErrFrameTooLarge) || errors.Is(err, ErrCorrupt)):
				t.Fatalf("CheckFrameLimit(%d) = %v, want ErrFrameTooLarge and not ErrCorrupt", tt.limit, err)
			}
			t.Log(err)
		})
	}
}

// TestDefaultFrameLimit: the limit is far above what push writes by
// default and far below what the format allows.
func TestDefaultFrameLimit(t *testing.T) {
	if DefaultFrameLimit < 16*DefaultFrameSize || DefaultFrameLimit > MaxFrameSize/16 {
		t.Errorf("DefaultFrameLimit %d: want between 16 times DefaultFrameSize %d and MaxFrameSize/16", DefaultFrameLimit, DefaultFrameSize)
	}
}
