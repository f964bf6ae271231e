package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"

	seekable "github.com/SaveTheRbtz/zstd-seekable-format-go/pkg"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/hostile"
)

// jsonLines returns n bytes of compressible taxi-trip-like JSON lines.
func jsonLines(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 3))
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, `{"vendor_id":%d,"pickup":"2015-01-%02dT%02d:%02d:00","passengers":%d,"distance":%.2f,"fare":%.2f,"payment":"%s"}`+"\n",
			rng.IntN(3), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), 1+rng.IntN(6), rng.Float64()*20, rng.Float64()*80,
			[]string{"cash", "card", "no_charge"}[rng.IntN(3)])
	}
	return b.Bytes()[:n]
}

// encodeSeekable returns data in the seekable zstd format with frames of
// frameSize bytes, as segfs push writes it.
func encodeSeekable(t *testing.T, data []byte, frameSize int) []byte {
	t.Helper()
	var out bytes.Buffer
	if _, _, err := compress.Encode(context.Background(), &out, bytes.NewReader(data), compress.EncoderOptions{FrameSize: frameSize}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestCompressedObjects mounts a mix of raw and seekable zstd objects:
// each compressed one shows under its name without ".zst" at its logical
// size and reads byte-exact, sequentially and at random offsets inside
// and across frames; an object written by another seekable writer (t2sz)
// reads as the library's reader decodes it.
func TestCompressedObjects(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	logical := jsonLines(1, 6<<20+12345)
	raw := randomBytes(101, 3<<20)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t2sz, err := os.ReadFile(filepath.Join(root, "compress", "testdata", "t2sz.zst"))
	if err != nil {
		t.Fatal(err)
	}
	t2szWant := libDecode(t, t2sz)
	putObjects(t, srv, bucket, map[string][]byte{
		"seg/_0.fdt.zst":  encodeSeekable(t, logical, 64<<10),
		"seg/_0.doc":      raw,
		"other/t2sz.zst":  t2sz,
		"other/plain.zst": []byte("not a seekable zstd object"),
	})
	m := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB")

	for name, want := range map[string]int64{
		"seg/_0.fdt": int64(len(logical)), "seg/_0.doc": int64(len(raw)),
		"other/t2sz": int64(len(t2szWant)), "other/plain.zst": 26,
	} {
		fi, err := os.Stat(filepath.Join(m.Dir, name))
		if err != nil {
			t.Fatalf("stat %s: %v", name, err)
		}
		if fi.Size() != want {
			t.Errorf("%s: size %d, want %d", name, fi.Size(), want)
		}
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "seg/_0.fdt.zst")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the compressed object's own name is shown too: %v", err)
	}
	for name, want := range map[string][]byte{"seg/_0.fdt": logical, "seg/_0.doc": raw, "other/t2sz": t2szWant} {
		got, err := os.ReadFile(filepath.Join(m.Dir, name))
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if sha256.Sum256(got) != sha256.Sum256(want) {
			t.Errorf("%s: contents differ", name)
		}
	}
	// Every logical byte read was decoded once, and the decode time is
	// counted for /stats.
	if s := harness.MustStats(t, m); s["frame_decoded_bytes"] < int64(len(logical)+len(t2szWant)) || s["frame_decodes"] < int64(len(logical)/(64<<10)) || s["frame_decode_ns"] <= 0 {
		t.Errorf("frame counters after reading every file: decodes %d, bytes %d, ns %d",
			s["frame_decodes"], s["frame_decoded_bytes"], s["frame_decode_ns"])
	}

	// Random preads through a fresh mount (cold), starting and ending
	// inside frames and across frame borders.
	m2 := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB", "--prefetch", "none")
	f, err := os.OpenFile(filepath.Join(m2.Dir, "seg/_0.fdt"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < 200; i++ {
		off := rng.Int64N(int64(len(logical)))
		if i%4 == 0 {
			off = int64(rng.IntN(90)+1)*(64<<10) - 2048 // straddles a frame border
		}
		off &^= 4095 // O_DIRECT wants aligned offsets and sizes
		n := 4096 * (1 + rng.IntN(40))
		if err := comparePread(f, logical, off, n); err != nil {
			t.Fatalf("pread %d at %d: %v", n, off, err)
		}
	}
}

// TestCompressedCorruptFrame flips a byte inside one frame: reads that
// touch that frame fail with EIO, reads of the other frames are exact,
// and the bad frame never turns into bytes.
func TestCompressedCorruptFrame(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	logical := jsonLines(2, 1<<20)
	obj := encodeSeekable(t, logical, 64<<10)
	table, err := compress.ParseSeekTable(obj[len(obj)-int(compress.TailSize(int64(len(obj)))):], int64(len(obj)))
	if err != nil {
		t.Fatal(err)
	}
	bad := table.Frames[3]
	obj[bad.CompOff+bad.CompSize/2] ^= 0x40
	putObjects(t, srv, bucket, map[string][]byte{"_1.fdt.zst": obj})
	m := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB", "--prefetch", "none")
	f, err := os.OpenFile(filepath.Join(m.Dir, "_1.fdt"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for range 2 { // the second time it must not come from a cache either
		if _, err := f.ReadAt(buf, bad.Off+4096); !errors.Is(err, syscall.EIO) {
			t.Fatalf("read in the corrupt frame: %v, want EIO", err)
		}
	}
	for _, fr := range []compress.Frame{table.Frames[0], table.Frames[2], table.Frames[4], table.Frames[len(table.Frames)-1]} {
		if err := comparePread(f, logical, fr.Off, 4096); err != nil {
			t.Errorf("frame at %d: %v", fr.Off, err)
		}
	}
	if !bytes.Contains([]byte(m.Log()), []byte("frame 3")) {
		t.Errorf("the log does not name the bad frame:\n%s", m.Log())
	}
}

// TestCompressedHugeFrame: the hostile object above is listed at its
// logical size, but with the default --max-frame-size three concurrent
// one-byte reads of it fail with EIO and a log line naming the limit;
// segfs stays up, its peak resident set far below the claimed frame, and
// the other files read exactly.
func TestCompressedHugeFrame(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	logical := jsonLines(3, 1<<20)
	raw := randomBytes(102, 1<<20)
	putObjects(t, srv, bucket, map[string][]byte{
		"huge.fdt.zst": hostile.HugeFrameObject(),
		"ok.fdt.zst":   encodeSeekable(t, logical, 64<<10),
		"raw.doc":      raw,
	})
	m := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB", "--prefetch", "none")
	path := filepath.Join(m.Dir, "huge.fdt")
	if fi, err := os.Stat(path); err != nil || fi.Size() != compress.MaxFrameSize {
		t.Fatalf("stat huge.fdt: %v, want %d bytes", err, compress.MaxFrameSize)
	}
	before, err := harness.ReadProcStatus(m.Pid())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = f.ReadAt(make([]byte, 1), int64(i)*(300<<20))
		})
	}
	wg.Wait()
	after, err := harness.ReadProcStatus(m.Pid())
	if err != nil {
		t.Fatalf("segfs gone after the reads: %v", err)
	}
	t.Logf("segfs peak RSS %d MiB before the reads, %d MiB after (RSS now %d MiB)", before.VmHWM>>20, after.VmHWM>>20, after.VmRSS>>20)
	for i, err := range errs {
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("read %d of huge.fdt: %v, want EIO", i, err)
		}
	}
	if after.VmHWM > 256<<20 {
		t.Errorf("segfs peak RSS %d MiB after one-byte reads of a 32 KiB object", after.VmHWM>>20)
	}
	if n := strings.Count(m.Log(), "frame size limit"); n == 0 {
		t.Errorf("the log does not say why huge.fdt fails:\n%s", m.Log())
	} else {
		t.Logf("%d log lines for 3 refused reads", n)
	}
	for name, want := range map[string][]byte{"ok.fdt": logical, "raw.doc": raw} {
		got, err := os.ReadFile(filepath.Join(m.Dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after the refused reads: %v, or contents differ", name, err)
		}
	}
	harness.MustStats(t, m) // the daemon still answers

	// The limit is the mount's: below ok.fdt's 64 KiB frames, it refuses
	// that object too, and only it.
	m2 := mountS3(t, srv, "s3://"+bucket, "--part-size", "1MiB", "--prefetch", "none",
		"--max-frame-size", "32KiB", "--decode-memory", "1MiB", "--frame-cache", "0")
	if _, err := os.ReadFile(filepath.Join(m2.Dir, "ok.fdt")); !errors.Is(err, syscall.EIO) {
		t.Errorf("ok.fdt under --max-frame-size 32KiB: %v, want EIO", err)
	}
	if got, err := os.ReadFile(filepath.Join(m2.Dir, "raw.doc")); err != nil || !bytes.Equal(got, raw) {
		t.Errorf("raw.doc under --max-frame-size 32KiB: %v, or contents differ", err)
	}
}

// libDecode decodes a whole seekable zstd object with the format's
// reference Go reader.
func libDecode(t *testing.T, obj []byte) []byte {
	t.Helper()
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	r, err := seekable.NewReader(bytes.NewReader(obj), dec)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
