package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/segfs/segfs/lucene"
)

// MaxMetadataSize bounds the metadata file read into memory: a shard's
// file list and its SegmentInfos, far below this for any real shard. A
// listing that claims more is refused before anything is read.
const MaxMetadataSize = 64 << 20

// ErrBadMetadata marks a metadata file that is not what the format says.
var ErrBadMetadata = errors.New("layout: bad remote segment metadata")

const (
	// MetadataCodec is the codec name of a metadata file's header.
	MetadataCodec = "segment_md"
	// MinMetadataVersion and MaxMetadataVersion bound the header versions
	// ParseMetadata reads: 1 (OpenSearch 2.6 to 2.19), 2 (3.0 on, with the
	// checkpoint's creation time) and 3 (with the DFA presence byte).
	MinMetadataVersion = 1
	MaxMetadataVersion = 3
)

// The bodies a metadata file may hold. Version 1 files hold any of the
// three, told apart by their bytes (see ParseMetadata); versions 2 and 3
// hold Body210 only.
const (
	Body26  = "2.6"  // the file map only (2.6 to 2.8)
	Body29  = "2.9"  // the map, generation, primary term, SegmentInfos (2.9)
	Body210 = "2.10" // the map, the replication checkpoint, SegmentInfos (2.10 on)
)

// FileEntry is one file of the map: its Lucene name and where it was
// uploaded. OpenSearch writes the value as
// "orig::uploaded::checksum::length::writtenByMajor"; files written
// before the later fields existed have 4 or 3 fields.
type FileEntry struct {
	Name string // the map's key: the local Lucene file name
	// Original is the value's own name field when it differs from Name
	// (OpenSearch writes the two equal); "" when they are equal.
	Original string
	Uploaded string // the data blob's name below the data prefix
	// Checksum is the file's Lucene footer checksum, a CRC32: OpenSearch
	// writes it with Long.toString of CodecUtil.retrieveChecksum, which
	// refuses values with the upper 32 bits set, so it is never negative.
	Checksum uint64
	// Length is the file's size in bytes; -1 if the value has no length.
	Length int64
	// WrittenByMajor is the Lucene major version that wrote the file; 0
	// if the value has none.
	WrittenByMajor int
}

// Checkpoint is the ReplicationCheckpoint a 2.10 or later body holds.
type Checkpoint struct {
	IndexName           string
	IndexUUID           string
	ShardID             int
	PrimaryTerm         int64
	SegmentsGen         int64
	SegmentInfosVersion int64
	// Length is the sum of the listed files' lengths; OpenSearch leaves
	// segments_N out of it.
	Length int64
	Codec  string // the engine's codec name, e.g. "Lucene101"
	// CreatedTimestamp is when the checkpoint was taken, in the clock
	// OpenSearch used (epoch nanoseconds in later 3.x); 0 before header
	// version 2, which does not hold it.
	CreatedTimestamp int64
}

// DFAPayload is the DataFormat-aware recovery state a version 3 body may
// carry after its SegmentInfos (DfaRecoveryPayload). segfs does not use
// it; it is parsed so that such a file is read, not refused.
type DFAPayload struct {
	PayloadVersion       int    // 1, the only layout known
	CatalogSnapshot      []byte // nil if empty
	LastCommitGeneration int64
	FormatStates         []FormatState // sorted by Format
	// Trailing holds bytes after the known fields: the layout reserves
	// the payload's tail for later fields, which readers skip.
	Trailing []byte
}

// FormatState is one data format's opaque recovery state.
type FormatState struct {
	Format string
	State  []byte // nil if empty
}

// Metadata is a parsed metadata file.
type Metadata struct {
	Version int    // the codec header's version: 1, 2 or 3
	Body    string // Body26, Body29 or Body210
	// Files is sorted by Name. OpenSearch writes the map from a HashMap,
	// in no order; names are unique.
	Files      []FileEntry
	Checkpoint *Checkpoint // nil for Body26 and Body29
	// Generation is the segments generation (the checkpoint's, or the
	// Body29 field); -1 if the body has none.
	Generation int64
	// PrimaryTerm likewise; -1 if the body has none.
	PrimaryTerm int64
	// SegmentInfos is the serialized SegmentInfos of the refresh, a copy;
	// nil if the body has none or it is empty.
	SegmentInfos []byte
	DFA          *DFAPayload // nil unless a version 3 body carries one
}

