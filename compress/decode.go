package compress

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
)

// Decoder decodes single frames of seekable objects. It wraps one
// klauspost zstd.Decoder used only through DecodeAll, which is safe for
// concurrent use; at most runtime.GOMAXPROCS(0) frames (as of NewDecoder)
// are decoded at once and further callers wait their turn.
//
// The zstd decoder is configured for hostile input: output is limited to
// the capacity of the destination (which DecodeFrame sets to the frame's
// size), to MaxFrameSize in any case, and frame windows larger than
// MaxFrameSize are refused.
type Decoder struct {
	// Immutable after construction.
	zd *zstd.Decoder
}

// decodeSlack is what DecodeFrame may allocate past 1.25 times a frame's
// size when a corrupt frame overruns its output: the reallocation covers
// one more zstd block (128 KiB) and Go's growth rounding.
const decodeSlack = 256 << 10

// DecodeCost returns the most memory a decode of f holds at once: its
// compressed bytes (which the caller fetches into a buffer of f.CompSize)
// plus what DecodeFrame allocates given no dst, f.Size for the output and,
// when a corrupt frame overruns it, one reallocation of at most
// 1.25*f.Size + 256 KiB (see DecodeFrame). A caller that reserves this
// much before fetching a frame bounds its decodes' memory by its
// reservations, whatever the object holds. The decoder's own buffers, a
// few hundred KiB per concurrent decode reused across calls, are not
// included.
func DecodeCost(f Frame) int64 {
	return f.CompSize + 2*f.Size + f.Size/4 + decodeSlack
}

// MaxDecodeCost returns the largest DecodeCost of a frame within limit
// (SeekTable.CheckFrameLimit): limit decompressed bytes from
// CompressBound(limit) compressed ones.
func MaxDecodeCost(limit int64) int64 {
	return DecodeCost(Frame{Size: limit, CompSize: CompressBound(limit)})
}

// NewDecoder returns a Decoder. Close releases it.
func NewDecoder() (*Decoder, error) {
	zd, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderMaxMemory(MaxFrameSize),
		zstd.WithDecoderMaxWindow(MaxFrameSize),
		zstd.WithDecodeAllCapLimit(true),
	)
	if err != nil {
		return nil, fmt.Errorf("compress: new zstd decoder: %w", err)
	}
	return &Decoder{zd: zd}, nil
}

// Close releases the decoder's resources. DecodeFrame must not be called
// during or after Close.
func (d *Decoder) Close() {
	d.zd.Close()
}

// DecodeFrame decodes one frame. comp must be exactly the frame's
// compressed bytes, object bytes [f.CompOff, f.CompOff+f.CompSize). The
// result is written to dst[:0] when cap(dst) >= f.Size, else to a new
// slice of capacity f.Size, and returned with length and capacity exactly
// f.Size (to reuse a larger buffer for the next frame, pass it again, not
// the result); on error the contents of dst are undefined. comp is not
// retained.
//
// The frame must decode to exactly f.Size bytes whose XXH64 (low 32 bits)
// is f.Checksum when f.HasChecksum; anything else, including any zstd
// decoding error, is an error wrapping ErrCorrupt. Decoding stops at the
// first zstd block (at most 128 KiB) that takes the output past f.Size,
// or before decoding when the frame header declares a larger size, so a
// bomb costs memory in proportion to the table's claim, not to what it
// would expand to: beyond dst (or the f.Size buffer allocated here),
// at most about 1.25*f.Size + 256 KiB. An entry may hold several
// concatenated zstd frames and skippable frames, as the zstd decoder
// reads them; only the total output is checked.
//
// comp of the wrong length or an f violating the SeekTable invariants is
// a caller error, reported without ErrCorrupt. DecodeFrame may be called
// concurrently.
func (d *Decoder) DecodeFrame(f Frame, comp []byte, dst []byte) ([]byte, error) {
	if f.Size < 0 || f.Size > MaxFrameSize || f.CompSize < 1 || int64(len(comp)) != f.CompSize {
		return nil, fmt.Errorf("compress: decode %s: invalid call with %d compressed bytes", f, len(comp))
	}
	if int64(cap(dst)) >= f.Size {
		dst = dst[:0:f.Size] // the capacity is the decoder's output limit
	} else {
		dst = make([]byte, 0, f.Size)
	}
	out, err := d.zd.DecodeAll(comp, dst)
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrFrameSizeExceeded):
		return nil, fmt.Errorf("%w: decode %s: output exceeds the table's size: %w", ErrCorrupt, f, err)
	case err != nil:
		return nil, fmt.Errorf("%w: decode %s: %w", ErrCorrupt, f, err)
	case int64(len(out)) != f.Size:
		return nil, fmt.Errorf("%w: decode %s: decoded %d bytes", ErrCorrupt, f, len(out))
	}
	if f.HasChecksum {
		if sum := uint32(xxhash.Sum64(out)); sum != f.Checksum {
			return nil, fmt.Errorf("%w: decode %s: checksum %#08x, table says %#08x", ErrCorrupt, f, sum, f.Checksum)
		}
	}
	return out, nil
}
