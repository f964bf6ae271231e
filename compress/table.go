package compress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Format constants of the seekable zstd format.
const (
	// FooterSize is the length of the seek table footer, the last bytes
	// of every seekable object: u32 frame count, u8 descriptor, u32 magic.
	FooterSize = 9

	skippableMagic   = 0x184D2A5E // skippable frame magic used by the seek table
	seekableMagic    = 0x8F92EAB1 // last four bytes of a seekable object
	skippableHeader  = 8          // skippable magic + Frame_Size
	minTableSize     = skippableHeader + FooterSize
	checksumFlag     = 1 << 7 // descriptor bit 7
	reservedBits     = 0x7C   // descriptor bits 6-2, must be zero
	entrySizeSum     = 12     // entry with checksum
	entrySizeNoSum   = 8      // entry without checksum
	defaultTailBytes = 64 << 10
	tailShift        = 12
)

// Limits applied by ParseSeekTable (and honoured by Encode).
const (
	// MaxFrameSize bounds the decompressed size of one frame. A caller
	// decoding a frame needs a buffer this large in the worst case.
	MaxFrameSize = 1 << 30

	// MaxFrames bounds the number of frames of one object. A table this
	// long is 48 MiB in the object and about 160 MiB parsed; at 256 KiB
	// per frame it describes 1 TiB.
	MaxFrames = 1 << 22

	// MaxSize bounds the logical (decompressed) size of one object.
	MaxSize = 1 << 50

	// MaxRatio bounds Size/CompSize of a frame. It is the zstd format's own
	// limit, not a heuristic: a block decodes to at most 128 KiB and takes
	// at least 4 bytes (3-byte header plus one RLE byte), so no valid frame
	// expands by more than 32768.
	MaxRatio = 1 << 15

	// MaxTableSize is the length of the largest seek table frame the
	// format allows under MaxFrames: MaxFrames entries with checksums,
	// the skippable frame header and the footer (48 MiB). No tail longer
	// than this is ever needed.
	MaxTableSize = skippableHeader + MaxFrames*entrySizeSum + FooterSize
)

// DefaultFrameLimit is the largest frame a segfs mount decodes unless
// configured otherwise (SeekTable.CheckFrameLimit; `segfs mount
// --max-frame-size`), and so the largest frame size `segfs push` writes.
// It is 64 times Encode's DefaultFrameSize and 4 times the largest frame
// size BenchmarkFrameSize measures, so no object written with a sensible
// frame size is refused, while one decode of a frame this large holds at
// most MaxDecodeCost(DefaultFrameLimit), about 52 MiB: a table claiming
// MaxFrameSize (1 GiB) frames cannot make a mount allocate gigabytes.
const DefaultFrameLimit = 16 << 20

// ErrFrameTooLarge is wrapped by the error of CheckFrameLimit: the
// object is well formed, but one of its frames is larger than the
// reader agreed to decode. It does not wrap ErrCorrupt.
var ErrFrameTooLarge = errors.New("seekable zstd frame larger than the frame size limit")

var (
	// ErrCorrupt is wrapped by every error about an object whose bytes
	// break the format: a bad seek table or a frame that does not decode
	// to what the table says.
	ErrCorrupt = errors.New("corrupt seekable zstd object")

	// ErrNeedMore is wrapped (through *NeedMoreError) when the tail given
	// to ParseSeekTable is too short to hold the whole seek table.
	ErrNeedMore = errors.New("seek table needs a longer tail")
)

// NeedMoreError reports that ParseSeekTable needs the last Need bytes of
// the object. Once the footer was readable, Need is the exact length of
// the seek table frame; otherwise it is TailSize of the object.
// It matches ErrNeedMore under errors.Is.
type NeedMoreError struct {
	Need int64 // tail length to fetch, <= the object size
	Have int64 // tail length that was given
}

func (e *NeedMoreError) Error() string {
	return fmt.Sprintf("%v: have last %d bytes, need last %d", ErrNeedMore, e.Have, e.Need)
}

// Is makes errors.Is(err, ErrNeedMore) true.
func (e *NeedMoreError) Is(target error) bool { return target == ErrNeedMore }

// Frame is one entry of a seek table with its offsets resolved.
type Frame struct {
	CompOff     int64  // offset of the frame's first byte in the object
	CompSize    int64  // compressed length, >= 1
	Off         int64  // logical offset of the frame's first decompressed byte
	Size        int64  // decompressed length, 0 <= Size <= MaxFrameSize
	Checksum    uint32 // low 32 bits of XXH64 of the decompressed bytes
	HasChecksum bool   // Checksum is meaningful (table has Checksum_Flag)
}

// String describes the frame's coordinates for error messages.
func (f Frame) String() string {
	return fmt.Sprintf("frame at object [%d,%d) logical [%d,%d)", f.CompOff, f.CompOff+f.CompSize, f.Off, f.Off+f.Size)
}

