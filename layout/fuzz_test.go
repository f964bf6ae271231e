package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/segfs/segfs/lucene"
)

var writeFuzzCorpus = flag.Bool("write-fuzz-corpus", false, "rewrite testdata/fuzz/FuzzParseMetadata from the samples")

const fuzzCorpusDir = "testdata/fuzz/FuzzParseMetadata"

// FuzzParseMetadata checks that ParseMetadata never panics, that what it
// refuses wraps ErrBadMetadata, and that what it accepts re-encodes and
// re-parses equal. Each input is tried as it is and with its checksum
// made right, since a mutation almost never keeps the CRC and the body
// parser would otherwise go untested.
func FuzzParseMetadata(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data)
		checkParse(t, fixCRC(data))
	})
}

func checkParse(t *testing.T, data []byte) {
	m, err := ParseMetadata(data)
	if err != nil {
		if !errors.Is(err, ErrBadMetadata) {
			t.Fatalf("error does not wrap ErrBadMetadata: %v", err)
		}
		return
	}
	enc, err := EncodeMetadata(m)
	if err != nil {
		t.Fatalf("accepted %+v, which does not encode: %v", m, err)
	}
	again, err := ParseMetadata(enc)
	if err != nil {
		t.Fatalf("re-encoded file does not parse: %v", err)
	}
	if !reflect.DeepEqual(m, again) {
		t.Fatalf("re-parsed differs:\n got %+v\nwant %+v", again, m)
	}
}

// fixCRC returns data with its last 8 bytes set to the CRC32 of the
// others, as a footer's checksum is; data shorter than a footer is
// returned as it is.
func fixCRC(data []byte) []byte {
	if len(data) < lucene.FooterLength {
		return data
	}
	c := bytes.Clone(data)
	binary.BigEndian.PutUint64(c[len(c)-8:], uint64(crc32.ChecksumIEEE(c[:len(c)-8])))
	return c
}

// fuzzSeeds returns the seed corpus by file name: a file of every sample
// version and body, and corrupt ones of the kinds the tests cover.
func fuzzSeeds(t testing.TB) map[string][]byte {
	seeds := make(map[string][]byte)
	for name, m := range sampleMetadata() {
		data, err := EncodeMetadata(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seeds["valid-"+strings.ReplaceAll(strings.ReplaceAll(name, " ", "-"), ".", "")] = data
	}
	v2 := seeds["valid-v2"]
	flipped := bytes.Clone(v2)
	flipped[len(flipped)/2] ^= 1
	seeds["corrupt-flipped-byte"] = flipped
	seeds["corrupt-truncated"] = v2[:len(v2)/2]
	seeds["corrupt-truncated-refootered"] = lucene.AppendFooter(bytes.Clone(v2[:len(v2)/2]))
	body := v2[lucene.HeaderLength(MetadataCodec) : len(v2)-lucene.FooterLength]
	seeds["corrupt-version-4"] = lucene.AppendFooter(append(lucene.AppendHeader(nil, MetadataCodec, 4), body...))
	seeds["corrupt-other-codec"] = lucene.AppendFooter(append(lucene.AppendHeader(nil, "segment_mx", 2), body...))
	huge := &lucene.Output{B: lucene.AppendHeader(nil, MetadataCodec, 2)}
	huge.VInt(1 << 30)
	seeds["corrupt-huge-map-count"] = lucene.AppendFooter(huge.B)
	v3 := seeds["valid-v3"]
	presence := bytes.Clone(v3[:len(v3)-lucene.FooterLength])
	presence[len(presence)-1] = 2
	seeds["corrupt-presence-2"] = lucene.AppendFooter(presence)
	odd := &lucene.Output{B: lucene.AppendHeader(nil, MetadataCodec, 1)}
	odd.VInt(0)
	odd.Bytes([]byte{1, 2, 3})
	seeds["corrupt-v1-neither-body"] = lucene.AppendFooter(odd.B)
	return seeds
}

// corpusFile is a seed in the "go test fuzz v1" format.
func corpusFile(data []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n")
}

// TestFuzzCorpus checks that the committed seed corpus is what the
// samples make, and rewrites it with -write-fuzz-corpus.
func TestFuzzCorpus(t *testing.T) {
	seeds := fuzzSeeds(t)
	if *writeFuzzCorpus {
		if err := os.MkdirAll(fuzzCorpusDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range seeds {
			if err := os.WriteFile(filepath.Join(fuzzCorpusDir, name), corpusFile(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(fuzzCorpusDir)
	if err != nil {
		t.Fatalf("%v (run go test -run TestFuzzCorpus ./layout -write-fuzz-corpus)", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := slices.Sorted(maps.Keys(seeds)); !slices.Equal(names, want) {
		t.Fatalf("corpus holds %v, the samples make %v (run with -write-fuzz-corpus)", names, want)
	}
	for name, data := range seeds {
		got, err := os.ReadFile(filepath.Join(fuzzCorpusDir, name))
		if err != nil || !bytes.Equal(got, corpusFile(data)) {
			t.Errorf("corpus file %s is stale (run with -write-fuzz-corpus): %v", name, err)
		}
		_, err = ParseMetadata(data)
		if strings.HasPrefix(name, "valid-") != (err == nil) {
			t.Errorf("seed %s: ParseMetadata: %v", name, err)
		}
	}
}