// dfaMagic starts a DFA payload. OpenSearch writes it with writeInt,
// little-endian in Lucene 9 and later: the bytes are "PAFD".
const dfaMagic = 0x44464150

// ParseMetadata parses a whole metadata file, in the order OpenSearch's
// VersionedCodecStreamWrapper reads it: the CRC32 of the whole file
// against its footer, then the codec header (MetadataCodec, versions
// MinMetadataVersion to MaxMetadataVersion), then the body of its
// version. Any error wraps ErrBadMetadata and names what is wrong and at
// which file offset. It never panics, and every count and length is
// checked against the bytes left before anything is allocated for it.
//
// A version 1 file holds one of three bodies with nothing to say which,
// so the bytes after the file map decide: none is Body26; a 2.10
// checkpoint, codec string and SegmentInfos that end exactly at the
// footer is Body210; generation, primary term and a SegmentInfos length
// that end exactly at the footer is Body29. If both of the last two fit,
// the one whose SegmentInfos starts with Lucene's codec magic wins;
// failing that the file is refused as ambiguous.
//
// Bytes between the body and the footer are an error. OpenSearch's own
// reader ignores them, but it never writes any, and telling the version
// 1 bodies apart relies on bodies ending at the footer. The one
// exception is the tail of a DFA payload, which that layout reserves for
// fields added later.
func ParseMetadata(data []byte) (*Metadata, error) {
	if _, err := lucene.CheckFile(data); err != nil {
		return nil, fmt.Errorf("%w: footer: %w", ErrBadMetadata, err)
	}
	body := data[:len(data)-lucene.FooterLength]
	h, err := lucene.ParseHeader(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadMetadata, err)
	}
	if h.Codec != MetadataCodec {
		return nil, fmt.Errorf("%w: codec %q, want %q", ErrBadMetadata, h.Codec, MetadataCodec)
	}
	if h.Version < MinMetadataVersion || h.Version > MaxMetadataVersion {
		return nil, fmt.Errorf("%w: header version %d, this reader knows %d to %d", ErrBadMetadata, h.Version, MinMetadataVersion, MaxMetadataVersion)
	}
	in := lucene.NewInput(body)
	if _, err := in.Bytes(int64(h.Len), "header"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadMetadata, err)
	}
	m := &Metadata{Version: int(h.Version), Generation: -1, PrimaryTerm: -1}
	if m.Files, err = readFiles(in); err != nil {
		return nil, fmt.Errorf("%w: file map: %w", ErrBadMetadata, err)
	}
	if m.Version == 1 {
		err = readBodyV1(in, m)
	} else {
		err = readBodyV2(in, m)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: version %d body: %w", ErrBadMetadata, m.Version, err)
	}
	return m, nil
}

// MaxMetadataFiles bounds the files a metadata file may list: a shard's
// commit holds a few hundred, tens of thousands in a shard of many small
// segments without compound files. A file of tiny entries otherwise
// lists one every ten bytes, six million in a file of MaxMetadataSize,
// which took 1.8 GB to parse (issue 42); at this bound the entries take
// 7 MB besides their strings.
const MaxMetadataFiles = 100_000

// maxEntryBytes bounds a key or value of the file map: a Lucene file
// name, or two names, a checksum, a length and a version. Splitting a
// value on "::" then costs little, and an error quotes little.
const maxEntryBytes = 4096

// MaxMetadataDecoded bounds the memory parsing one metadata file holds
// at its peak, for the daemon's memory bound to count once for every
// parse that may run at once: the file as read (MaxMetadataSize), the
// copies of its strings and SegmentInfos (no more than twice its size:
// a version 1 body is read as two bodies), and the FileEntry of each
// file it lists (72 bytes).
const MaxMetadataDecoded = 3*MaxMetadataSize + MaxMetadataFiles*72

