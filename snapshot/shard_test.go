package snapshot

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/smile"
)

func sample() *ShardSnapshot {
	return &ShardSnapshot{Name: "snap-1", IndexVersion: 7, Files: []FileInfo{
		{Blob: "__aAbB0", Name: "_0.cfs", Length: 2500, Checksum: "1x2y3z", PartSize: 1000, WrittenBy: "8.7.0"},
		{Blob: "__cCdD1", Name: "_0.cfe", Length: 300, Checksum: "abc", PartSize: math.MaxInt64, WrittenBy: "8.7.0"},
		{Blob: "v__eEfF2", Name: "_0.si", Length: 3, Checksum: "q", PartSize: math.MaxInt64, WrittenBy: "8.7.0", MetaHash: []byte{1, 2, 3}},
		{Blob: "__gGhH3", Name: "empty", Length: 0, Checksum: "0", PartSize: math.MaxInt64, WrittenBy: "8.7.0"},
	}}
}

func TestShardSnapshotRoundTrip(t *testing.T) {
	for _, compress := range []bool{false, true} {
		raw := EncodeShardSnapshot(sample(), compress)
		if compress != bytes.Contains(raw, compressedMarker) {
			t.Fatalf("compress %v: marker %v", compress, !compress)
		}
		got, err := ParseShardSnapshot(raw)
		if err != nil {
			t.Fatalf("compress %v: %v", compress, err)
		}
		if !reflect.DeepEqual(got, sample()) {
			t.Errorf("compress %v: %+v, want %+v", compress, got, sample())
		}
	}
}

// parts collects the parts Parts yields, checking their numbers and
// that Part gives each alike.
func parts(t *testing.T, f FileInfo) []Part {
	t.Helper()
	var out []Part
	for i, p := range f.Parts() {
		if i != int64(len(out)) || f.Part(i) != p {
			t.Fatalf("%s: part %d yielded as %d, Part gives %v", f.Name, len(out), i, f.Part(i))
		}
		out = append(out, p)
	}
	if int64(len(out)) != f.NParts() {
		t.Fatalf("%s: %d parts yielded, NParts %d", f.Name, len(out), f.NParts())
	}
	return out
}

// Parts as BlobStoreIndexShardSnapshot.FileInfo names them: no suffix
// for one part, .partN otherwise, every part PartSize bytes but the last.
func TestParts(t *testing.T) {
	s := sample()
	exact := FileInfo{Blob: "__x", Length: 2000, PartSize: 1000}
	for _, c := range []struct {
		name string
		f    FileInfo
		want []Part
	}{
		{"three parts", s.Files[0], []Part{{"__aAbB0.part0", 0, 1000}, {"__aAbB0.part1", 1000, 1000}, {"__aAbB0.part2", 2000, 500}}},
		{"one part", s.Files[1], []Part{{"__cCdD1", 0, 300}}},
		{"a virtual file", s.Files[2], nil},
		{"an empty file", s.Files[3], []Part{{"__gGhH3", 0, 0}}},
		{"exactly two parts", exact, []Part{{"__x.part0", 0, 1000}, {"__x.part1", 1000, 1000}}},
		{"no part size", FileInfo{Blob: "__y", Length: 5}, []Part{{"__y", 0, 5}}},
	} {
		if got := parts(t, c.f); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A file claiming 2^40 parts costs what its parts walked cost: part i
// is named alone, and a walk that stops builds no more.
func TestPartsLazy(t *testing.T) {
	f := FileInfo{Blob: "__big", Name: "big", Length: 1 << 40, PartSize: 1}
	if n := f.NParts(); n != 1<<40 {
		t.Fatalf("NParts %d, want 2^40", n)
	}
	if got, want := f.Part(1<<40-1), (Part{"__big.part1099511627775", 1<<40 - 1, 1}); got != want {
		t.Errorf("the last part: %v, want %v", got, want)
	}
	walked := 0
	for range f.Parts() {
		if walked++; walked == 3 {
			break
		}
	}
	if walked != 3 {
		t.Errorf("walked %d parts, want 3", walked)
	}
	for _, i := range []int64{-1, 1 << 40} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "snapshot: part") {
					t.Errorf("Part(%d): recovered %v, want a panic naming the package", i, r)
				}
			}()
			f.Part(i)
		}()
	}
}

