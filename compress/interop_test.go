package compress

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	seekable "github.com/SaveTheRbtz/zstd-seekable-format-go/pkg"
	"github.com/klauspost/compress/zstd"
)

var updateTestdata = flag.Bool("update-testdata", false, "rewrite testdata/stbz.zst with the SaveTheRbtz writer")

// libReader opens obj with the SaveTheRbtz library's plain reader.
func libReader(t *testing.T, obj []byte) *seekable.Reader {
	t.Helper()
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dec.Close)
	r, err := seekable.NewReader(bytes.NewReader(obj), dec)
	if err != nil {
		t.Fatalf("seekable.NewReader: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestInteropEncodeReadByLibrary: objects written by Encode read back
// through the SaveTheRbtz reader, whole and at random ranges.
func TestInteropEncodeReadByLibrary(t *testing.T) {
	for _, size := range []int{0, 1, 4096, 100_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := taxiJSON(uint64(size), size)
			obj := encodeBytes(t, data, EncoderOptions{FrameSize: 4096})
			r := libReader(t, obj)
			all, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(all, data) {
				t.Fatalf("library ReadAll: %d bytes, %v", len(all), err)
			}
			rnd := rand.New(rand.NewPCG(uint64(size), 1))
			for range 50 {
				if size == 0 {
					break
				}
				off := rnd.IntN(size)
				p := make([]byte, 1+rnd.IntN(3*4096))
				n, err := r.ReadAt(p, int64(off))
				want := data[off:min(size, off+len(p))]
				if (err != nil && err != io.EOF) || !bytes.Equal(p[:n], want) {
					t.Fatalf("library ReadAt(%d, %d) = %d, %v", off, len(p), n, err)
				}
			}
		})
	}
}

// writeWithLibrary writes data with the SaveTheRbtz writer, one frame per
// chunk, with its own encoder options.
func writeWithLibrary(t *testing.T, data []byte, chunks []int, opts ...zstd.EOption) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var obj bytes.Buffer
	w, err := seekable.NewWriter(&obj, enc)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range chunks {
		n = min(n, len(data))
		if _, err := w.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return obj.Bytes()
}

// TestInteropLibraryWriter: objects written by the SaveTheRbtz writer
// with uneven frames and various encoder settings parse and decode.
func TestInteropLibraryWriter(t *testing.T) {
	d := newTestDecoder(t)
	data := taxiJSON(11, 300_000)
	for name, opts := range map[string][]zstd.EOption{
		"default":      nil,
		"best, no crc": {zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderCRC(false)},
		"fastest, pad": {zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderPadding(4096)},
		"small window": {zstd.WithWindowSize(1 << 10), zstd.WithSingleSegment(false)},
		"no entropy":   {zstd.WithNoEntropyCompression(true)},
		"all literals": {zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithAllLitEntropyCompression(false)},
		"zero frames":  {zstd.WithZeroFrames(true)},
	} {
		t.Run(name, func(t *testing.T) {
			obj := writeWithLibrary(t, data, []int{1, 1000, 65536, 7, 100_000}, opts...)
			tab := parseObject(t, obj)
			if len(tab.Frames) != 6 || !tab.Checksums {
				t.Fatalf("%d frames, checksums %v", len(tab.Frames), tab.Checksums)
			}
			if got := decodeObject(t, d, obj, tab); !bytes.Equal(got, data) {
				t.Fatal("decoded bytes differ")
			}
		})
	}
}

// TestInteropHandBuilt: an object assembled here from frames of the
// klauspost streaming encoder (no content size in the header), a
// skippable frame with a zero-size entry, and a table without checksums.
func TestInteropHandBuilt(t *testing.T) {
	d := newTestDecoder(t)
	data := taxiJSON(12, 50_000)
	skippable := []byte{0x5A, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'}
	specs := []frameSpec{
		specFor(t, data[:20_000], true),
		{comp: skippable, size: 0},
		specFor(t, data[20_000:20_001], true),
		specFor(t, data[20_001:], true),
		{comp: rleFrame(0, 0), size: 0},
	}
	obj := buildObject(specs, false)
	tab := parseObject(t, obj)
	if tab.Checksums || len(tab.Frames) != 5 || tab.Size != 50_000 {
		t.Fatalf("table: %+v", tab)
	}
	if got := decodeObject(t, d, obj, tab); !bytes.Equal(got, data) {
		t.Fatal("decoded bytes differ")
	}
	if first, last := tab.FramesFor(19_999, 3); first != 0 || last != 3 {
		t.Errorf("FramesFor across the skippable frame = %d, %d, want 0, 3", first, last)
	}
	// The library reads it too.
	if all, err := io.ReadAll(libReader(t, obj)); err != nil || !bytes.Equal(all, data) {
		t.Errorf("library reader: %d bytes, %v", len(all), err)
	}
}

// stbzContent is the logical content of testdata/stbz.zst.
func stbzContent() []byte {
	var b bytes.Buffer
	for i := range 300 {
		fmt.Fprintf(&b, "line %05d: segfs seekable zstd interop test\n", i)
	}
	return b.Bytes()
}

// TestInteropTestdata reads committed objects written by other writers:
//   - stbz.zst: the SaveTheRbtz writer (v0.10.0) at its best level, frames
//     of uneven sizes, checksums on (regenerate with -update-testdata);
//   - t2sz.zst: t2sz, a C tool on libzstd's seekable API (level 22,
//     1 KiB frames, no checksums), from the SaveTheRbtz repository.
func TestInteropTestdata(t *testing.T) {
	if *updateTestdata {
		obj := writeWithLibrary(t, stbzContent(), []int{1000, 3000, 1, 5000}, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
		if err := os.WriteFile("testdata/stbz.zst", obj, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := newTestDecoder(t)
	for _, tc := range []struct {
		file      string
		frames    int
		checksums bool
		sha256    string
	}{
		{"stbz.zst", 5, true, fmt.Sprintf("%x", sha256.Sum256(stbzContent()))},
		{"t2sz.zst", 4, false, "8d366f9fa0121f86d89d4984d7d94f89a6b383c7133cbd88305780a829b566ec"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			obj, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			tab := parseObject(t, obj)
			if len(tab.Frames) != tc.frames || tab.Checksums != tc.checksums {
				t.Fatalf("%d frames, checksums %v", len(tab.Frames), tab.Checksums)
			}
			got := decodeObject(t, d, obj, tab)
			sum := sha256.Sum256(got)
			if hex.EncodeToString(sum[:]) != tc.sha256 {
				t.Fatalf("decoded %d bytes with SHA-256 %x, want %s", len(got), sum, tc.sha256)
			}
			if all, err := io.ReadAll(libReader(t, obj)); err != nil || !bytes.Equal(all, got) {
				t.Errorf("library reader disagrees: %d bytes, %v", len(all), err)
			}
			checkFramesFor(t, tab)
		})
	}
}
