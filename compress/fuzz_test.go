package compress

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// The seed corpora under testdata/fuzz/ run with every plain `go test`;
// `go test -run=XXX -fuzz=FuzzParseSeekTable ./compress/` explores further.

// fuzzMaxFrame keeps fuzzing fast: frames claiming more are skipped
// (DecodeFrame's allocation for them is the caller's f.Size contract).
const fuzzMaxFrame = 8 << 20

// seedObjects returns small valid objects for the seed corpora.
func seedObjects(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{
		"empty":      appendTable(nil, nil, true),
		"one-byte":   encodeBytes(t, []byte{'x'}, EncoderOptions{FrameSize: 64}),
		"json-3":     encodeBytes(t, taxiJSON(13, 700), EncoderOptions{FrameSize: 256}),
		"random-2":   encodeBytes(t, randomData(14, 100), EncoderOptions{FrameSize: 64}),
		"no-sums":    buildObject([]frameSpec{specFor(t, []byte("hello, "), true), specFor(t, []byte("world"), false)}, false),
		"rle-blocks": buildObject([]frameSpec{{comp: rleFrame(300<<10, 'z'), size: 300 << 10}}, false),
	}
	for _, name := range []string{"stbz.zst", "t2sz.zst"} {
		if b, err := os.ReadFile("testdata/" + name); err == nil {
			seeds[name] = b
		}
	}
	return seeds
}

// checkTable asserts the SeekTable invariants stated in doc.go.
func checkTable(t *testing.T, tab *SeekTable, objectSize int64) {
	t.Helper()
	var compOff, off, largest, largestComp int64
	for i, f := range tab.Frames {
		if f.CompOff != compOff || f.Off != off || f.CompSize < 1 || f.Size < 0 || f.Size > MaxFrameSize ||
			f.Size > f.CompSize*MaxRatio || f.HasChecksum != tab.Checksums {
			t.Fatalf("frame %d breaks the invariants: %+v", i, f)
		}
		compOff += f.CompSize
		off += f.Size
		largest, largestComp = max(largest, f.Size), max(largestComp, f.CompSize)
	}
	if tab.LargestSize != largest || tab.LargestCompSize != largestComp {
		t.Fatalf("table: largest frame %d (%d compressed), the frames say %d (%d)", tab.LargestSize, tab.LargestCompSize, largest, largestComp)
	}
	tableSize := skippableHeader + int64(len(tab.Frames))*int64(map[bool]int{true: 12, false: 8}[tab.Checksums]) + FooterSize
	if tab.CompressedSize != compOff || tab.Size != off || off > MaxSize || len(tab.Frames) > MaxFrames ||
		compOff+tableSize != objectSize {
		t.Fatalf("table breaks the invariants: %d frames, CompressedSize %d, Size %d, object %d",
			len(tab.Frames), tab.CompressedSize, tab.Size, objectSize)
	}
	for _, o := range []int64{0, tab.Size / 2, tab.Size - 1} {
		if i := tab.FrameAt(o); tab.Size > 0 && (i < 0 || tab.Frames[i].Off > o || o >= tab.Frames[i].Off+tab.Frames[i].Size) {
			t.Fatalf("FrameAt(%d) = %d", o, i)
		}
	}
}

func FuzzParseSeekTable(f *testing.F) {
	for _, obj := range seedObjects(f) {
		f.Add(obj, int64(len(obj)))
		f.Add(obj[len(obj)-FooterSize:], int64(len(obj)))
	}
	f.Fuzz(func(t *testing.T, tail []byte, objectSize int64) {
		// As given, and as a whole object.
		for _, size := range []int64{objectSize, int64(len(tail))} {
			tab, err := ParseSeekTable(tail, size)
			var nm *NeedMoreError
			switch {
			case err == nil:
				checkTable(t, tab, size)
			case errors.As(err, &nm):
				if nm.Need <= nm.Have || nm.Need > size || nm.Have != int64(len(tail)) || errors.Is(err, ErrCorrupt) {
					t.Fatalf("bad NeedMoreError %+v (object %d): %v", nm, size, err)
				}
			case !errors.Is(err, ErrCorrupt):
				t.Fatalf("error wraps neither sentinel: %v", err)
			}
		}
	})
}

