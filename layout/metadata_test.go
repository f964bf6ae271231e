package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/segfs/segfs/lucene"
)

// sampleSegmentInfos returns bytes shaped like a serialized SegmentInfos
// of generation gen: an IndexHeader "segments" with the base-36
// generation as suffix, a body, a valid footer.
func sampleSegmentInfos(gen int64) []byte {
	var id [lucene.IDLength]byte
	copy(id[:], "0123456789abcdef")
	b := lucene.AppendIndexHeader(nil, "segments", 10, id, strings.TrimPrefix(SegmentsFileName(gen), "segments_"))
	b = append(b, "the commit's segments and user data"...)
	return lucene.AppendFooter(b)
}

// sampleFiles lists files in the unsorted order a HashMap might, with
// every value form: 5 fields, 4 (no writtenByMajor), 3 (no length), and
// a value whose name field differs from its key.
func sampleFiles() []FileEntry {
	return []FileEntry{
		{Name: "segments_5", Uploaded: "segments_5__gX7bNIIBrs0AUNsR2yEH", Checksum: 123456789, Length: 356, WrittenByMajor: 10},
		{Name: "_0.cfs", Uploaded: "_0.cfs__gX7bNIIBrs0AUNsR2yEG", Checksum: math.MaxUint32, Length: 1 << 40, WrittenByMajor: 10},
		{Name: "_0.si", Uploaded: "_0.si__gX7bNIIBrs0AUNsR2yEF", Checksum: 0, Length: 372},
		{Name: "_0.cfe", Uploaded: "_0.cfe__gX7bNIIBrs0AUNsR2yEE", Checksum: 42, Length: -1},
		{Name: "parquet/_0.pqt", Original: "_0.pqt", Uploaded: "_0.pqt__gX7bNIIBrs0AUNsR2yED", Checksum: 7, Length: 9, WrittenByMajor: 9},
	}
}

func sampleCheckpoint(created int64) *Checkpoint {
	return &Checkpoint{
		IndexName: "logs-2026.12", IndexUUID: "k2ijhe877d7yuhx7", ShardID: 3,
		PrimaryTerm: 2, SegmentsGen: 5, SegmentInfosVersion: 17, Length: 1<<40 + 372 + 9,
		Codec: "Lucene101", CreatedTimestamp: created,
	}
}

// sampleMetadata returns one Metadata of every version and body, by name.
func sampleMetadata() map[string]*Metadata {
	si := sampleSegmentInfos(5)
	return map[string]*Metadata{
		"v1 2.6":       {Version: 1, Body: Body26, Files: sampleFiles(), Generation: -1, PrimaryTerm: -1},
		"v1 2.6 empty": {Version: 1, Body: Body26, Generation: -1, PrimaryTerm: -1},
		"v1 2.9":       {Version: 1, Body: Body29, Files: sampleFiles(), Generation: 5, PrimaryTerm: 2, SegmentInfos: si},
		"v1 2.10":      {Version: 1, Body: Body210, Files: sampleFiles(), Checkpoint: sampleCheckpoint(0), Generation: 5, PrimaryTerm: 2, SegmentInfos: si},
		"v2":           {Version: 2, Body: Body210, Files: sampleFiles(), Checkpoint: sampleCheckpoint(1764590000123456789), Generation: 5, PrimaryTerm: 2, SegmentInfos: si},
		"v2 empty":     {Version: 2, Body: Body210, Checkpoint: &Checkpoint{}, Generation: 0, PrimaryTerm: 0},
		// A key may hold "::" when the value names the file otherwise.
		"v2 odd key": {Version: 2, Body: Body210, Files: []FileEntry{{Name: "_0:::s", Original: "_0.cfs", Uploaded: "_0.cfs__u", Checksum: 1, Length: 2}},
			Checkpoint: sampleCheckpoint(1), Generation: 5, PrimaryTerm: 2},
		"v3": {Version: 3, Body: Body210, Files: sampleFiles(), Checkpoint: sampleCheckpoint(99), Generation: 5, PrimaryTerm: 2, SegmentInfos: si},
		"v3 dfa": {Version: 3, Body: Body210, Files: sampleFiles(), Checkpoint: sampleCheckpoint(99), Generation: 5, PrimaryTerm: 2,
			DFA: &DFAPayload{PayloadVersion: 1, CatalogSnapshot: []byte{1, 2, 3, 4, 5}, LastCommitGeneration: 4,
				FormatStates: []FormatState{{Format: "future_format"}, {Format: "parquet", State: []byte("PAR1")}, {Format: "lucene", State: []byte("LUC")}}}},
		"v3 dfa trailing": {Version: 3, Body: Body210, Checkpoint: sampleCheckpoint(99), Generation: 5, PrimaryTerm: 2, SegmentInfos: si,
			DFA: &DFAPayload{PayloadVersion: 1, LastCommitGeneration: 4, Trailing: []byte("a later field")}},
	}
}