// The parts of a whole shard snapshot are bounded, summed as its files
// are read: files each within MaxParts fail together past MaxShardParts,
// naming the file that crosses it and the bound.
func TestMaxShardParts(t *testing.T) {
	files := func(n int, length int64) *ShardSnapshot {
		s := &ShardSnapshot{Name: "s", IndexVersion: 1}
		for i := range n {
			s.Files = append(s.Files, FileInfo{Blob: fmt.Sprintf("__b%d", i), Name: fmt.Sprintf("f%d", i), Length: length, PartSize: 1, WrittenBy: "8.7.0"})
		}
		return s
	}
	// Exactly the bound: four files of a quarter each.
	if _, err := ParseShardSnapshot(EncodeShardSnapshot(files(4, MaxShardParts/4), true)); err != nil {
		t.Errorf("%d parts in all: %v", MaxShardParts, err)
	}
	_, err := ParseShardSnapshot(EncodeShardSnapshot(files(5, MaxShardParts/4), true))
	if want := "file 4 (f4) brings the shard's parts to more than 1048576"; err == nil || !errors.Is(err, ErrBlob) || !strings.Contains(err.Error(), want) {
		t.Errorf("one part more: %v, want an error saying %q", err, want)
	}
	// Issue 42's snapshot: 100,000 files of 1 MiB in parts of one byte.
	// It fails at its second file.
	_, err = ParseShardSnapshot(EncodeShardSnapshot(files(100_000, 1<<20), true))
	if want := "file 1 (f1) brings"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("100,000 files of 2^20 parts: %v, want an error saying %q", err, want)
	}
}

// Hostile blobs: each fails with one error naming what is wrong, and
// nothing a length claims is allocated.
func TestHostileShardSnapshots(t *testing.T) {
	mod := func(f func(*ShardSnapshot)) []byte {
		s := sample()
		f(s)
		return EncodeShardSnapshot(s, false)
	}
	flipped := EncodeShardSnapshot(sample(), false)
	flipped[len(flipped)/2] ^= 0x40
	var bomb bytes.Buffer
	w, _ := flate.NewWriter(&bomb, 9)
	w.Write(make([]byte, MaxBlobSize+1))
	w.Close()
	bombBlob := EncodeBlob(ShardSnapshotCodec, nil, false)
	bombBlob = append(append(bombBlob[:len(bombBlob)-16], compressedMarker...), bomb.Bytes()...)
	bombBlob = appendFooter(bombBlob)
	for _, c := range []struct {
		name, want string
		raw        []byte
	}{
		{"flipped byte", "checksum", flipped},
		{"another codec", `codec "snapshots" version 1, want "snapshot"`, EncodeBlob("snapshots", smile.Encode(&smile.Object{}, smile.EncodeOptions{}), false)},
		{"not an object", "not an object", EncodeBlob(ShardSnapshotCodec, smile.Encode([]any{}, smile.EncodeOptions{}), false)},
		{"not smile", "smile", EncodeBlob(ShardSnapshotCodec, []byte("{}"), false)},
		{"a name with a slash", `physical_name "a/b" is not a file name`, mod(func(s *ShardSnapshot) { s.Files[0].Name = "a/b" })},
		{"a dot-dot name", `physical_name ".." is not a file name`, mod(func(s *ShardSnapshot) { s.Files[0].Name = ".." })},
		{"a blob outside", `blob name "__../x" is not a repository's`, mod(func(s *ShardSnapshot) { s.Files[0].Blob = "__../x" })},
		{"a foreign blob name", `blob name "x" is not a repository's`, mod(func(s *ShardSnapshot) { s.Files[0].Blob = "x" })},
		{"a negative length", "length -5", mod(func(s *ShardSnapshot) { s.Files[1].Length = -5 })},
		{"a negative part size", "part_size -1", mod(func(s *ShardSnapshot) { s.Files[1].PartSize = -1 })},
		{"too many parts", "more than 1048576 parts", mod(func(s *ShardSnapshot) { s.Files[0].Length, s.Files[0].PartSize = 1<<40, 1 })},
		{"a virtual file that lies", "a virtual file of 9 bytes whose meta_hash holds 3", mod(func(s *ShardSnapshot) { s.Files[2].Length = 9 })},
		{"a name twice", "file _0.cfs named twice", mod(func(s *ShardSnapshot) { s.Files[1].Name = "_0.cfs" })},
		{"a DEFLATE bomb", "inflates to more than", bombBlob},
		{"too short", "", []byte{1, 2, 3}},
	} {
		_, err := ParseShardSnapshot(c.raw)
		if err == nil || !errors.Is(err, ErrBlob) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// appendFooter adds a valid footer to b.
func appendFooter(b []byte) []byte { return lucene.AppendFooter(b) }

func FuzzParseShardSnapshot(f *testing.F) {
	f.Add(EncodeShardSnapshot(sample(), false))
	f.Add(EncodeShardSnapshot(sample(), true))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := ParseShardSnapshot(raw)
		if err != nil {
			if !errors.Is(err, ErrBlob) {
				t.Fatalf("an error that is not ErrBlob: %v", err)
			}
			return
		}
		for _, fi := range s.Files {
			var n int64
			if fi.NParts() > MaxParts {
				t.Fatalf("%s: %d parts, more than MaxParts", fi.Name, fi.NParts())
			}
			for _, p := range fi.Parts() {
				n += p.Len
			}
			if !fi.Virtual() && n != fi.Length {
				t.Fatalf("%s: parts of %d bytes for a length of %d", fi.Name, n, fi.Length)
			}
		}
	})
}