func FuzzDecodeFrame(f *testing.F) {
	data := taxiJSON(15, 3000)
	for _, s := range []frameSpec{
		specFor(f, data, false), specFor(f, data, true), specFor(f, data[:1], false),
		{comp: rleFrame(200<<10, 1), size: 200 << 10, sum: uint32(xxhash.Sum64(bytes.Repeat([]byte{1}, 200<<10)))},
	} {
		f.Add(s.comp, uint32(s.size), s.sum, true)
		f.Add(s.comp, uint32(s.size/2), s.sum, false)
	}
	d, err := NewDecoder()
	if err != nil {
		f.Fatal(err)
	}
	defer d.Close()
	f.Fuzz(func(t *testing.T, comp []byte, size uint32, checksum uint32, hasChecksum bool) {
		if len(comp) == 0 {
			return
		}
		fr := Frame{CompSize: int64(len(comp)), Size: int64(size % (fuzzMaxFrame + 1)), Checksum: checksum, HasChecksum: hasChecksum}
		out, err := d.DecodeFrame(fr, comp, nil)
		switch {
		case err != nil && !errors.Is(err, ErrCorrupt):
			t.Fatalf("error does not wrap ErrCorrupt: %v", err)
		case err == nil && int64(len(out)) != fr.Size:
			t.Fatalf("decoded %d bytes, frame says %d", len(out), fr.Size)
		case err == nil && hasChecksum && uint32(xxhash.Sum64(out)) != checksum:
			t.Fatal("checksum not verified")
		}
	})
}

// FuzzObject parses an object and decodes every frame, as a mount would.
func FuzzObject(f *testing.F) {
	for _, obj := range seedObjects(f) {
		f.Add(obj)
	}
	d, err := NewDecoder()
	if err != nil {
		f.Fatal(err)
	}
	defer d.Close()
	f.Fuzz(func(t *testing.T, obj []byte) {
		tab, err := ParseSeekTable(obj, int64(len(obj)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		checkTable(t, tab, int64(len(obj)))
		var buf []byte
		for _, fr := range tab.Frames {
			if fr.Size > fuzzMaxFrame {
				continue
			}
			buf, err = d.DecodeFrame(fr, obj[fr.CompOff:fr.CompOff+fr.CompSize], buf)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: error does not wrap ErrCorrupt: %v", fr, err)
			}
			if err == nil && int64(len(buf)) != fr.Size {
				t.Fatalf("%v: decoded %d bytes", fr, len(buf))
			}
		}
	})
}

// TestWriteFuzzCorpus rewrites the committed seed corpus files with
// -update-testdata. The f.Add seeds above cover more; these files keep a
// few interesting inputs in the go fuzz format.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*updateTestdata {
		t.Skip("run with -update-testdata to rewrite testdata/fuzz")
	}
	seeds := seedObjects(t)
	json3 := seeds["json-3"]
	flipped := append([]byte(nil), json3...)
	flipped[20] ^= 0x10
	bigCount := append([]byte(nil), json3...)
	copy(bigCount[len(bigCount)-FooterSize:], []byte{0xff, 0xff, 0xff, 0xff})
	data := taxiJSON(15, 3000)
	s := specFor(t, data, true)
	corpus := map[string]map[string][]any{
		"FuzzParseSeekTable": {
			"json-3-whole":       {json3, int64(len(json3))},
			"t2sz-footer-only":   {seeds["t2sz.zst"][len(seeds["t2sz.zst"])-FooterSize:], int64(len(seeds["t2sz.zst"]))},
			"frame-count-max":    {bigCount, int64(len(bigCount))},
			"tail-longer-object": {json3, int64(len(json3) - 1)},
		},
		"FuzzDecodeFrame": {
			"json-streaming":  {s.comp, uint32(s.size), s.sum, true},
			"bomb-under-1k":   {rleFrame(16<<20, 0), uint32(1 << 10), uint32(0), false},
			"table-says-more": {s.comp, uint32(s.size + 1), s.sum, true},
		},
		"FuzzObject": {
			"json-3":        {json3},
			"flipped-frame": {flipped},
			"stbz":          {seeds["stbz.zst"]},
		},
	}
	for fuzzer, files := range corpus {
		dir := filepath.Join("testdata", "fuzz", fuzzer)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, args := range files {
			var b bytes.Buffer
			b.WriteString("go test fuzz v1\n")
			for _, a := range args {
				switch v := a.(type) {
				case []byte:
					fmt.Fprintf(&b, "[]byte(%q)\n", v)
				default:
					fmt.Fprintf(&b, "%T(%v)\n", v, v)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
