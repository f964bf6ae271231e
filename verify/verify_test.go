package verify

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/segfs/segfs/lucene"
)

// lucenefile is a Lucene file of n body bytes with a valid footer.
func luceneFile(n int) []byte {
	b := lucene.AppendHeader(nil, "Test", 1)
	for i := range n {
		b = append(b, byte(i*7))
	}
	return lucene.AppendFooter(b)
}

// Every status a file can get from a local directory: intact, a body
// byte flipped (only a deep check finds it), a bad footer, too short, an
// empty lock file; and the results come back in the files' order.
func TestCheckLocal(t *testing.T) {
	dir := t.TempDir()
	good := luceneFile(100 << 10)
	flipped := slices.Clone(good)
	flipped[1000] ^= 1
	badFooter := slices.Clone(good)
	badFooter[len(badFooter)-lucene.FooterLength] ^= 0xff // the footer's magic
	for name, b := range map[string][]byte{
		"a/good.cfs":  good,
		"flipped.doc": flipped,
		"footer.tim":  badFooter,
		"short.si":    good[:5],
		"write.lock":  nil,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := Local(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	for _, deep := range []bool{false, true} {
		var read, done atomic.Int64
		results, err := Check(context.Background(), files, Config{Deep: deep, Checkers: 2,
			Progress: func(n int) { read.Add(int64(n)) }, Done: func() { done.Add(1) }})
		if err != nil {
			t.Fatal(err)
		}
		flippedWant := OK
		if deep {
			flippedWant = Damaged
		}
		want := map[string]string{"a/good.cfs": OK, "flipped.doc": flippedWant, "footer.tim": Damaged, "short.si": Damaged, "write.lock": Skipped}
		for i, r := range results {
			if r.Name != files[i].Name {
				t.Errorf("deep %v: result %d is %s, want %s: not in the files' order", deep, i, r.Name, files[i].Name)
			}
			if r.Status != want[r.Name] {
				t.Errorf("deep %v: %s is %s (%s), want %s", deep, r.Name, r.Status, r.Problem, want[r.Name])
			}
			if r.Bad() != (r.Status == Damaged) {
				t.Errorf("%s: Bad() %v for status %s", r.Name, r.Bad(), r.Status)
			}
		}
		if done.Load() != int64(len(files)) {
			t.Errorf("deep %v: Done told %d times for %d files", deep, done.Load(), len(files))
		}
		if deep && read.Load() < 2*int64(len(good)) {
			t.Errorf("a deep check read %d bytes, fewer than the two whole files it must read", read.Load())
		}
		if !deep && read.Load() != 0 {
			t.Errorf("a footer check told %d bytes of progress", read.Load())
		}
		if deep && results[0].Computed == "" {
			t.Errorf("a deep check of an intact file computed no checksum: %+v", results[0])
		}
	}
}

// oneFile is Local of a directory holding one intact Lucene file.
func oneFile(t *testing.T) []File {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "_0.cfs"), luceneFile(10), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := Local(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// The metadata's checksum must be the footer's.
func TestCheckExpected(t *testing.T) {
	files := oneFile(t)
	footer, err := lucene.CheckFile(luceneFile(10))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sum  uint64
		want string
	}{{footer.Checksum, OK}, {footer.Checksum ^ 1, Damaged}} {
		files[0].Expected = &c.sum
		results, err := Check(context.Background(), files, Config{Checkers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if r := results[0]; r.Status != c.want || r.Expected != lucene.FormatChecksum(c.sum) {
			t.Errorf("expected %08x: %+v, want status %s", c.sum, r, c.want)
		}
	}
}

// A run that is interrupted is an error, not results.
func TestCheckInterrupted(t *testing.T) {
	files := oneFile(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Check(ctx, files, Config{Checkers: 1}); err == nil {
		t.Error("a cancelled run returned results")
	}
}

func TestLocalNotDir(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Local(p); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Local of a file: %v", err)
	}
}
