package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSumChecker feeds a stream in uneven pieces and checks that a
// changed byte is found in its chunk and that a stream of the wrong
// length fails.
func TestSumChecker(t *testing.T) {
	data := make([]byte, 2*sumChunk+12345)
	for i := range data {
		data[i] = byte(i*31 + i>>9)
	}
	path, want := writeSummed(t, data)
	sha := sha256.Sum256(data)
	if len(want.crcs) != 3 {
		t.Fatalf("%d chunk sums, want 3", len(want.crcs))
	}
	feed := func(b []byte) error {
		c := newSumChecker(want)
		for i, step := 0, 1; i < len(b); step = step*3 + 7 {
			k := min(step, len(b)-i)
			c.add(b[i : i+k])
			i += k
		}
		return c.done()
	}
	if err := feed(data); err != nil {
		t.Fatalf("the file's own bytes: %v", err)
	}
	bad := append([]byte(nil), data...)
	bad[sumChunk+100] ^= 0x40
	if err := feed(bad); err == nil || !strings.Contains(err.Error(), "[1048576, 2097152)") {
		t.Errorf("one changed byte in the second chunk: %v", err)
	}
	bad = append([]byte(nil), data...)
	bad[len(bad)-1]++
	if err := feed(bad); err == nil || !strings.Contains(err.Error(), "[2097152, 2109497)") {
		t.Errorf("changed last byte: %v", err)
	}
	if err := feed(data[:len(data)-1]); err == nil {
		t.Error("a stream one byte short passed")
	}
	if err := feed(append(append([]byte(nil), data...), 0)); err == nil {
		t.Error("a stream one byte long passed")
	}
	if _, err := sumFile(path, int64(len(data)), strings.Repeat("0", 64)); err == nil {
		t.Error("sumFile accepted a file whose SHA-256 is not the manifest's")
	}
	if _, err := sumFile(path, int64(len(data))+1, hex.EncodeToString(sha[:])); err == nil {
		t.Error("sumFile accepted a file of the wrong size")
	}
}

// writeSummed writes data to a file of a temporary directory and returns
// its path and its chunk sums, taken by sumFile.
func writeSummed(t *testing.T, data []byte) (string, *chunkSums) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sha := sha256.Sum256(data)
	sums, err := sumFile(path, int64(len(data)), hex.EncodeToString(sha[:]))
	if err != nil {
		t.Fatal(err)
	}
	return path, sums
}
