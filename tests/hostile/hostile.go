// Package hostile builds hostile inputs shared by the unit and
// end-to-end tests of segfs: objects that are valid by their format's
// rules and still cost what no configuration should allow if trusted.
package hostile

import (
	"encoding/binary"

	"github.com/segfs/segfs/compress"
)

// HugeFrameObject returns a seekable zstd object of about 32 KiB whose
// seek table claims, truthfully and without checksums, one frame of
// 1 GiB of zeros (zstd RLE blocks): the largest frame the format allows.
// A read of one byte of it, if decoded, costs 1 GiB of memory.
func HugeFrameObject() []byte {
	const size, block = compress.MaxFrameSize, 128 << 10
	obj := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528) // zstd magic
	obj = append(obj, 0x00, 0x38)                            // no content size, no checksum; window 128 KiB
	for left := size; left > 0; left -= block {
		h := uint32(block)<<3 | 1<<1 // an RLE block
		if left == block {
			h |= 1 // the last
		}
		obj = append(obj, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	comp := len(obj)
	obj = binary.LittleEndian.AppendUint32(obj, 0x184D2A5E) // skippable frame of the seek table
	obj = binary.LittleEndian.AppendUint32(obj, 8+compress.FooterSize)
	obj = binary.LittleEndian.AppendUint32(obj, uint32(comp))
	obj = binary.LittleEndian.AppendUint32(obj, size)
	obj = binary.LittleEndian.AppendUint32(obj, 1) // one frame
	obj = append(obj, 0)                           // no checksums
	return binary.LittleEndian.AppendUint32(obj, 0x8F92EAB1)
}
