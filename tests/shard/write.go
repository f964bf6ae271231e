package shard

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"math/rand/v2"
	"os"
)

// Lucene's header and footer magics (CodecUtil).
const (
	codecMagic  = 0x3FD76C17
	footerMagic = ^uint32(codecMagic) // 0xC02893E8
	footerLen   = 16
	// codecVersion is the version written in every header.
	codecVersion = 1
)

// headerLen is the length of f's IndexHeader.
func headerLen(f filePlan) int {
	return 4 + 1 + len(f.codec) + 4 + 16 + 1 + len(f.suffix)
}

// appendHeader appends f's IndexHeader: BE magic, VInt-prefixed codec name
// (names are shorter than 128 bytes, so the VInt is one byte), BE version,
// the 16-byte segment id, then the length-prefixed suffix.
func appendHeader(b []byte, f filePlan) []byte {
	b = binary.BigEndian.AppendUint32(b, codecMagic)
	b = append(b, byte(len(f.codec)))
	b = append(b, f.codec...)
	b = binary.BigEndian.AppendUint32(b, codecVersion)
	b = append(b, f.segID[:]...)
	b = append(b, byte(len(f.suffix)))
	return append(b, f.suffix...)
}

// chunkSize is the write size; big enough to amortise syscalls.
const chunkSize = 1 << 20

// checksummedFile writes a file while computing its CRC32 (for the footer)
// and its SHA-256 (for the manifest).
type checksummedFile struct {
	f   *os.File
	crc hash.Hash32
	sha hash.Hash
	n   int64
}

func (w *checksummedFile) write(p []byte, crc bool) error {
	if crc {
		w.crc.Write(p)
	}
	w.sha.Write(p)
	w.n += int64(len(p))
	_, err := w.f.Write(p)
	return err
}

// writeFile generates f into path and returns its SHA-256 in hex.
func writeFile(path string, f filePlan, specSeed int64, buf []byte) (string, error) {
	out, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("generate %s: %w", f.name, err)
	}
	w := &checksummedFile{f: out, crc: crc32.NewIEEE(), sha: sha256.New()}
	err = fill(w, f, specSeed, buf)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("generate %s: %w", f.name, err)
	}
	if w.n != f.size {
		return "", fmt.Errorf("generate %s: wrote %d bytes, planned %d", f.name, w.n, f.size)
	}
	return hex.EncodeToString(w.sha.Sum(nil)), nil
}

func fill(w *checksummedFile, f filePlan, specSeed int64, buf []byte) error {
	if err := w.write(appendHeader(buf[:0], f), true); err != nil {
		return err
	}
	body := f.size - int64(headerLen(f)) - footerLen
	seed := f.seed(specSeed)
	var err error
	switch f.kind {
	case jsonLines:
		err = writeJSONBody(w, body, seed, buf)
	default:
		err = writeRandomBody(w, body, seed, buf)
	}
	if err != nil {
		return err
	}
	foot := binary.BigEndian.AppendUint32(buf[:0], footerMagic)
	foot = binary.BigEndian.AppendUint32(foot, 0) // algorithm: zlib CRC32
	if err := w.write(foot, true); err != nil {
		return err
	}
	return w.write(binary.BigEndian.AppendUint64(buf[:0], uint64(w.crc.Sum32())), false)
}

func writeRandomBody(w *checksummedFile, n int64, seed [32]byte, buf []byte) error {
	src := rand.NewChaCha8(seed)
	for n > 0 {
		p := buf[:min(int64(len(buf)), n)]
		src.Read(p) // never fails
		if err := w.write(p, true); err != nil {
			return err
		}
		n -= int64(len(p))
	}
	return nil
}

func writeJSONBody(w *checksummedFile, n int64, seed [32]byte, buf []byte) error {
	g := newTripGen(seed)
	b := buf[:0]
	for n > 0 {
		b = g.appendRecord(b)
		if int64(len(b)) >= n || len(b) >= cap(buf)-1024 {
			if int64(len(b)) > n {
				b = b[:n]
			}
			if err := w.write(b, true); err != nil {
				return err
			}
			n -= int64(len(b))
			b = buf[:0]
		}
	}
	return nil
}