// readFiles reads writeMapOfStrings: a VInt count, then that many key
// and value strings. The count is checked before any entry is read:
// at most MaxMetadataFiles, and each entry takes at least two bytes
// (two lengths); a key or value is at most maxEntryBytes. What an entry
// keeps is its FileEntry and its two strings, as long as the bytes they
// were read from.
func readFiles(in *lucene.Input) ([]FileEntry, error) {
	at := in.Offset()
	n, err := in.VInt()
	if err != nil {
		return nil, fmt.Errorf("count: %w", err)
	}
	if n < 0 || int(n) > in.Remaining()/2 {
		return nil, fmt.Errorf("count %d at offset %d, but %d bytes are left", n, at, in.Remaining())
	}
	if n > MaxMetadataFiles {
		return nil, fmt.Errorf("count %d at offset %d, more than the %d files segfs takes of one shard (MaxMetadataFiles)", n, at, MaxMetadataFiles)
	}
	var files []FileEntry // nil for none, as encoded
	if n > 0 {
		files = make([]FileEntry, 0, n)
	}
	for i := range int(n) {
		at := in.Offset()
		key, err := in.String(maxEntryBytes, "key")
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		value, err := in.String(maxEntryBytes, "value")
		if err != nil {
			return nil, fmt.Errorf("entry %d (%q): %w", i, key, err)
		}
		f, err := parseFileValue(key, value)
		if err != nil {
			return nil, fmt.Errorf("entry %d at offset %d: %w", i, at, err)
		}
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b FileEntry) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(files); i++ {
		if files[i].Name == files[i-1].Name {
			return nil, fmt.Errorf("file %q listed twice", files[i].Name)
		}
	}
	return files, nil
}

// parseFileValue parses one map value against its key. The uploaded
// name must be a plain blob name (CheckBlobName): it is fetched as a key
// below the shard's data path.
func parseFileValue(key, value string) (FileEntry, error) {
	fields := strings.SplitN(value, "::", 6) // a sixth field is already too many
	if len(fields) < 3 || len(fields) > 5 {
		return FileEntry{}, fmt.Errorf("file %q: value %q has %d fields, want 3 to 5 (orig::uploaded::checksum[::length[::writtenByMajor]])", key, value, len(fields))
	}
	f := FileEntry{Name: key, Uploaded: fields[1], Length: -1}
	if key == "" || fields[0] == "" || fields[1] == "" {
		return FileEntry{}, fmt.Errorf("file %q: value %q has an empty name", key, value)
	}
	if err := CheckBlobName(fields[1]); err != nil {
		return FileEntry{}, fmt.Errorf("file %q: uploaded as %w", key, err)
	}
	if fields[0] != key {
		f.Original = fields[0]
	}
	sum, err := strconv.ParseUint(fields[2], 10, 64)
	if err != nil || !isDecimal(fields[2]) || sum > math.MaxUint32 {
		return FileEntry{}, fmt.Errorf("file %q: checksum %q is not a decimal CRC32", key, fields[2])
	}
	f.Checksum = sum
	if len(fields) >= 4 {
		n, err := strconv.ParseInt(fields[3], 10, 64)
		if err != nil || !isDecimal(fields[3]) {
			return FileEntry{}, fmt.Errorf("file %q: length %q is not a decimal long", key, fields[3])
		}
		f.Length = n
	}
	if len(fields) == 5 {
		// OpenSearch refuses a major outside Lucene's supported range; any
		// positive int is taken here, since that range moves with Lucene.
		v, err := strconv.ParseInt(fields[4], 10, 32)
		if err != nil || !isDecimal(fields[4]) || v < 1 {
			return FileEntry{}, fmt.Errorf("file %q: writtenByMajor %q is not a positive decimal", key, fields[4])
		}
		f.WrittenByMajor = int(v)
	}
	return f, nil
}

// readBodyV1 reads what follows the map in a version 1 file, telling the
// three bodies apart as ParseMetadata describes.
func readBodyV1(in *lucene.Input, m *Metadata) error {
	at := in.Offset()
	if in.Remaining() == 0 {
		m.Body = Body26
		return nil
	}
	rest, _ := in.Bytes(int64(in.Remaining()), "body")
	as210, err210 := tryBody(rest, func(in *lucene.Input, c *Metadata) error { return readCheckpointBody(in, c, 1) })
	as29, err29 := tryBody(rest, readBody29)
	var body *Metadata
	switch {
	case err210 == nil && err29 == nil:
		magic210, magic29 := hasCodecMagic(as210.SegmentInfos), hasCodecMagic(as29.SegmentInfos)
		switch {
		case magic210 && !magic29:
			body = as210
		case magic29 && !magic210:
			body = as29
		default:
			return fmt.Errorf("the %d bytes at offset %d read as both a 2.9 and a 2.10 body", len(rest), at)
		}
	case err210 == nil:
		body = as210
	case err29 == nil:
		body = as29
	default:
		return fmt.Errorf("the %d bytes at offset %d (the offsets that follow count from there) are neither a 2.10 body (%w) nor a 2.9 body (%w)", len(rest), at, err210, err29)
	}
	m.Body, m.Checkpoint, m.Generation, m.PrimaryTerm, m.SegmentInfos = body.Body, body.Checkpoint, body.Generation, body.PrimaryTerm, body.SegmentInfos
	return nil
}

