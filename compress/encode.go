package compress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	seekable "github.com/SaveTheRbtz/zstd-seekable-format-go/pkg"
	"github.com/klauspost/compress/zstd"
)

// DefaultFrameSize is the frame size Encode uses when none is given: on
// stored-fields JSON it compresses about as well as larger frames, while
// a cold random read decodes far less (BenchmarkFrameSize measures it;
// docs/BENCH.md, "Hybrid compression", has the figures).
const DefaultFrameSize = 256 << 10

// EncoderOptions configure Encode. The zero value selects the defaults.
type EncoderOptions struct {
	// FrameSize is the number of logical bytes per frame (the last frame
	// is short): the unit a random read decompresses. 1 to MaxFrameSize;
	// 0 means DefaultFrameSize.
	FrameSize int

	// Level is a zstd level, 1 to 22; 0 means 3. klauspost/compress maps
	// it to its four encoders: 1-2 fastest, 3-5 default, 6-9 better, 10+
	// best.
	Level int

	// Concurrency is the number of frames compressed at once; 0 means
	// runtime.GOMAXPROCS(0). Memory use is about 4*Concurrency*FrameSize.
	Concurrency int
}

func (o EncoderOptions) withDefaults() (EncoderOptions, error) {
	if o.FrameSize == 0 {
		o.FrameSize = DefaultFrameSize
	}
	if o.Level == 0 {
		o.Level = 3
	}
	if o.Concurrency == 0 {
		o.Concurrency = runtime.GOMAXPROCS(0)
	}
	switch {
	case o.FrameSize < 1 || o.FrameSize > MaxFrameSize:
		return o, fmt.Errorf("compress: frame size %d outside [1, %d]", o.FrameSize, MaxFrameSize)
	case o.Level < 1 || o.Level > 22:
		return o, fmt.Errorf("compress: zstd level %d outside [1, 22]", o.Level)
	case o.Concurrency < 1:
		return o, fmt.Errorf("compress: concurrency %d < 1", o.Concurrency)
	}
	return o, nil
}

// errTooLarge reports input past the limits of ParseSeekTable.
var errTooLarge = errors.New("input too large for a seekable object")

// Encode reads src to its end and writes it to dst as a seekable zstd
// object: frames of opt.FrameSize logical bytes each (the last one
// short; none for empty input), compressed independently, then the seek
// table with checksums on. It returns the number of bytes read from src
// and written to dst.
//
// On error (from src, dst or ctx, or input larger than MaxSize or
// MaxFrames frames) dst holds an incomplete object that must be
// discarded. Encode does not close dst. It stops early when ctx is done,
// though a Read on src in progress is not interrupted.
func Encode(ctx context.Context, dst io.Writer, src io.Reader, opt EncoderOptions) (logicalSize, compressedSize int64, err error) {
	opt, err = opt.withDefaults()
	if err != nil {
		return 0, 0, err
	}
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(opt.Level)),
		zstd.WithEncoderConcurrency(opt.Concurrency),
		zstd.WithEncoderCRC(true), // plain zstd decoders verify frames too
		zstd.WithLowerEncoderMem(false),
	)
	if err != nil {
		return 0, 0, fmt.Errorf("compress: new zstd encoder: %w", err)
	}
	defer enc.Close()

	cw := &countingWriter{w: dst}
	w, err := seekable.NewWriter(cw, enc)
	if err != nil {
		return 0, 0, fmt.Errorf("compress: new seekable writer: %w", err)
	}
	var frames int64
	source := func() ([]byte, error) {
		buf := make([]byte, opt.FrameSize)
		n, err := io.ReadFull(src, buf)
		switch {
		case n == 0 && (err == io.EOF || err == nil):
			return nil, nil
		case err != nil && err != io.ErrUnexpectedEOF && err != io.EOF:
			return nil, fmt.Errorf("compress: read input at offset %d: %w", logicalSize, err)
		}
		frames++
		logicalSize += int64(n)
		if frames > MaxFrames || logicalSize > MaxSize {
			return nil, fmt.Errorf("compress: %w: %d bytes in %d frames (limits %d bytes, %d frames)",
				errTooLarge, logicalSize, frames, int64(MaxSize), MaxFrames)
		}
		return buf[:n], nil
	}
	if err := w.WriteMany(ctx, source, seekable.WithConcurrency(opt.Concurrency)); err != nil {
		return logicalSize, cw.n, fmt.Errorf("compress: encode frames: %w", err)
	}
	if err := w.Close(); err != nil {
		return logicalSize, cw.n, fmt.Errorf("compress: write seek table: %w", err)
	}
	return logicalSize, cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
