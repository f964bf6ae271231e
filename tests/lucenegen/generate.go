// Package lucenegen generates Lucene-like files for segfs's tests:
// their output has the shape segfs checks (an IndexHeader and a valid
// footer) around pseudo-random bytes; Lucene itself could not read it.
package lucenegen

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"

	"github.com/segfs/segfs/lucene"
)

// generatedCodecs gives each extension a plausible codec name and version
// for GenerateFile's header; other extensions get defaultGeneratedCodec.
var generatedCodecs = map[string]struct {
	codec   string
	version uint32
}{
	"si":  {"Lucene90SegmentInfo", 0},
	"cfs": {"Lucene90CompoundData", 0},
	"cfe": {"Lucene90CompoundEntries", 0},
	"fnm": {"Lucene94FieldInfos", 2},
	"fdt": {"Lucene90StoredFieldsFastData", 1},
	"fdx": {"Lucene90FieldsIndexIdx", 0},
	"fdm": {"Lucene90FieldsIndexMeta", 1},
	"tim": {"BlockTreeTermsDict", 6},
	"tip": {"BlockTreeTermsIndex", 6},
	"tmd": {"BlockTreeTermsMeta", 6},
	"doc": {"Lucene912PostingsWriterDoc", 0},
	"pos": {"Lucene912PostingsWriterPos", 0},
	"pay": {"Lucene912PostingsWriterPay", 0},
	"dvd": {"Lucene90DocValuesData", 0},
	"dvm": {"Lucene90DocValuesMetadata", 0},
	"nvd": {"Lucene90NormsData", 0},
	"nvm": {"Lucene90NormsMetadata", 0},
	"kdd": {"Lucene90PointsFormatData", 0},
	"kdi": {"Lucene90PointsFormatIndex", 0},
	"kdm": {"Lucene90PointsFormatMeta", 0},
	"liv": {"Lucene90LiveDocs", 0},
	"tvd": {"Lucene90TermVectorsData", 0},
	"tvx": {"Lucene90TermVectorsIndexIdx", 0},
	"vec": {"Lucene99FlatVectorsFormatData", 0},
	"vem": {"Lucene99FlatVectorsFormatMeta", 0},
	"vex": {"Lucene99HnswVectorsFormatIndex", 0},
}

const defaultGeneratedCodec = "SegfsTestCodec"

// generatedHeader returns the IndexHeader fields GenerateFile writes for
// name: the codec and version by extension, and as suffix the part of the
// name between the segment and the extension, as Lucene's per-field
// formats name their files ("_0_Lucene90_0.dvd" has suffix "Lucene90_0").
func generatedHeader(name string) (codec string, version uint32, suffix string) {
	base := path.Base(name)
	ext := path.Ext(base)
	c, ok := generatedCodecs[strings.TrimPrefix(ext, ".")]
	if !ok {
		c.codec = defaultGeneratedCodec
	}
	stem := strings.TrimSuffix(base, ext)
	if rest, ok := strings.CutPrefix(stem, "_"); ok {
		if _, s, ok := strings.Cut(rest, "_"); ok && len(s) <= lucene.MaxSuffixLength && ascii(s) {
			suffix = s
		}
	}
	return c.codec, c.version, suffix
}

// GeneratedMinSize returns the smallest size GenerateFile accepts for
// name: its IndexHeader plus a footer.
func GeneratedMinSize(name string) int64 {
	codec, _, suffix := generatedHeader(name)
	return int64(lucene.IndexHeaderLength(codec, suffix) + lucene.FooterLength)
}

