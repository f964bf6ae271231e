package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Part file format, version 2. All integers are little-endian.
//
//	off  size  field
//	  0     8  magic "segfsprt"
//	  8     2  format version (2; 1 is still read)
//	 10     2  reserved, 0
//	 12     4  header length H: bytes from 0 to the end of the header CRC
//	 16     8  part offset in the object (Index*PartSize)
//	 24     8  data length L (1..PartSize)
//	 32     8  part size
//	 40     8  part index
//	 48     4  block size B (a power of two, 512..1 MiB)
//	 52     4  block count N = ceil(L/B)
//	 56     2  len(source)
//	 58     2  len(object)
//	 60     2  len(etag)
//	 62     2  reserved, 0
//	 64     …  source, object, etag bytes
//	  …   4*N  CRC32C of each data block
//	  …     …  zeros, so that H is a multiple of 4096 (version 2 only)
//	H-4     4  CRC32C of bytes [0, H-4)
//	  H     L  data
//
// The file's size is exactly H+L. Version 2 pads the header so that the
// data starts on a 4096-byte boundary, where Put can write it with
// O_DIRECT; version 1 (no padding) files from earlier releases read the
// same way.
const (
	magic         = "segfsprt"
	formatVersion = 2
	// headerAlign is what a version 2 header's length is a multiple of:
	// the largest logical block size of common disks, and the page size.
	headerAlign    = 4096
	fixedHeaderLen = 64
	maxHeaderLen   = 1 << 20
	minBlockSize   = 512
	maxBlockSize   = 1 << 20

	// probeLen is how much of a part file a read fetches to find its
	// header; a header longer than this is read in a second call.
	probeLen = 4096
)

// DefaultBlockSize is the integrity block: a read checks the CRC32C of
// each block it touches, and no other.
const DefaultBlockSize = 16 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadPart marks a part file that must not be served: it is removed and
// counted. The wrapping error says why.
var errBadPart = errors.New("bad part file")

func badPart(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadPart, fmt.Sprintf(format, args...))
}

// header is a verified part header. crcs aliases the buffer it was
// parsed from.
type header struct {
	hdrLen    int64
	length    int64
	blockSize int64
	crcs      []byte // 4 bytes per block
}

func (h *header) blockCRC(b int64) uint32 { return binary.LittleEndian.Uint32(h.crcs[4*b:]) }

func blockCount(length, blockSize int64) int64 { return (length + blockSize - 1) / blockSize }

// headerFields returns the length of a header's fields, without the
// header CRC.
func headerFields(ns, no, ne, blocks int64) int64 {
	return fixedHeaderLen + ns + no + ne + 4*blocks
}

// headerLen returns the header length of a part of length bytes.
func headerLen(k Key, length, blockSize int64) int64 {
	return paddedHeaderLen(headerFields(int64(len(k.Source)), int64(len(k.Object)), int64(len(k.ETag)), blockCount(length, blockSize)))
}

// paddedHeaderLen returns the version 2 header length for fields bytes
// of fields.
func paddedHeaderLen(fields int64) int64 { return roundUp(fields+4, headerAlign) }

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// encodeHeader returns the header of the part holding data. k must be
// valid and 0 < len(data) <= k.PartSize.
func encodeHeader(k Key, data []byte, blockSize int64) []byte {
	return encodeHeaderSums(k, int64(len(data)), blockSize, appendBlockCRCs(nil, data, blockSize))
}

// appendBlockCRCs appends the CRC32C of each blockSize bytes of data (the
// last block may be shorter), little-endian, to b.
func appendBlockCRCs(b, data []byte, blockSize int64) []byte {
	length := int64(len(data))
	for off := int64(0); off < length; off += blockSize {
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(data[off:min(off+blockSize, length)], castagnoli))
	}
	return b
}

