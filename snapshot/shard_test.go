package snapshot

import (
	"bytes"
	"compress/flate"
	"errors"
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

// Parts as BlobStoreIndexShardSnapshot.FileInfo names them: no suffix
// for one part, .partN otherwise, every part PartSize bytes but the last.
func TestParts(t *testing.T) {
	s := sample()
	if got, want := s.Files[0].Parts(), []Part{{"__aAbB0.part0", 0, 1000}, {"__aAbB0.part1", 1000, 1000}, {"__aAbB0.part2", 2000, 500}}; !reflect.DeepEqual(got, want) {
		t.Errorf("three parts: %v, want %v", got, want)
	}
	if got, want := s.Files[1].Parts(), []Part{{"__cCdD1", 0, 300}}; !reflect.DeepEqual(got, want) {
		t.Errorf("one part: %v, want %v", got, want)
	}
	if got := s.Files[2].Parts(); got != nil || !s.Files[2].Virtual() {
		t.Errorf("a virtual file: parts %v", got)
	}
	if got, want := s.Files[3].Parts(), []Part{{"__gGhH3", 0, 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("an empty file: %v, want %v", got, want)
	}
	exact := FileInfo{Blob: "__x", Length: 2000, PartSize: 1000}
	if got := exact.Parts(); len(got) != 2 || got[1].Len != 1000 {
		t.Errorf("a length of exactly two parts: %v", got)
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
			for _, p := range fi.Parts() {
				n += p.Len
			}
			if !fi.Virtual() && n != fi.Length {
				t.Fatalf("%s: parts of %d bytes for a length of %d", fi.Name, n, fi.Length)
			}
		}
	})
}
