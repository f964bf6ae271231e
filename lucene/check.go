package lucene

import (
	"context"
	"fmt"
)

// ReadAtFunc reads len(p) bytes at off, or fewer only at the file's end.
type ReadAtFunc func(ctx context.Context, p []byte, off int64) (int, error)

// CheckChunk is the read size of Check's pass over every byte: large
// enough that a file read through the fetch pool costs few calls, small
// enough to be one buffer per file checked at once.
const CheckChunk = 1 << 20

// Check checks the Lucene file of size bytes that read reads: its
// footer is valid and, when expected is not nil, holds that checksum;
// with a non-nil buf (--deep) the CRC32 of every byte before the
// checksum, read in order in chunks of len(buf) and each counted to
// progress (if not nil), matches it. segfs verify and segfs restore
// share it, so a file passes the same checks wherever it lies. It returns the footer
// once parsed (nil before), and an error of one line saying what is
// wrong; a tail that is not a footer gives an error wrapping
// ErrCorrupt and a nil footer (restore takes such a file, with no
// checksum from a layout, for one that is not a Lucene file).
func Check(ctx context.Context, read ReadAtFunc, size int64, expected *uint64, buf []byte, progress func(int)) (*Footer, error) {
	if size < FooterLength {
		return nil, fmt.Errorf("%w: %d bytes: shorter than a Lucene footer", ErrCorrupt, size)
	}
	tail := make([]byte, FooterLength)
	if n, err := read(ctx, tail, size-FooterLength); err != nil || n != len(tail) {
		return nil, fmt.Errorf("reading the footer: %d of %d bytes: %w", n, len(tail), err)
	}
	footer, err := ParseFooter(tail)
	if err != nil {
		return nil, err
	}
	if expected != nil && footer.Checksum != *expected {
		return &footer, fmt.Errorf("footer checksum %s, the metadata says %s", FormatChecksum(footer.Checksum), FormatChecksum(*expected))
	}
	if buf == nil {
		return &footer, nil
	}
	ck := NewChecker(size)
	for off := int64(0); off < size; {
		n, err := read(ctx, buf[:min(int64(len(buf)), size-off)], off)
		if err != nil {
			return &footer, fmt.Errorf("read at %d: %w", off, err)
		}
		if n == 0 {
			return &footer, fmt.Errorf("ends at %d of %d bytes", off, size)
		}
		ck.Write(buf[:n])
		if progress != nil {
			progress(n)
		}
		off += int64(n)
	}
	if _, err := ck.Check(); err != nil {
		return &footer, err
	}
	return &footer, nil
}

// FormatChecksum is a footer checksum as segfs prints it: eight hex digits.
func FormatChecksum(v uint64) string { return fmt.Sprintf("%08x", v) }