// tryBody reads rest as one body into a fresh Metadata and requires it
// to end exactly at the footer.
func tryBody(rest []byte, read func(*lucene.Input, *Metadata) error) (*Metadata, error) {
	in := lucene.NewInput(rest)
	c := &Metadata{Version: 1, Generation: -1, PrimaryTerm: -1}
	if err := read(in, c); err != nil {
		return nil, err
	}
	if in.Remaining() != 0 {
		return nil, fmt.Errorf("%d bytes left before the footer", in.Remaining())
	}
	return c, nil
}

// readBody29 reads the 2.9 body: generation, primary term, SegmentInfos.
func readBody29(in *lucene.Input, m *Metadata) error {
	gen, err := in.LEInt64()
	if err != nil {
		return fmt.Errorf("generation: %w", err)
	}
	term, err := in.LEInt64()
	if err != nil {
		return fmt.Errorf("primary term: %w", err)
	}
	if m.SegmentInfos, err = readSegmentInfos(in); err != nil {
		return err
	}
	m.Body, m.Generation, m.PrimaryTerm = Body29, gen, term
	return nil
}

// readBodyV2 reads a version 2 or 3 body, which must end at the footer
// (but for a DFA payload's tail).
func readBodyV2(in *lucene.Input, m *Metadata) error {
	if err := readCheckpointBody(in, m, m.Version); err != nil {
		return err
	}
	if m.Version >= 3 {
		at := in.Offset()
		presence, err := in.Byte()
		if err != nil {
			return fmt.Errorf("DFA presence: %w", err)
		}
		switch presence {
		case 0:
		case 1:
			if m.DFA, err = readDFA(in); err != nil {
				return fmt.Errorf("DFA payload at offset %d: %w", at+1, err)
			}
		default:
			return fmt.Errorf("DFA presence byte %d at offset %d, want 0 or 1", presence, at)
		}
	}
	if in.Remaining() != 0 {
		return fmt.Errorf("%d bytes left at offset %d before the footer", in.Remaining(), in.Offset())
	}
	return nil
}