// sorted returns a copy of m as ParseMetadata returns it: files and
// format states sorted.
func sorted(m *Metadata) *Metadata {
	c := *m
	c.Files = slices.Clone(m.Files)
	slices.SortFunc(c.Files, func(a, b FileEntry) int { return strings.Compare(a.Name, b.Name) })
	if m.DFA != nil {
		d := *m.DFA
		d.FormatStates = slices.Clone(d.FormatStates)
		slices.SortFunc(d.FormatStates, func(a, b FormatState) int { return strings.Compare(a.Format, b.Format) })
		c.DFA = &d
	}
	return &c
}

func TestMetadataRoundTrip(t *testing.T) {
	for name, m := range sampleMetadata() {
		t.Run(name, func(t *testing.T) {
			data, err := EncodeMetadata(m)
			if err != nil {
				t.Fatalf("EncodeMetadata: %v", err)
			}
			got, err := ParseMetadata(data)
			if err != nil {
				t.Fatalf("ParseMetadata: %v", err)
			}
			want := sorted(m)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
			}
			// Encoding what was parsed gives the same bytes when the
			// input was written in sorted order.
			again, err := EncodeMetadata(got)
			if err != nil {
				t.Fatal(err)
			}
			inSortedOrder, _ := EncodeMetadata(want)
			if !bytes.Equal(again, inSortedOrder) {
				t.Errorf("re-encoding differs")
			}
		})
	}
}

// TestMetadataBytes builds a version 2 file byte by byte from the format
// (not from EncodeMetadata) and checks both directions against it.
func TestMetadataBytes(t *testing.T) {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0x3FD76C17)
	b = append(b, 10)
	b = append(b, "segment_md"...)
	b = binary.BigEndian.AppendUint32(b, 2)
	b = append(b, 1) // one entry
	key, value := "_0.cfe", "_0.cfe::_0.cfe__gX7bNIIBrs0AUNsR2yEG::3405691582::2048::10"
	b = append(b, byte(len(key)))
	b = append(b, key...)
	b = append(b, byte(len(value)))
	b = append(b, value...)
	b = append(b, 4)
	b = append(b, "logs"...)
	b = append(b, 2)
	b = append(b, "u1"...)
	b = append(b, 0x81, 0x01) // shard 129 as a two-byte VInt
	for _, v := range []int64{7, 36, 40, 2048} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	b = append(b, 9)
	b = append(b, "Lucene101"...)
	b = binary.LittleEndian.AppendUint64(b, 123)
	b = binary.LittleEndian.AppendUint64(b, 3)
	b = append(b, "abc"...)
	b = binary.BigEndian.AppendUint32(b, 0xC02893E8)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = lucene.AppendFooter(b[:len(b)-8])

	want := &Metadata{
		Version: 2, Body: Body210,
		Files:      []FileEntry{{Name: "_0.cfe", Uploaded: "_0.cfe__gX7bNIIBrs0AUNsR2yEG", Checksum: 0xCAFEBABE, Length: 2048, WrittenByMajor: 10}},
		Checkpoint: &Checkpoint{IndexName: "logs", IndexUUID: "u1", ShardID: 129, PrimaryTerm: 7, SegmentsGen: 36, SegmentInfosVersion: 40, Length: 2048, Codec: "Lucene101", CreatedTimestamp: 123},
		Generation: 36, PrimaryTerm: 7, SegmentInfos: []byte("abc"),
	}
	got, err := ParseMetadata(b)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseMetadata = %+v, %v\nwant %+v", got, err, want)
	}
	enc, err := EncodeMetadata(want)
	if err != nil || !bytes.Equal(enc, b) {
		t.Fatalf("EncodeMetadata = %x, %v\nwant %x", enc, err, b)
	}
	if SegmentsFileName(got.Generation) != "segments_10" {
		t.Errorf("SegmentsFileName(36) = %s", SegmentsFileName(got.Generation))
	}
}

