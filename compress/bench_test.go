package compress

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/klauspost/compress/s2"
)

// Benchmarks to choose the default frame size:
//
//	go test -run=XXX -bench=. -benchtime=2s ./compress/
//
// BenchmarkFrameSize reports, per data set and frame size, the compression
// ratio (logical/compressed, "ratio") and the cost of decoding one frame
// (ns/op, MB/s), which is the latency a cold random read adds.

const benchDataSize = 32 << 20

var benchData = sync.OnceValue(func() map[string][]byte {
	json := taxiJSON(100, benchDataSize)
	return map[string][]byte{
		// Newline-delimited nyc_taxis-like documents: what a raw stored
		// fields file holds.
		"json": json,
		// The same documents as Lucene's BEST_SPEED .fdt stores them, in
		// 80 KiB chunks compressed with an LZ77 without entropy coding (s2
		// stands in for Lucene's LZ4 here).
		"json-lz": lzChunks(json, 80<<10),
	}
})

func lzChunks(data []byte, chunk int) []byte {
	var out []byte
	for len(data) > 0 {
		n := min(chunk, len(data))
		out = append(out, s2.Encode(nil, data[:n])...)
		data = data[n:]
	}
	return out
}

var benchFrameSizes = []int{64 << 10, 256 << 10, 1 << 20, 4 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func BenchmarkDecodeFrame(b *testing.B) {
	d := newTestDecoder(b)
	data := benchData()["json"]
	for _, fs := range []int{256 << 10, 1 << 20} {
		b.Run(sizeName(fs), func(b *testing.B) {
			obj := encodeBytes(b, data[:8*fs], EncoderOptions{FrameSize: fs})
			tab := parseObject(b, obj)
			f := tab.Frames[3]
			comp := obj[f.CompOff : f.CompOff+f.CompSize]
			buf := make([]byte, fs)
			b.SetBytes(f.Size)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.DecodeFrame(f, comp, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFrameSize(b *testing.B) {
	d := newTestDecoder(b)
	for _, set := range []string{"json", "json-lz"} {
		data := benchData()[set]
		for _, fs := range benchFrameSizes {
			b.Run(set+"/"+sizeName(fs), func(b *testing.B) {
				obj := encodeBytes(b, data, EncoderOptions{FrameSize: fs, Level: 3})
				tab := parseObject(b, obj)
				buf := make([]byte, fs)
				b.SetBytes(int64(fs))
				i := 0
				for b.Loop() {
					f := tab.Frames[i%(len(tab.Frames)-1)] // all full frames
					i++
					var err error
					if buf, err = d.DecodeFrame(f, obj[f.CompOff:f.CompOff+f.CompSize], buf); err != nil {
						b.Fatal(err)
					}
				}
				// After the loop: b.Loop resets metrics reported before it.
				b.ReportMetric(float64(len(data))/float64(len(obj)), "ratio")
				b.ReportMetric(float64(benchDataSize)/float64(len(obj)), "ratio-vs-json")
			})
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	data := benchData()["json"]
	for _, fs := range benchFrameSizes {
		b.Run(sizeName(fs), func(b *testing.B) {
			var obj bytes.Buffer
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				obj.Reset()
				if _, _, err := Encode(context.Background(), &obj, bytes.NewReader(data), EncoderOptions{FrameSize: fs}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