// readCheckpointBody reads the 2.10 body: the checkpoint (with its
// creation time from version 2 on), then SegmentInfos.
func readCheckpointBody(in *lucene.Input, m *Metadata, version int) error {
	var c Checkpoint
	var err error
	if c.IndexName, err = in.String(in.Remaining(), "index name"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if c.IndexUUID, err = in.String(in.Remaining(), "index UUID"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	at := in.Offset()
	shard, err := in.VInt()
	if err != nil {
		return fmt.Errorf("checkpoint: shard id: %w", err)
	}
	if shard < 0 {
		return fmt.Errorf("checkpoint: shard id %d at offset %d is negative", shard, at)
	}
	c.ShardID = int(shard)
	for _, f := range []struct {
		dst  *int64
		what string
	}{{&c.PrimaryTerm, "primary term"}, {&c.SegmentsGen, "segments generation"}, {&c.SegmentInfosVersion, "segment infos version"}, {&c.Length, "length"}} {
		if *f.dst, err = in.LEInt64(); err != nil {
			return fmt.Errorf("checkpoint: %s: %w", f.what, err)
		}
	}
	if c.Codec, err = in.String(in.Remaining(), "codec"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if version >= 2 {
		if c.CreatedTimestamp, err = in.LEInt64(); err != nil {
			return fmt.Errorf("checkpoint: created timestamp: %w", err)
		}
	}
	if m.SegmentInfos, err = readSegmentInfos(in); err != nil {
		return err
	}
	m.Body, m.Checkpoint, m.Generation, m.PrimaryTerm = Body210, &c, c.SegmentsGen, c.PrimaryTerm
	return nil
}

// readSegmentInfos reads a LE i64 length and that many bytes, copied.
func readSegmentInfos(in *lucene.Input) ([]byte, error) {
	at := in.Offset()
	n, err := in.LEInt64()
	if err != nil {
		return nil, fmt.Errorf("segment infos length: %w", err)
	}
	p, err := in.Bytes(n, "segment infos")
	if err != nil {
		return nil, fmt.Errorf("length at offset %d: %w", at, err)
	}
	return cloneNonEmpty(p), nil
}

// maxFormatStates bounds the data formats a DFA payload may hold state
// for: one per format a shard writes (a few), so that a payload of tiny
// entries cannot build millions of them (MaxMetadataDecoded assumes it).
const maxFormatStates = 64

// readDFA reads a DfaRecoveryPayload; what follows its known fields is
// kept as Trailing.
func readDFA(in *lucene.Input) (*DFAPayload, error) {
	magic, err := in.Bytes(4, "magic")
	if err != nil {
		return nil, err
	}
	if v := binary.LittleEndian.Uint32(magic); v != dfaMagic {
		return nil, fmt.Errorf("magic %#08x, want %#08x", v, dfaMagic)
	}
	version, err := in.VInt()
	if err != nil {
		return nil, fmt.Errorf("payload version: %w", err)
	}
	if version != 1 {
		return nil, fmt.Errorf("payload version %d, this reader knows 1", version)
	}
	d := &DFAPayload{PayloadVersion: int(version)}
	if d.CatalogSnapshot, err = readVIntBytes(in, "catalog snapshot"); err != nil {
		return nil, err
	}
	if d.LastCommitGeneration, err = in.LEInt64(); err != nil {
		return nil, fmt.Errorf("last commit generation: %w", err)
	}
	at := in.Offset()
	n, err := in.VInt()
	if err != nil {
		return nil, fmt.Errorf("format state count: %w", err)
	}
	if n < 0 || int(n) > in.Remaining()/2 {
		return nil, fmt.Errorf("format state count %d at offset %d, but %d bytes are left", n, at, in.Remaining())
	}
	if n > maxFormatStates {
		return nil, fmt.Errorf("format state count %d at offset %d, more than the %d segfs takes", n, at, maxFormatStates)
	}
	for i := range int(n) {
		var s FormatState
		if s.Format, err = in.String(in.Remaining(), "format name"); err != nil {
			return nil, fmt.Errorf("format state %d: %w", i, err)
		}
		if s.State, err = readVIntBytes(in, "format state"); err != nil {
			return nil, fmt.Errorf("format state %d (%q): %w", i, s.Format, err)
		}
		d.FormatStates = append(d.FormatStates, s)
	}
	slices.SortFunc(d.FormatStates, func(a, b FormatState) int { return strings.Compare(a.Format, b.Format) })
	for i := 1; i < len(d.FormatStates); i++ {
		if d.FormatStates[i].Format == d.FormatStates[i-1].Format {
			return nil, fmt.Errorf("format %q listed twice", d.FormatStates[i].Format)
		}
	}
	rest, _ := in.Bytes(int64(in.Remaining()), "trailing")
	d.Trailing = cloneNonEmpty(rest)
	return d, nil
}

// readVIntBytes reads a VInt length and that many bytes, copied.
func readVIntBytes(in *lucene.Input, what string) ([]byte, error) {
	n, err := in.VInt()
	if err != nil {
		return nil, fmt.Errorf("%s length: %w", what, err)
	}
	p, err := in.Bytes(int64(n), what)
	if err != nil {
		return nil, err
	}
	return cloneNonEmpty(p), nil
}

// cloneNonEmpty copies p, so a Metadata never pins the caller's buffer;
// empty is nil, so parsed values compare equal to the ones encoded.
func cloneNonEmpty(p []byte) []byte {
	if len(p) == 0 {
		return nil
	}
	return bytes.Clone(p)
}

func hasCodecMagic(p []byte) bool {
	return len(p) >= 4 && binary.BigEndian.Uint32(p) == lucene.CodecMagic
}

// EncodeMetadata writes m as a metadata file of m.Version, for tests and
// tools: the body is m.Body for version 1 (Body26, Body29 or Body210),
// and Body210 (or "") for versions 2 and 3. Files are written in the
// given order; a FileEntry's fields map to the value's: Length -1 drops
// the length and writtenByMajor fields, WrittenByMajor 0 drops the
// latter. ParseMetadata of the result returns m with Files sorted, and
// EncodeMetadata refuses what it could not: fields that do not fit
// their encoding, a Generation or PrimaryTerm that contradicts the
// checkpoint, or a version 1 body that would read as another one.
func EncodeMetadata(m *Metadata) ([]byte, error) {
	b, err := encodeMetadata(m)
	if err != nil {
		return nil, fmt.Errorf("layout: encode metadata: %w", err)
	}
	if m.Version == 1 && m.Body != Body26 {
		// The version 1 bodies carry no tag; make sure these bytes tell.
		got, err := ParseMetadata(b)
		if err != nil {
			return nil, fmt.Errorf("layout: encode metadata: the %s body does not read back: %w", m.Body, err)
		}
		if got.Body != m.Body {
			return nil, fmt.Errorf("layout: encode metadata: the %s body would read as a %s body", m.Body, got.Body)
		}
	}
	return b, nil
}

func encodeMetadata(m *Metadata) ([]byte, error) {
	if m == nil {
		return nil, errors.New("nil Metadata")
	}
	if m.Version < MinMetadataVersion || m.Version > MaxMetadataVersion {
		return nil, fmt.Errorf("version %d, want %d to %d", m.Version, MinMetadataVersion, MaxMetadataVersion)
	}
	body := m.Body
	if m.Version >= 2 && body == "" {
		body = Body210
	}
	if m.Version >= 2 && body != Body210 {
		return nil, fmt.Errorf("version %d holds a %s body only, not %q", m.Version, Body210, body)
	}
	if m.DFA != nil && m.Version < 3 {
		return nil, fmt.Errorf("a DFA payload needs version 3, not %d", m.Version)
	}
	o := &lucene.Output{B: lucene.AppendHeader(nil, MetadataCodec, uint32(m.Version))}
	if err := writeFiles(o, m.Files); err != nil {
		return nil, err
	}
	switch body {
	case Body26:
		if m.Checkpoint != nil || m.SegmentInfos != nil || m.Generation != -1 || m.PrimaryTerm != -1 {
			return nil, fmt.Errorf("a %s body holds the file map only: no checkpoint, SegmentInfos, generation or primary term (-1)", Body26)
		}
	case Body29:
		if m.Checkpoint != nil {
			return nil, fmt.Errorf("a %s body holds no checkpoint", Body29)
		}
		o.LEInt64(m.Generation)
		o.LEInt64(m.PrimaryTerm)
		writeSegmentInfos(o, m.SegmentInfos)
	case Body210:
		if err := writeCheckpoint(o, m); err != nil {
			return nil, err
		}
		writeSegmentInfos(o, m.SegmentInfos)
		if m.Version >= 3 {
			if m.DFA == nil {
				o.Byte(0)
			} else {
				o.Byte(1)
				if err := writeDFA(o, m.DFA); err != nil {
					return nil, err
				}
			}
		}
	default:
		return nil, fmt.Errorf("unknown body %q (want %s, %s or %s)", body, Body26, Body29, Body210)
	}
	return lucene.AppendFooter(o.B), nil
}

func writeFiles(o *lucene.Output, files []FileEntry) error {
	seen := make(map[string]bool, len(files))
	o.VInt(int32(len(files)))
	for _, f := range files {
		if seen[f.Name] {
			return fmt.Errorf("file %q listed twice", f.Name)
		}
		seen[f.Name] = true
		value, err := fileValue(f)
		if err != nil {
			return err
		}
		o.String(f.Name)
		o.String(value)
	}
	return nil
}

// fileValue is the inverse of parseFileValue.
func fileValue(f FileEntry) (string, error) {
	orig := f.Original
	if orig == "" {
		orig = f.Name
	}
	if f.Name == "" || !utf8.ValidString(f.Name) {
		return "", fmt.Errorf("file %q: the name is empty or not UTF-8", f.Name)
	}
	// The key is a string of its own; the value's fields are split on
	// "::", so one holding "::" or ending in ':' would split differently.
	for _, s := range []string{orig, f.Uploaded} {
		if s == "" || strings.Contains(s, "::") || strings.HasSuffix(s, ":") || !utf8.ValidString(s) {
			return "", fmt.Errorf("file %q: value field %q is empty, not UTF-8, or holds \"::\" or a final ':'", f.Name, s)
		}
	}
	if f.Checksum > math.MaxUint32 {
		return "", fmt.Errorf("file %q: checksum %#x is not a CRC32", f.Name, f.Checksum)
	}
	fields := []string{orig, f.Uploaded, strconv.FormatUint(f.Checksum, 10)}
	switch {
	case f.Length < -1:
		return "", fmt.Errorf("file %q: length %d", f.Name, f.Length)
	case f.Length == -1 && f.WrittenByMajor != 0:
		return "", fmt.Errorf("file %q: a writtenByMajor needs a length", f.Name)
	case f.WrittenByMajor < 0 || f.WrittenByMajor > math.MaxInt32:
		return "", fmt.Errorf("file %q: writtenByMajor %d", f.Name, f.WrittenByMajor)
	}
	if f.Length >= 0 {
		fields = append(fields, strconv.FormatInt(f.Length, 10))
	}
	if f.WrittenByMajor > 0 {
		fields = append(fields, strconv.Itoa(f.WrittenByMajor))
	}
	return strings.Join(fields, "::"), nil
}

func writeCheckpoint(o *lucene.Output, m *Metadata) error {
	c := m.Checkpoint
	switch {
	case c == nil:
		return fmt.Errorf("a %s body needs a checkpoint", Body210)
	case m.Generation != c.SegmentsGen || m.PrimaryTerm != c.PrimaryTerm:
		return fmt.Errorf("generation %d and primary term %d contradict the checkpoint's %d and %d", m.Generation, m.PrimaryTerm, c.SegmentsGen, c.PrimaryTerm)
	case c.ShardID < 0 || c.ShardID > math.MaxInt32:
		return fmt.Errorf("checkpoint shard id %d", c.ShardID)
	case m.Version < 2 && c.CreatedTimestamp != 0:
		return fmt.Errorf("version %d holds no created timestamp, not %d", m.Version, c.CreatedTimestamp)
	}
	for _, s := range []string{c.IndexName, c.IndexUUID, c.Codec} {
		if !utf8.ValidString(s) {
			return fmt.Errorf("checkpoint string %q is not UTF-8", s)
		}
	}
	o.String(c.IndexName)
	o.String(c.IndexUUID)
	o.VInt(int32(c.ShardID))
	o.LEInt64(c.PrimaryTerm)
	o.LEInt64(c.SegmentsGen)
	o.LEInt64(c.SegmentInfosVersion)
	o.LEInt64(c.Length)
	o.String(c.Codec)
	if m.Version >= 2 {
		o.LEInt64(c.CreatedTimestamp)
	}
	return nil
}

func writeSegmentInfos(o *lucene.Output, p []byte) {
	o.LEInt64(int64(len(p)))
	o.Bytes(p)
}

func writeDFA(o *lucene.Output, d *DFAPayload) error {
	if d.PayloadVersion != 1 {
		return fmt.Errorf("DFA payload version %d, want 1", d.PayloadVersion)
	}
	o.B = binary.LittleEndian.AppendUint32(o.B, dfaMagic)
	o.VInt(int32(d.PayloadVersion))
	o.VInt(int32(len(d.CatalogSnapshot)))
	o.Bytes(d.CatalogSnapshot)
	o.LEInt64(d.LastCommitGeneration)
	o.VInt(int32(len(d.FormatStates)))
	seen := make(map[string]bool, len(d.FormatStates))
	for _, s := range d.FormatStates {
		if seen[s.Format] || !utf8.ValidString(s.Format) {
			return fmt.Errorf("DFA format %q listed twice or not UTF-8", s.Format)
		}
		seen[s.Format] = true
		o.String(s.Format)
		o.VInt(int32(len(s.State)))
		o.Bytes(s.State)
	}
	o.Bytes(d.Trailing)
	return nil
}

// SegmentsFileName returns the name Lucene gives the commit of
// generation gen: "segments_" and gen in base 36. (Lucene calls
// generation 0 plain "segments"; no commit OpenSearch uploads has it.)
func SegmentsFileName(gen int64) string {
	return "segments_" + strconv.FormatInt(gen, 36)
}