func TestSegmentsFileName(t *testing.T) {
	for gen, want := range map[int64]string{1: "segments_1", 35: "segments_z", 36: "segments_10", 1 << 40: "segments_e13wu1og"} {
		if got := SegmentsFileName(gen); got != want {
			t.Errorf("SegmentsFileName(%d) = %s, want %s", gen, got, want)
		}
	}
}

func TestMetadataFlippedByte(t *testing.T) {
	data, err := EncodeMetadata(sampleMetadata()["v2"])
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		c := bytes.Clone(data)
		c[i] ^= 0x20
		_, err := ParseMetadata(c)
		if !errors.Is(err, ErrBadMetadata) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
		// Every byte but the footer's magic, algorithm and checksum is
		// covered by the CRC.
		if i < len(data)-lucene.FooterLength && !errors.Is(err, lucene.ErrChecksum) {
			t.Fatalf("byte %d flipped: %v, want a checksum error", i, err)
		}
	}
}

// TestMetadataTruncated cuts every sample at every length: as it is (the
// footer then fails) and with a valid footer put back, so the body
// parser meets every truncation. Neither panics; the latter is accepted
// only where a shorter body is a valid one (a version 1 file cut after
// its map is a 2.6 body; a DFA payload's tail may be shorter).
func TestMetadataTruncated(t *testing.T) {
	for name, m := range sampleMetadata() {
		data, err := EncodeMetadata(m)
		if err != nil {
			t.Fatal(err)
		}
		body := data[:len(data)-lucene.FooterLength]
		for n := range len(data) {
			if _, err := ParseMetadata(data[:n]); !errors.Is(err, ErrBadMetadata) {
				t.Fatalf("%s cut at %d: %v", name, n, err)
			}
			if n >= len(body) {
				continue // n == len(body) is the whole file
			}
			got, err := ParseMetadata(lucene.AppendFooter(bytes.Clone(body[:n])))
			switch {
			case err == nil && got.Body == Body26 && m.Version == 1:
			case err == nil && m.DFA != nil && len(got.DFA.Trailing) < len(m.DFA.Trailing):
			case err == nil:
				t.Fatalf("%s cut at %d and refootered: accepted as %+v", name, n, got)
			case !errors.Is(err, ErrBadMetadata):
				t.Fatalf("%s cut at %d and refootered: %v", name, n, err)
			}
		}
	}
}

// rawFile builds a metadata file from raw map strings and raw body
// bytes, bypassing EncodeMetadata's checks.
func rawFile(codec string, version uint32, entries [][2]string, body []byte) []byte {
	o := &lucene.Output{B: lucene.AppendHeader(nil, codec, version)}
	o.VInt(int32(len(entries)))
	for _, e := range entries {
		o.String(e[0])
		o.String(e[1])
	}
	o.Bytes(body)
	return lucene.AppendFooter(o.B)
}

// checkpointBody returns a version 2 checkpoint and SegmentInfos body.
func checkpointBody(t *testing.T) []byte {
	data, err := EncodeMetadata(&Metadata{Version: 2, Checkpoint: &Checkpoint{IndexName: "i", Codec: "c", SegmentsGen: 1}, Generation: 1, SegmentInfos: []byte("si")})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := lucene.ParseHeader(data)
	return data[h.Len+1 : len(data)-lucene.FooterLength] // past header and the empty map's count
}

