package shard

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
)

// contentKind says how a file's body is filled.
type contentKind int

const (
	randomBytes contentKind = iota // incompressible
	jsonLines                      // compressible taxi-trip-like records
)

// filePlan is one file to generate.
type filePlan struct {
	name   string
	codec  string // codec name in the header
	suffix string // segment suffix in the header
	segID  [16]byte
	size   int64
	kind   contentKind
}

// seed returns the 32-byte seed of this file's content.
func (f filePlan) seed(specSeed int64) [32]byte {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(specSeed))
	h.Write(b[:])
	h.Write([]byte(f.name))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// dataFile is a per-segment file whose size is a share of its segment.
type dataFile struct {
	ext    string
	codec  string
	suffix string // non-empty for per-field formats, e.g. "Lucene103_0"
	weight float64
}

// dataFiles are the large files of a segment; their weights are shares of
// the segment's bytes after its metadata files.
var dataFiles = []dataFile{
	{"fdt", "Lucene90StoredFieldsFastData", "", 0.42},
	{"pos", "Lucene103PostingsWriterPos", "Lucene103_0", 0.16},
	{"doc", "Lucene103PostingsWriterDoc", "Lucene103_0", 0.12},
	{"dvd", "Lucene90DocValuesData", "Lucene90_0", 0.12},
	{"tim", "BlockTreeTermsDict", "Lucene103_0", 0.09},
	{"kdd", "Lucene90PointsFormatData", "", 0.06},
	{"nvd", "Lucene90NormsData", "", 0.012},
	{"tip", "BlockTreeTermsIndex", "Lucene103_0", 0.006},
	{"fdx", "Lucene90FieldsIndexIdx", "", 0.0006},
	{"kdi", "Lucene90PointsFormatIndex", "", 0.0004},
}

// metaFile is a small per-segment file read in full when a segment opens.
type metaFile struct {
	ext      string
	codec    string
	suffix   string
	min, max int64 // size range at the 1.5 GB scale, before scaling
}

var metaFiles = []metaFile{
	{"fdm", "Lucene90FieldsIndexMeta", "", 200, 400},
	{"tmd", "BlockTreeTermsMeta", "Lucene103_0", 2 << 10, 6 << 10},
	{"dvm", "Lucene90DocValuesMetadata", "Lucene90_0", 1 << 10, 4 << 10},
	{"nvm", "Lucene90NormsMetadata", "", 200, 600},
	{"kdm", "Lucene90PointsFormatMeta", "", 200, 500},
	{"si", "Lucene90SegmentInfo", "", 350, 550},
	{"fnm", "Lucene94FieldInfos", "", 1 << 10, 3 << 10},
}

// referenceScale is the shard size at which metaFiles' ranges apply.
const referenceScale = 1500 << 20

// fileName is the Lucene file name of ext in segment seg.
func fileName(seg, suffix, ext string) string {
	if suffix != "" {
		return seg + "_" + suffix + "." + ext
	}
	return seg + "." + ext
}

// segmentShares returns the shares of the shard each of n segments gets:
// 60/30/10 for three, halving from one to the next otherwise.
func segmentShares(n int) []float64 {
	if n == 3 {
		return []float64{0.6, 0.3, 0.1}
	}
	shares := make([]float64, n)
	total := 0.0
	for i := range shares {
		shares[i] = 1 / float64(int64(1)<<i)
		total += shares[i]
	}
	for i := range shares {
		shares[i] /= total
	}
	return shares
}

// plan lists the files of spec, sorted by name.
func plan(spec Spec) ([]filePlan, error) {
	if spec.Scale <= 0 {
		return nil, fmt.Errorf("shard: Scale must be positive, got %d", spec.Scale)
	}
	if spec.Segments <= 0 || spec.Segments > 32 {
		return nil, fmt.Errorf("shard: Segments must be in [1,32], got %d", spec.Segments)
	}
	if spec.BigFile < 0 {
		return nil, fmt.Errorf("shard: BigFile must not be negative, got %d", spec.BigFile)
	}
	rng := rand.New(rand.NewPCG(uint64(spec.Seed), 0x5e9f5))
	metaScale := float64(spec.Scale) / referenceScale
	var files []filePlan
	segNum := int64(0)
	for _, share := range segmentShares(spec.Segments) {
		segNum += 1 + rng.Int64N(40) // gaps, as merges leave them
		seg := "_" + strconv.FormatInt(segNum, 36)
		var id [16]byte
		for i := range id {
			id[i] = byte(rng.Uint32())
		}
		segBytes := int64(share * float64(spec.Scale))
		var metaBytes int64
		for _, mf := range metaFiles {
			size := mf.min + rng.Int64N(mf.max-mf.min+1)
			size = max(int64(float64(size)*min(1, max(metaScale, 0.25))), 128)
			metaBytes += size
			files = append(files, filePlan{name: fileName(seg, mf.suffix, mf.ext), codec: mf.codec, suffix: mf.suffix, segID: id, size: size})
		}
		rest := max(segBytes-metaBytes, 0)
		for _, df := range dataFiles {
			jitter := 0.9 + 0.2*rng.Float64()
			size := max(int64(df.weight*jitter*float64(rest)), 256)
			kind := randomBytes
			if df.ext == "fdt" && spec.JSONStoredFields {
				kind = jsonLines
			}
			files = append(files, filePlan{name: fileName(seg, df.suffix, df.ext), codec: df.codec, suffix: df.suffix, segID: id, size: size, kind: kind})
		}
	}
	var commitID [16]byte
	for i := range commitID {
		commitID[i] = byte(rng.Uint32())
	}
	files = append(files, filePlan{
		name:  "segments_" + strconv.FormatInt(segNum+1, 36),
		codec: "segments", segID: commitID,
		size: 300 + int64(spec.Segments)*120,
	})
	if spec.BigFile > 0 {
		files = append(files, filePlan{name: BigFileName, codec: "SegfsBigFile", segID: commitID, size: spec.BigFile})
	}
	for i := range files {
		if floor := int64(headerLen(files[i]) + footerLen); files[i].size < floor {
			files[i].size = floor
		}
	}
	slices.SortFunc(files, func(a, b filePlan) int { return cmp.Compare(a.name, b.name) })
	return files, nil
}
