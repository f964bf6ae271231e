package compress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	d := newTestDecoder(t)
	const fs = 4 << 10
	sizes := []int{0, 1, fs - 1, fs, fs + 1, 10*fs + 7, 64 * fs}
	kinds := map[string]func(uint64, int) []byte{"random": randomData, "json": taxiJSON}
	for kind, gen := range kinds {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s/%d", kind, size), func(t *testing.T) {
				data := gen(uint64(size), size)
				obj := encodeBytes(t, data, EncoderOptions{FrameSize: fs, Concurrency: 3})
				tab := parseObject(t, obj)
				wantFrames := (size + fs - 1) / fs
				if len(tab.Frames) != wantFrames || tab.Size != int64(size) || !tab.Checksums {
					t.Fatalf("table: %d frames, size %d, checksums %v; want %d frames", len(tab.Frames), tab.Size, tab.Checksums, wantFrames)
				}
				for i, f := range tab.Frames {
					if f.Off != int64(i*fs) || f.Size != min(fs, int64(size-i*fs)) {
						t.Fatalf("frame %d = %+v", i, f)
					}
				}
				if got := decodeObject(t, d, obj, tab); !bytes.Equal(got, data) {
					t.Fatalf("decoded %d bytes differ from the %d encoded", len(got), len(data))
				}
				checkFramesFor(t, tab)
			})
		}
	}
}

// checkFramesFor checks FrameAt and FramesFor at the borders of every
// frame of a table whose frames are all non-empty.
func checkFramesFor(t *testing.T, tab *SeekTable) {
	t.Helper()
	for i, f := range tab.Frames {
		for _, off := range []int64{f.Off, f.Off + f.Size - 1} { // first and last byte
			if got := tab.FrameAt(off); got != i {
				t.Errorf("FrameAt(%d) = %d, want %d", off, got, i)
			}
			if first, last := tab.FramesFor(off, 1); first != i || last != i {
				t.Errorf("FramesFor(%d, 1) = %d, %d, want %d", off, first, last, i)
			}
		}
		// Last byte of this frame and first of the next.
		if i+1 < len(tab.Frames) {
			if first, last := tab.FramesFor(f.Off+f.Size-1, 2); first != i || last != i+1 {
				t.Errorf("FramesFor(%d, 2) = %d, %d, want %d, %d", f.Off+f.Size-1, first, last, i, i+1)
			}
		}
	}
	n := len(tab.Frames)
	if first, last := tab.FramesFor(0, tab.Size); n > 0 && (first != 0 || last != n-1) {
		t.Errorf("FramesFor(whole object) = %d, %d, want 0, %d", first, last, n-1)
	}
	if first, last := tab.FramesFor(tab.Size-1, 100); n > 0 && (first != n-1 || last != n-1) {
		t.Errorf("FramesFor(last byte, 100) = %d, %d, want %d", first, last, n-1)
	}
	if n >= 4 {
		f1, f3 := tab.Frames[1], tab.Frames[3]
		if first, last := tab.FramesFor(f1.Off+1, f3.Off-f1.Off); first != 1 || last != 3 {
			t.Errorf("FramesFor(spanning 1..3) = %d, %d", first, last)
		}
	}
	if first, last := tab.FramesFor(0, tab.Size); n > 0 {
		if off, cn := tab.CompRange(first, last); off != 0 || cn != tab.CompressedSize {
			t.Errorf("CompRange(all frames) = %d, %d, want 0, %d", off, cn, tab.CompressedSize)
		}
	}
	if n >= 3 {
		if off, cn := tab.CompRange(1, 2); off != tab.Frames[1].CompOff || cn != tab.Frames[1].CompSize+tab.Frames[2].CompSize {
			t.Errorf("CompRange(1, 2) = %d, %d", off, cn)
		}
	}
	if off, cn := tab.CompRange(0, -1); off != 0 || cn != 0 {
		t.Errorf("CompRange(empty) = %d, %d", off, cn)
	}
	if first, last := tab.FramesFor(tab.Size, 1); first <= last {
		t.Errorf("FramesFor(past the end) = %d, %d", first, last)
	}
}

func TestEncodeDefaults(t *testing.T) {
	data := taxiJSON(8, DefaultFrameSize+1)
	obj := encodeBytes(t, data, EncoderOptions{})
	tab := parseObject(t, obj)
	if len(tab.Frames) != 2 || tab.Frames[0].Size != DefaultFrameSize {
		t.Fatalf("default options: %d frames, first of %d bytes", len(tab.Frames), tab.Frames[0].Size)
	}
	if got := decodeObject(t, newTestDecoder(t), obj, tab); !bytes.Equal(got, data) {
		t.Fatal("round trip with defaults differs")
	}
}

func TestEncodeLevels(t *testing.T) {
	data := taxiJSON(9, 100<<10)
	for _, level := range []int{1, 3, 7, 19, 22} {
		obj := encodeBytes(t, data, EncoderOptions{FrameSize: 16 << 10, Level: level})
		tab := parseObject(t, obj)
		t.Logf("level %d: %d -> %d bytes", level, len(data), len(obj))
		if got := decodeObject(t, newTestDecoder(t), obj, tab); !bytes.Equal(got, data) {
			t.Fatalf("level %d: round trip differs", level)
		}
	}
}

func TestEncodeBadOptions(t *testing.T) {
	for _, opt := range []EncoderOptions{
		{FrameSize: -1}, {FrameSize: MaxFrameSize + 1}, {Level: -1}, {Level: 23}, {Concurrency: -1},
	} {
		if _, _, err := Encode(context.Background(), io.Discard, bytes.NewReader(nil), opt); err == nil {
			t.Errorf("Encode(%+v) succeeded", opt)
		}
	}
}

type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

type failingWriter struct{ left int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.left {
		n := f.left
		f.left = 0
		return n, errDisk
	}
	f.left -= len(p)
	return len(p), nil
}

var (
	errSource = errors.New("source failed")
	errDisk   = errors.New("disk full")
)

func TestEncodeErrors(t *testing.T) {
	data := randomData(10, 100<<10)
	opt := EncoderOptions{FrameSize: 4 << 10}

	src := &failingReader{r: bytes.NewReader(data), err: errSource}
	if _, _, err := Encode(context.Background(), io.Discard, src, opt); !errors.Is(err, errSource) {
		t.Errorf("failing source: %v", err)
	}
	if _, _, err := Encode(context.Background(), &failingWriter{left: 50 << 10}, bytes.NewReader(data), opt); !errors.Is(err, errDisk) {
		t.Errorf("failing destination: %v", err)
	}
	// Failing while writing the seek table, after all frames.
	objLen := len(encodeBytes(t, data, opt))
	if _, _, err := Encode(context.Background(), &failingWriter{left: objLen - 10}, bytes.NewReader(data), opt); !errors.Is(err, errDisk) {
		t.Errorf("failing seek table write: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Encode(ctx, io.Discard, bytes.NewReader(data), opt); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}