// GenerateFile returns a Lucene-like file of exactly size bytes, for tests
// and the demo: an IndexHeader whose codec depends on name's extension,
// pseudo-random body bytes, and a valid footer. The output is a function
// of (name, size, seed) alone. Files generated with one seed share the
// header's id, as the files of one segment do; their bodies differ by
// name. A size below GeneratedMinSize(name) is an error.
func GenerateFile(name string, size int64, seed uint64) ([]byte, error) {
	if least := GeneratedMinSize(name); size < least {
		// Checked before Grow, which panics on a negative size.
		return nil, fmt.Errorf("lucene: generate %s: size %d is below the minimum %d", name, size, least)
	}
	var buf bytes.Buffer
	buf.Grow(int(size))
	if err := WriteGeneratedFile(&buf, name, size, seed); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteGeneratedFile writes to w the same bytes GenerateFile returns,
// holding only a small buffer, so the demo can make files larger than
// memory. It returns w's first error.
func WriteGeneratedFile(w io.Writer, name string, size int64, seed uint64) error {
	if least := GeneratedMinSize(name); size < least {
		return fmt.Errorf("lucene: generate %s: size %d is below the minimum %d", name, size, least)
	}
	codec, version, suffix := generatedHeader(name)
	h := lucene.AppendIndexHeader(nil, codec, version, generatedID(seed), suffix)

	bw := bufio.NewWriterSize(w, 64<<10)
	crc := crc32.ChecksumIEEE(h)
	if _, err := bw.Write(h); err != nil {
		return fmt.Errorf("lucene: generate %s: %w", name, err)
	}

	// The body is 8-byte words of a PCG stream keyed by seed and name, cut
	// to length at the end; the chunk size is a multiple of 8, so the bytes
	// do not depend on it.
	nameHash := fnv.New64a()
	nameHash.Write([]byte(name))
	r := rand.New(rand.NewPCG(seed, nameHash.Sum64()))
	chunk := make([]byte, 32<<10)
	for left := size - int64(len(h)) - lucene.FooterLength; left > 0; {
		for i := 0; i < len(chunk); i += 8 {
			binary.LittleEndian.PutUint64(chunk[i:], r.Uint64())
		}
		p := chunk[:min(int64(len(chunk)), left)]
		crc = crc32.Update(crc, crc32.IEEETable, p)
		if _, err := bw.Write(p); err != nil {
			return fmt.Errorf("lucene: generate %s: %w", name, err)
		}
		left -= int64(len(p))
	}

	var f [lucene.FooterLength]byte
	binary.BigEndian.PutUint32(f[0:], lucene.FooterMagic)
	binary.BigEndian.PutUint32(f[4:], 0)
	crc = crc32.Update(crc, crc32.IEEETable, f[:footerChecksumAt])
	binary.BigEndian.PutUint64(f[8:], uint64(crc))
	if _, err := bw.Write(f[:]); err != nil {
		return fmt.Errorf("lucene: generate %s: %w", name, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("lucene: generate %s: %w", name, err)
	}
	return nil
}

// generatedID derives a header id from seed alone, so every file
// generated with one seed carries the same id.
func generatedID(seed uint64) [lucene.IDLength]byte {
	r := rand.New(rand.NewPCG(seed, 0x5e6f5)) // any fixed stream id
	var id [lucene.IDLength]byte
	binary.LittleEndian.PutUint64(id[0:], r.Uint64())
	binary.LittleEndian.PutUint64(id[8:], r.Uint64())
	return id
}

// SegmentsVersion is the SegmentInfos format version GenerateSegmentsN
// writes (Lucene's VERSION_86, current since Lucene 8.6).
const SegmentsVersion = 10

// GenerateSegmentsN returns a segments_N-like file for generation gen,
// for tests and the demo. It has a valid IndexHeader (codec "segments",
// version SegmentsVersion, id from seed, suffix the base-36 generation, as
// segments_<suffix> is named) and a valid footer around a small body:
// VInt count, then each segment name as a String. Lucene could not parse
// that body; segfs only checks the header and footer. Segment names are
// written as given.
func GenerateSegmentsN(gen int64, segmentNames []string, seed uint64) []byte {
	b := lucene.AppendIndexHeader(nil, "segments", SegmentsVersion, generatedID(seed), strconv.FormatInt(gen, 36))
	o := lucene.Output{B: b}
	o.VInt(int32(len(segmentNames)))
	for _, s := range segmentNames {
		o.String(s)
	}
	return lucene.AppendFooter(o.B)
}

// footerChecksumAt is where a footer's checksum starts: after its magic
// and its algorithm id, which the checksum covers.
const footerChecksumAt = 8

// ascii reports whether s is all ASCII, as an IndexHeader's suffix is.
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