// encodeHeaderSums returns the header of a part of length bytes whose
// blocks have the checksums crcs (appendBlockCRCs's encoding).
func encodeHeaderSums(k Key, length, blockSize int64, crcs []byte) []byte {
	n := blockCount(length, blockSize)
	hl := headerLen(k, length, blockSize)
	b := make([]byte, fixedHeaderLen, hl)
	copy(b, magic)
	le := binary.LittleEndian
	le.PutUint16(b[8:], formatVersion)
	le.PutUint32(b[12:], uint32(hl))
	le.PutUint64(b[16:], uint64(k.Offset()))
	le.PutUint64(b[24:], uint64(length))
	le.PutUint64(b[32:], uint64(k.PartSize))
	le.PutUint64(b[40:], uint64(k.Index))
	le.PutUint32(b[48:], uint32(blockSize))
	le.PutUint32(b[52:], uint32(n))
	le.PutUint16(b[56:], uint16(len(k.Source)))
	le.PutUint16(b[58:], uint16(len(k.Object)))
	le.PutUint16(b[60:], uint16(len(k.ETag)))
	b = append(b, k.Source...)
	b = append(b, k.Object...)
	b = append(b, k.ETag...)
	b = append(b, crcs...)
	b = b[:hl-4] // the padding: zeros from make
	return le.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// wantHeaderLen returns the header length of a file of format version v
// whose fields take fields bytes.
func wantHeaderLen(v uint16, fields int64) int64 {
	if v == 1 {
		return fields + 4
	}
	return paddedHeaderLen(fields)
}

// probeHeader checks the fixed fields that say how long the header is.
// buf holds the first min(probeLen, fileSize) bytes of the file.
func probeHeader(buf []byte, fileSize int64) (hdrLen int64, err error) {
	if len(buf) < fixedHeaderLen {
		return 0, badPart("file of %d bytes is shorter than a header", fileSize)
	}
	if string(buf[:8]) != magic {
		return 0, badPart("no magic number")
	}
	if v := binary.LittleEndian.Uint16(buf[8:]); v != formatVersion && v != 1 {
		return 0, badPart("format version %d, want 1 or %d", v, formatVersion)
	}
	hl := int64(binary.LittleEndian.Uint32(buf[12:]))
	if hl < fixedHeaderLen+4 || hl > maxHeaderLen || hl > fileSize {
		return 0, badPart("header length %d in a file of %d bytes", hl, fileSize)
	}
	return hl, nil
}

// parseHeader verifies the header in buf (exactly hdrLen bytes, as
// returned by probeHeader) against the key it was looked up by and the
// file's size. A header that fails any check is a bad part.
func parseHeader(buf []byte, k Key, fileSize int64) (header, error) {
	le := binary.LittleEndian
	hl := int64(len(buf))
	if got, want := le.Uint32(buf[hl-4:]), crc32.Checksum(buf[:hl-4], castagnoli); got != want {
		return header{}, badPart("header checksum %08x, want %08x", got, want)
	}
	off, length := le.Uint64(buf[16:]), le.Uint64(buf[24:])
	partSize, index := le.Uint64(buf[32:]), le.Uint64(buf[40:])
	bs, n := int64(le.Uint32(buf[48:])), int64(le.Uint32(buf[52:]))
	ns, no, ne := int64(le.Uint16(buf[56:])), int64(le.Uint16(buf[58:])), int64(le.Uint16(buf[60:]))
	if headerFields(ns, no, ne, 0)+4 > hl {
		return header{}, badPart("key fields overrun the header")
	}
	strs := buf[fixedHeaderLen:]
	if string(strs[:ns]) != k.Source || string(strs[ns:ns+no]) != k.Object ||
		string(strs[ns+no:ns+no+ne]) != k.ETag || partSize != uint64(k.PartSize) || index != uint64(k.Index) {
		return header{}, badPart("header names another part")
	}
	switch {
	case off != uint64(k.Offset()):
		return header{}, badPart("offset %d, want %d", off, k.Offset())
	case length == 0 || length > uint64(k.PartSize):
		return header{}, badPart("data length %d for part size %d", length, k.PartSize)
	case bs < minBlockSize || bs > maxBlockSize || bs&(bs-1) != 0:
		return header{}, badPart("block size %d", bs)
	case n != blockCount(int64(length), bs):
		return header{}, badPart("%d blocks for %d bytes of %d", n, length, bs)
	case hl != wantHeaderLen(le.Uint16(buf[8:]), headerFields(ns, no, ne, n)):
		return header{}, badPart("header length %d does not match its fields", hl)
	case fileSize != hl+int64(length):
		return header{}, badPart("file of %d bytes, want %d", fileSize, hl+int64(length))
	}
	table := fixedHeaderLen + ns + no + ne
	return header{hdrLen: hl, length: int64(length), blockSize: bs, crcs: buf[table : table+4*n]}, nil
}