// SeekTable is the parsed, validated seek table of one object. See the
// package documentation for the invariants it satisfies.
type SeekTable struct {
	Frames         []Frame
	CompressedSize int64 // bytes of frames, = object size - table frame size
	Size           int64 // logical size: sum of frame sizes
	Checksums      bool  // every frame carries a checksum

	// The largest Frame.Size and Frame.CompSize of Frames (0 if none),
	// so that CheckFrameLimit costs O(1) on every read.
	LargestSize, LargestCompSize int64
}

// TailSize returns how many bytes from the end of an object of compressed
// size n a caller should fetch to parse its seek table in one go:
// min(n, max(64 KiB, n/4096), MaxTableSize). That holds the table of any
// object with at most 5400 frames, or whose frames average at least
// 48 KiB of compressed bytes (12 table bytes per frame), at a cost of
// 1/4096 of the object, and never more than the largest table the format
// allows, whatever size a listing claims. If ParseSeekTable still reports
// ErrNeedMore, the *NeedMoreError says how many to fetch instead (also at
// most MaxTableSize).
func TailSize(n int64) int64 {
	return max(0, min(n, max(defaultTailBytes, n>>tailShift), MaxTableSize))
}

// CompressBound returns the largest number of compressed bytes a zstd
// frame of n decompressed bytes needs: the zstd library's
// ZSTD_COMPRESSBOUND, n + n/256, plus up to 64 bytes for frames under
// 128 KiB (headers and block headers of data that does not compress).
func CompressBound(n int64) int64 {
	b := n + n>>8
	if n < 128<<10 {
		b += (128<<10 - n) >> 11
	}
	return b
}

// CheckFrameLimit returns nil if every frame of t decodes to at most limit
// bytes and has at most CompressBound(limit) compressed bytes, the most a
// frame within the limit can need. Otherwise it returns an error wrapping
// ErrFrameTooLarge that names the first frame past the limit. It costs
// O(1) when the table is within the limit. t must come from
// ParseSeekTable (which sets LargestSize and LargestCompSize).
func (t *SeekTable) CheckFrameLimit(limit int64) error {
	maxComp := CompressBound(limit)
	if t.LargestSize <= limit && t.LargestCompSize <= maxComp {
		return nil
	}
	for i, f := range t.Frames {
		switch {
		case f.Size > limit:
			return fmt.Errorf("%w: frame %d (%s) decodes to %d bytes, the limit is %d", ErrFrameTooLarge, i, f, f.Size, limit)
		case f.CompSize > maxComp:
			return fmt.Errorf("%w: frame %d (%s) has %d compressed bytes, more than a frame of the limit %d can need (%d)",
				ErrFrameTooLarge, i, f, f.CompSize, limit, maxComp)
		}
	}
	return fmt.Errorf("%w: table claims frames of up to %d bytes (%d compressed), the limit is %d", ErrFrameTooLarge, t.LargestSize, t.LargestCompSize, limit)
}

// ParseSeekTable parses and validates the seek table of an object of
// objectSize bytes. tail must be the last len(tail) bytes of the object;
// it is not retained. On success the returned table satisfies every
// invariant in the package documentation. A tail too short for the table
// yields a *NeedMoreError (matching ErrNeedMore); every inconsistency
// yields an error wrapping ErrCorrupt.
func ParseSeekTable(tail []byte, objectSize int64) (*SeekTable, error) {
	have := int64(len(tail))
	switch {
	case objectSize < 0 || have > objectSize:
		return nil, corruptf("tail of %d bytes for an object of %d bytes", have, objectSize)
	case objectSize < minTableSize:
		return nil, corruptf("object of %d bytes is shorter than the smallest seek table (%d)", objectSize, minTableSize)
	case have < FooterSize:
		return nil, &NeedMoreError{Need: TailSize(objectSize), Have: have}
	}
	n, entrySize, err := parseFooter(tail[have-FooterSize:])
	if err != nil {
		return nil, err
	}
	tableSize := skippableHeader + int64(n)*int64(entrySize) + FooterSize // n <= MaxFrames: no overflow
	if tableSize > objectSize {
		return nil, corruptf("seek table of %d frames (%d bytes) is larger than the object (%d bytes)", n, tableSize, objectSize)
	}
	if have < tableSize {
		return nil, &NeedMoreError{Need: tableSize, Have: have}
	}
	table := tail[have-tableSize:]
	if m := binary.LittleEndian.Uint32(table); m != skippableMagic {
		return nil, corruptf("seek table at object offset %d: skippable magic %#08x, want %#08x", objectSize-tableSize, m, skippableMagic)
	}
	if fs := binary.LittleEndian.Uint32(table[4:]); int64(fs) != tableSize-skippableHeader {
		return nil, corruptf("seek table at object offset %d: Frame_Size %d disagrees with %d frames of %d bytes (want %d)",
			objectSize-tableSize, fs, n, entrySize, tableSize-skippableHeader)
	}
	entries := table[skippableHeader : tableSize-FooterSize]
	return parseEntries(entries, n, entrySize, objectSize-tableSize)
}

