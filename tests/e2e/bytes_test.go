package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/segfs/segfs/tests/shard"
)

func TestByteExactS3(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "indices/idx-uuid/0")
	m := mountS3(t, srv, "s3://"+bucket+"/indices/idx-uuid/0", "--part-size", "1MiB")
	checkByteExact(t, m.Dir)
}

func TestByteExactFile(t *testing.T) {
	// The file source needs no server, only the segfs binary.
	m := mountFile(t, shared.dir, "--part-size", "1MiB")
	checkByteExact(t, m.Dir)
}

// checkByteExact reads the small shard through the mount at dir in every
// way a search engine does and compares with the local files. The cold
// reads run first, so that they are served by segfs rather than by the
// page cache.
func checkByteExact(t *testing.T, dir string) {
	t.Run("stat", func(t *testing.T) {
		for _, f := range shared.shard.Files {
			st, err := os.Stat(filepath.Join(dir, f.Name))
			if err != nil {
				t.Error(err)
				continue
			}
			if st.Size() != f.Size || !st.Mode().IsRegular() {
				t.Errorf("%s: size %d mode %v, want regular file of %d bytes", f.Name, st.Size(), st.Mode(), f.Size)
			}
		}
	})
	t.Run("preads", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		files := shared.shard.BySize()
		// The two largest, a middling one, the smallest.
		for _, f := range []shard.File{files[0], files[1], files[len(files)/2], files[len(files)-1]} {
			checkPreads(t, filepath.Join(dir, f.Name), shared.local[f.Name], preadCases(f.Size, testPartSize, rng))
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		checkConcurrentReaders(t, dir)
	})
	t.Run("sha256", func(t *testing.T) {
		for _, f := range shared.shard.Files {
			got, n, err := shard.HashFile(filepath.Join(dir, f.Name))
			if err != nil {
				t.Errorf("%s: %v", f.Name, err)
			} else if got != f.SHA256 || n != f.Size {
				t.Errorf("%s: read %d bytes with sha256 %s, want %d bytes with %s", f.Name, n, got, f.Size, f.SHA256)
			}
		}
	})
}

// preadCase is one positioned read: n bytes at off.
type preadCase struct {
	off int64
	n   int
}

// preadCases lists reads of a file of size bytes: its first and last
// bytes, reads at and past EOF, reads across the first part borders, a read
// spanning several parts, and random reads of odd sizes.
func preadCases(size, part int64, rng *rand.Rand) []preadCase {
	cases := []preadCase{
		{0, 1}, {0, 4096}, {0, 100}, {size - 16, 16}, {size - 1, 1}, {size - 1, 100},
		{size, 1}, {size, 4096}, {size + 1, 10}, {size + 1<<20, 4096},
	}
	for k := int64(1); k*part < size && k <= 6; k++ {
		b := k * part
		cases = append(cases, preadCase{b - 5, 11}, preadCase{b - 1, 2}, preadCase{b, 1}, preadCase{b - 4097, 3*4096 + 3})
	}
	if size > 3*part {
		cases = append(cases, preadCase{part / 2, int(2*part + 17)})
	}
	for range 40 {
		cases = append(cases, preadCase{rng.Int64N(size), 1 + rng.IntN(200_000)})
	}
	return cases
}

// checkPreads runs the reads on path, each through its own ReadAt, and
// compares them with want, the file's true content.
func checkPreads(t *testing.T, path string, want []byte, cases []preadCase) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range cases {
		if err := comparePread(f, want, c.off, c.n); err != nil {
			t.Errorf("%s: %v", filepath.Base(path), err)
		}
	}
}

// comparePread reads n bytes at off from f and compares them with want,
// the file's true content: a read that reaches EOF must return exactly
// the bytes before it, with io.EOF.
func comparePread(f *os.File, want []byte, off int64, n int) error {
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	wantN := int(max(0, min(int64(n), int64(len(want))-off)))
	if got != wantN {
		return fmt.Errorf("pread(off=%d, n=%d) returned %d bytes (err %v), want %d", off, n, got, err, wantN)
	}
	if err != nil && !(errors.Is(err, io.EOF) && wantN < n) {
		return fmt.Errorf("pread(off=%d, n=%d): %w", off, n, err)
	}
	if wantN > 0 && !bytes.Equal(buf[:got], want[off:off+int64(got)]) {
		return fmt.Errorf("pread(off=%d, n=%d) returned other bytes (first difference at +%d)", off, n, firstDiff(buf[:got], want[off:]))
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkConcurrentReaders runs 32 readers at once: 16 on the largest file
// (8 sharing one descriptor, 8 with their own) and 16 spread over other
// files, each doing random preads of up to 256 KiB.
func checkConcurrentReaders(t *testing.T, dir string) {
	files := shared.shard.BySize()
	largest := files[0]
	sharedFD, err := os.Open(filepath.Join(dir, largest.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer sharedFD.Close()

	var wg sync.WaitGroup
	for i := range 32 {
		name := largest.Name
		if i >= 16 {
			name = files[1+(i-16)%(len(files)-1)].Name
		}
		wg.Go(func() {
			f := sharedFD
			if i >= 8 {
				own, err := os.Open(filepath.Join(dir, name))
				if err != nil {
					t.Errorf("reader %d: %v", i, err)
					return
				}
				defer own.Close()
				f = own
			}
			want := shared.local[name]
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			for range 25 {
				off := rng.Int64N(int64(len(want)))
				if err := comparePread(f, want, off, 1+rng.IntN(256<<10)); err != nil {
					t.Errorf("reader %d on %s: %v", i, name, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