func TestMetadataHeader(t *testing.T) {
	body := checkpointBody(t)
	tests := map[string][]byte{
		"other codec": rawFile("segment_mdx", 2, nil, body),
		"version 0":   rawFile(MetadataCodec, 0, nil, body),
		"version 4":   rawFile(MetadataCodec, 4, nil, body),
		"no header":   lucene.AppendFooter([]byte("not a header at all")),
		"empty":       nil,
	}
	for name, data := range tests {
		if _, err := ParseMetadata(data); !errors.Is(err, ErrBadMetadata) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ParseMetadata(rawFile(MetadataCodec, 2, nil, body)); err != nil {
		t.Errorf("the same body under a good header: %v", err)
	}
}

func TestMetadataValues(t *testing.T) {
	body := checkpointBody(t)
	tests := []struct {
		value string
		want  FileEntry // zero if refused
	}{
		{"_0.si::_0.si__u::5::100::9", FileEntry{Name: "_0.si", Uploaded: "_0.si__u", Checksum: 5, Length: 100, WrittenByMajor: 9}},
		{"_0.si::_0.si__u::5::100", FileEntry{Name: "_0.si", Uploaded: "_0.si__u", Checksum: 5, Length: 100}},
		{"_0.si::_0.si__u::5", FileEntry{Name: "_0.si", Uploaded: "_0.si__u", Checksum: 5, Length: -1}},
		{"_0.si::_0.si__u::4294967295::0", FileEntry{Name: "_0.si", Uploaded: "_0.si__u", Checksum: math.MaxUint32, Length: 0}},
		{"_0.si::_0.si__u::007::100", FileEntry{Name: "_0.si", Uploaded: "_0.si__u", Checksum: 7, Length: 100}},
		{"other::_0.si__u::5::1", FileEntry{Name: "_0.si", Original: "other", Uploaded: "_0.si__u", Checksum: 5, Length: 1}},
		{"_0.si::_0.si__u", FileEntry{}},                    // 2 fields
		{"_0.si::_0.si__u::5::100::9::lucene", FileEntry{}}, // 6 fields
		{"_0.si::_0.si__u::-5::100", FileEntry{}},           // Long.toString of a CRC32 is never negative
		{"_0.si::_0.si__u::4294967296::100", FileEntry{}},   // more than 32 bits
		{"_0.si::_0.si__u::+5::100", FileEntry{}},
		{"_0.si::_0.si__u::0x5::100", FileEntry{}},
		{"_0.si::_0.si__u::5::-1", FileEntry{}},
		{"_0.si::_0.si__u::5::1e3", FileEntry{}},
		{"_0.si::_0.si__u::5::100::0", FileEntry{}},
		{"_0.si::_0.si__u::5::100::x", FileEntry{}},
		{"::_0.si__u::5::100", FileEntry{}},
		{"_0.si::::5::100", FileEntry{}},
		{"", FileEntry{}},
	}
	for _, tt := range tests {
		got, err := ParseMetadata(rawFile(MetadataCodec, 2, [][2]string{{"_0.si", tt.value}}, body))
		if tt.want == (FileEntry{}) {
			if !errors.Is(err, ErrBadMetadata) {
				t.Errorf("%q accepted: %v", tt.value, err)
			}
			continue
		}
		if err != nil || len(got.Files) != 1 || got.Files[0] != tt.want {
			t.Errorf("%q: %+v, %v; want %+v", tt.value, got, err, tt.want)
		}
	}
	dup := [][2]string{{"_0.si", "_0.si::a::1::2"}, {"_0.si", "_0.si::b::1::2"}}
	if _, err := ParseMetadata(rawFile(MetadataCodec, 2, dup, body)); !errors.Is(err, ErrBadMetadata) {
		t.Errorf("a key twice: %v", err)
	}
	if _, err := ParseMetadata(rawFile(MetadataCodec, 2, [][2]string{{"", "x::a::1::2"}}, body)); !errors.Is(err, ErrBadMetadata) {
		t.Errorf("an empty key: %v", err)
	}
}

func TestMetadataBodyEnds(t *testing.T) {
	body := checkpointBody(t)
	for name, data := range map[string][]byte{
		"v2 with a byte left":       rawFile(MetadataCodec, 2, nil, append(bytes.Clone(body), 0)),
		"v3 without presence":       rawFile(MetadataCodec, 3, nil, body),
		"v3 presence 2":             rawFile(MetadataCodec, 3, nil, append(bytes.Clone(body), 2)),
		"v3 presence 0, byte left":  rawFile(MetadataCodec, 3, nil, append(bytes.Clone(body), 0, 0)),
		"v3 presence 1, no payload": rawFile(MetadataCodec, 3, nil, append(bytes.Clone(body), 1)),
		"v3 payload, bad magic":     rawFile(MetadataCodec, 3, nil, append(bytes.Clone(body), 1, 'D', 'F', 'A', 'P', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
		"v3 payload, version 2":     rawFile(MetadataCodec, 3, nil, append(bytes.Clone(body), 1, 'P', 'A', 'F', 'D', 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
		"v3 payload, format twice":  rawFile(MetadataCodec, 3, nil, append(bytes.Clone(body), 1, 'P', 'A', 'F', 'D', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 'x', 0, 1, 'x', 0)),
	} {
		_, err := ParseMetadata(data)
		if !errors.Is(err, ErrBadMetadata) {
			t.Errorf("%s: %v", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
	ok := rawFile(MetadataCodec, 3, nil, append(bytes.Clone(body), 1, 'P', 'A', 'F', 'D', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
	if m, err := ParseMetadata(ok); err != nil || m.DFA == nil {
		t.Errorf("the smallest DFA payload: %+v, %v", m, err)
	}
}

// TestMetadataVersion1Bodies checks how a version 1 body is told apart
// when its bytes read as both a 2.9 and a 2.10 body: a 2.9 body of
// generation 0 whose SegmentInfos holds, at the right places, an empty
// codec string and a length that ends a 2.10 reading at the footer.
func TestMetadataVersion1Bodies(t *testing.T) {
	const k = 6
	si := make([]byte, 20+k)
	binary.LittleEndian.PutUint64(si[12:], k) // the 2.10 reading's SegmentInfos length
	copy(si[20:], "tail..")
	m := &Metadata{Version: 1, Body: Body29, Generation: 0, PrimaryTerm: 3, SegmentInfos: si}

	// Neither reading's SegmentInfos starts with the codec magic: refused.
	if _, err := EncodeMetadata(m); err == nil {
		t.Fatal("an ambiguous 2.9 body was encoded")
	}
	o := &lucene.Output{}
	o.LEInt64(0)
	o.LEInt64(3)
	o.LEInt64(int64(len(si)))
	o.Bytes(si)
	if _, err := ParseMetadata(rawFile(MetadataCodec, 1, nil, o.B)); !errors.Is(err, ErrBadMetadata) || !strings.Contains(err.Error(), "both") {
		t.Fatalf("ambiguous body: %v", err)
	}

	// With the magic in front of the 2.9 reading's SegmentInfos, 2.9 wins.
	binary.BigEndian.PutUint32(si, lucene.CodecMagic)
	data, err := EncodeMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseMetadata(data)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("2.9 body: %+v, %v", got, err)
	}

	// A body that is neither names both failures.
	if _, err := ParseMetadata(rawFile(MetadataCodec, 1, nil, []byte{1, 2, 3})); !errors.Is(err, ErrBadMetadata) || !strings.Contains(err.Error(), "neither") {
		t.Errorf("3 stray bytes: %v", err)
	}
}

func TestEncodeMetadataRefuses(t *testing.T) {
	good := func() *Metadata { return sorted(sampleMetadata()["v2"]) }
	tests := map[string]func(*Metadata){
		"version 0":                func(m *Metadata) { m.Version = 0 },
		"version 4":                func(m *Metadata) { m.Version = 4 },
		"v2 with a 2.9 body":       func(m *Metadata) { m.Body = Body29 },
		"no checkpoint":            func(m *Metadata) { m.Checkpoint = nil },
		"generation contradicts":   func(m *Metadata) { m.Generation = 6 },
		"DFA before v3":            func(m *Metadata) { m.DFA = &DFAPayload{PayloadVersion: 1} },
		"file twice":               func(m *Metadata) { m.Files = append(m.Files, m.Files[0]) },
		"name with ::":             func(m *Metadata) { m.Files[0].Uploaded = "a::b" },
		"key with :: as the name":  func(m *Metadata) { m.Files[0].Name = "a::b" },
		"empty key":                func(m *Metadata) { m.Files[0].Name = "" },
		"name ending in :":         func(m *Metadata) { m.Files[0].Original = "a:" },
		"empty uploaded":           func(m *Metadata) { m.Files[0].Uploaded = "" },
		"checksum past 32 bits":    func(m *Metadata) { m.Files[0].Checksum = 1 << 32 },
		"major without length":     func(m *Metadata) { m.Files[1].Length = -1 }, // _0.cfs, with a major
		"length below -1":          func(m *Metadata) { m.Files[0].Length = -2 },
		"negative shard":           func(m *Metadata) { m.Checkpoint.ShardID = -1 },
		"not UTF-8":                func(m *Metadata) { m.Checkpoint.Codec = "\xff" },
		"v1 2.10 with a timestamp": func(m *Metadata) { m.Version = 1 },
		"v1 2.6 with a checkpoint": func(m *Metadata) { m.Version, m.Body = 1, Body26 },
		"unknown body":             func(m *Metadata) { m.Version, m.Body = 1, "2.8" },
	}
	for name, edit := range tests {
		m := good()
		m.Checkpoint = &Checkpoint{}
		*m.Checkpoint = *good().Checkpoint
		edit(m)
		if _, err := EncodeMetadata(m); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

// TestMetadataHugeLengths feeds small files whose counts and lengths
// claim far more than they hold: each is refused, and parsing them
// allocates little, whatever was claimed.
func TestMetadataHugeLengths(t *testing.T) {
	body := checkpointBody(t)
	le := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	vint := func(v int32) []byte { o := &lucene.Output{}; o.VInt(v); return o.B }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	// The checkpoint body up to (not with) its SegmentInfos length.
	ckpt := body[:len(body)-8-2]
	dfa := func(rest ...[]byte) []byte {
		return cat(append([][]byte{body, {1, 'P', 'A', 'F', 'D', 1}}, rest...)...)
	}
	huge := map[string][]byte{
		"map count": func() []byte {
			o := &lucene.Output{B: lucene.AppendHeader(nil, MetadataCodec, 2)}
			o.VInt(math.MaxInt32)
			return lucene.AppendFooter(o.B)
		}(),
		"key length": func() []byte {
			o := &lucene.Output{B: lucene.AppendHeader(nil, MetadataCodec, 2)}
			o.VInt(1)
			o.VInt(1 << 30)
			return lucene.AppendFooter(o.B)
		}(),
		"index name length":   rawFile(MetadataCodec, 2, nil, cat(vint(1<<30), body)),
		"segment infos 1<<40": rawFile(MetadataCodec, 2, nil, cat(ckpt, le(1<<40))),
		"segment infos max":   rawFile(MetadataCodec, 2, nil, cat(ckpt, le(math.MaxInt64))),
		"segment infos < 0":   rawFile(MetadataCodec, 2, nil, cat(ckpt, le(-1))),
		"2.9 segment infos":   rawFile(MetadataCodec, 1, nil, cat(le(1), le(1), le(1<<40))),
		"DFA catalog":         rawFile(MetadataCodec, 3, nil, dfa(vint(1<<30))),
		"DFA catalog < 0":     rawFile(MetadataCodec, 3, nil, dfa(vint(-1))),
		"DFA format count":    rawFile(MetadataCodec, 3, nil, dfa(vint(0), le(0), vint(math.MaxInt32))),
		"DFA state length":    rawFile(MetadataCodec, 3, nil, dfa(vint(0), le(0), vint(1), vint(1), []byte("x"), vint(1<<30))),
	}
	for name, data := range huge {
		_, err := ParseMetadata(data)
		if !errors.Is(err, ErrBadMetadata) {
			t.Errorf("%s: %v", name, err)
		}
		t.Logf("%s: %v", name, err)
		const runs = 100
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range runs {
			ParseMetadata(data)
		}
		runtime.ReadMemStats(&after)
		// An error message and a few small values per parse; a claimed
		// length, were it allocated, would be orders of magnitude more.
		if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 8<<10 {
			t.Errorf("%s: %d bytes allocated per parse of a %d-byte file", name, per, len(data))
		}
	}
}