// parseFooter validates the 9-byte footer and returns the frame count and
// the entry size it implies.
func parseFooter(footer []byte) (n uint32, entrySize int, err error) {
	if m := binary.LittleEndian.Uint32(footer[5:]); m != seekableMagic {
		return 0, 0, corruptf("footer: seekable magic %#08x, want %#08x", m, seekableMagic)
	}
	desc := footer[4]
	if desc&reservedBits != 0 {
		return 0, 0, corruptf("footer: descriptor %#02x has reserved bits set", desc)
	}
	n = binary.LittleEndian.Uint32(footer)
	if n > MaxFrames {
		return 0, 0, corruptf("footer: %d frames, more than the limit %d", n, MaxFrames)
	}
	entrySize = entrySizeNoSum
	if desc&checksumFlag != 0 {
		entrySize = entrySizeSum
	}
	return n, entrySize, nil
}

// parseEntries resolves the n entries against dataSize, the number of
// object bytes before the seek table frame.
func parseEntries(entries []byte, n uint32, entrySize int, dataSize int64) (*SeekTable, error) {
	t := &SeekTable{
		Frames:    make([]Frame, n),
		Checksums: entrySize == entrySizeSum,
	}
	var compOff, off int64
	for i := range t.Frames {
		e := entries[i*entrySize : (i+1)*entrySize]
		f := Frame{
			CompOff:  compOff,
			CompSize: int64(binary.LittleEndian.Uint32(e)),
			Off:      off,
			Size:     int64(binary.LittleEndian.Uint32(e[4:])),
		}
		if t.Checksums {
			f.Checksum = binary.LittleEndian.Uint32(e[8:])
			f.HasChecksum = true
		}
		// Each term is < 2^32 and there are at most 2^22 of them, so the
		// sums below stay far from overflowing int64.
		switch {
		case f.CompSize == 0:
			return nil, corruptf("seek table frame %d at object offset %d: compressed size 0", i, compOff)
		case f.CompSize > dataSize-compOff:
			return nil, corruptf("seek table frame %d at object offset %d: compressed size %d runs past the frames' end %d",
				i, compOff, f.CompSize, dataSize)
		case f.Size > MaxFrameSize:
			return nil, corruptf("seek table frame %d at object offset %d: decompressed size %d exceeds the limit %d",
				i, compOff, f.Size, MaxFrameSize)
		case f.Size > f.CompSize*MaxRatio:
			return nil, corruptf("seek table frame %d at object offset %d: %d compressed bytes cannot decode to %d (ratio limit %d)",
				i, compOff, f.CompSize, f.Size, MaxRatio)
		case f.Size > MaxSize-off:
			return nil, corruptf("seek table frame %d at object offset %d: logical size exceeds the limit %d", i, compOff, int64(MaxSize))
		}
		t.Frames[i] = f
		compOff += f.CompSize
		off += f.Size
		t.LargestSize = max(t.LargestSize, f.Size)
		t.LargestCompSize = max(t.LargestCompSize, f.CompSize)
	}
	if compOff != dataSize {
		return nil, corruptf("seek table: frames cover %d bytes but %d precede the table (gap of %d)", compOff, dataSize, dataSize-compOff)
	}
	t.CompressedSize = compOff
	t.Size = off
	return t, nil
}

// FrameAt returns the index of the frame holding logical offset off, or
// -1 if off is outside [0, t.Size). Frames of size 0 hold no offset and
// are never returned.
func (t *SeekTable) FrameAt(off int64) int {
	if off < 0 || off >= t.Size {
		return -1
	}
	// The first frame ending after off; frames tile [0, Size), so it
	// starts at or before off.
	return sort.Search(len(t.Frames), func(i int) bool {
		f := &t.Frames[i]
		return f.Off+f.Size > off
	})
}

// FramesFor returns the inclusive index range [first, last] of the frames
// holding the logical bytes [off, off+n), clamped to [0, t.Size). If the
// clamped range is empty it returns first > last (0, -1). Frames of size 0
// strictly inside the range are included; decoding them yields no bytes.
func (t *SeekTable) FramesFor(off, n int64) (first, last int) {
	if n <= 0 {
		return 0, -1
	}
	if off < 0 {
		n += off // cannot overflow: n > 0 > off
		off = 0
	}
	end := t.Size
	if n < end-off { // so off+n cannot overflow
		end = off + n
	}
	if n <= 0 || off >= end {
		return 0, -1
	}
	return t.FrameAt(off), t.FrameAt(end - 1)
}

// CompRange returns the compressed byte range [off, off+n) of the object
// holding frames first to last (inclusive), which are contiguous: one
// ranged GET fetches them all. It returns 0, 0 if first > last; the
// indexes must otherwise be valid.
func (t *SeekTable) CompRange(first, last int) (off, n int64) {
	if first > last {
		return 0, 0
	}
	f, l := &t.Frames[first], &t.Frames[last]
	return f.CompOff, l.CompOff + l.CompSize - f.CompOff
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}
