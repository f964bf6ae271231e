package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestMain lets the test binary be mmapReadsChild's child, as the bench
// binary is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == mmapChildArg {
		os.Exit(mmapChild())
	}
	os.Exit(m.Run())
}

func TestRandomOffsets(t *testing.T) {
	a := randomOffsets(1, 200, 10<<20, 4096)
	if !slices.Equal(a, randomOffsets(1, 200, 10<<20, 4096)) {
		t.Fatal("same seed, other offsets")
	}
	if slices.Equal(a, randomOffsets(2, 200, 10<<20, 4096)) {
		t.Fatal("other seed, same offsets")
	}
	for _, off := range a {
		if off < 0 || off+4096 > 10<<20 {
			t.Fatalf("offset %d: read would leave the file", off)
		}
	}
	for _, off := range randomOffsets(1, 10, 4096, 4096) {
		if off != 0 {
			t.Fatalf("file of one read size: offset %d", off)
		}
	}
}

// TestLocalReads runs the read helpers on a local file, the way the cases
// run them on the mount.
func TestLocalReads(t *testing.T) {
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path, sums := writeSummed(t, data)
	n, _, err := seqRead(context.Background(), path, sums)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("seqRead = %d, %v", n, err)
	}
	wrong := &chunkSums{size: sums.size, crcs: slices.Clone(sums.crcs)}
	wrong.crcs[3]++
	if _, _, err := seqRead(context.Background(), path, wrong); err == nil {
		t.Error("seqRead with a wrong checksum succeeded")
	}

	offs := randomOffsets(3, 50, int64(len(data)), 4096)
	want, err := expectedAt(path, offs, 4096)
	if err != nil {
		t.Fatal(err)
	}
	lat, during, err := randomReads(context.Background(), path, offs, 4096, want, nil)
	if err != nil || len(lat) != 50 || during != 50 {
		t.Fatalf("randomReads = %d latencies, %d during, %v", len(lat), during, err)
	}
	if lat, err := mmapReads(context.Background(), path, offs, 4096, want); err != nil || len(lat) != 50 {
		t.Fatalf("mmapReads = %d latencies, %v", len(lat), err)
	}
	if lat, err := mmapReadsChild(context.Background(), path, path, offs, 4096); err != nil || len(lat) != 50 {
		t.Fatalf("mmapReadsChild = %d latencies, %v", len(lat), err)
	}
	flipped := filepath.Join(t.TempDir(), "flipped")
	if err := os.WriteFile(flipped, bytes.Repeat([]byte{0x5a}, len(data)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := mmapReadsChild(context.Background(), path, flipped, offs, 4096); err == nil {
		t.Error("mmapReadsChild against another file's bytes succeeded")
	}
	busy := make(chan struct{})
	close(busy)
	if _, during, _ := randomReads(context.Background(), path, offs, 4096, want, busy); during != 0 {
		t.Errorf("reads after the copy ended counted as during it: %d", during)
	}
	other := filepath.Join(t.TempDir(), "g")
	if err := os.WriteFile(other, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if d, ld, err := pairedSeqRead(context.Background(), path, other, sums); err != nil || d <= 0 || ld <= 0 {
		t.Fatalf("pairedSeqRead = %v, %v, %v", d, ld, err)
	}
	if _, _, err := pairedSeqRead(context.Background(), path, other, wrong); err == nil {
		t.Error("pairedSeqRead with a wrong checksum succeeded")
	}
	a, b, err := pairedReads(context.Background(), path, other, offs, 4096, want)
	if err != nil || len(a) != 50 || len(b) != 50 {
		t.Fatalf("pairedReads = %d and %d latencies, %v", len(a), len(b), err)
	}
	want[3][0] ^= 1
	if _, _, err := randomReads(context.Background(), path, offs, 4096, want, nil); err == nil {
		t.Error("randomReads with wrong expected bytes succeeded")
	}
	if _, _, err := pairedReads(context.Background(), path, other, offs, 4096, want); err == nil {
		t.Error("pairedReads with wrong expected bytes succeeded")
	}
	if _, err := mmapReads(context.Background(), path, offs, 4096, want); err == nil {
		t.Error("mmapReads with wrong expected bytes succeeded")
	}
}

func TestSpans(t *testing.T) {
	got := spans([]object{{Key: "a", Size: 20}, {Key: "b", Size: 8}, {Key: "c", Size: 0}}, 8)
	want := []span{{"a", 0, 8}, {"a", 8, 8}, {"a", 16, 4}, {"b", 0, 8}}
	if !slices.Equal(got, want) {
		t.Errorf("spans = %v, want %v", got, want)
	}
}
