package compress

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
)

// randomData returns n incompressible bytes derived from seed.
func randomData(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// taxiJSON returns at least n bytes (cut to n) of newline-delimited JSON
// documents shaped like the nyc_taxis benchmark corpus, derived from seed.
func taxiJSON(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	b.Grow(n + 512)
	vendors := []string{"1", "2", "VTS", "CMT", "DDS"}
	payments := []string{"Credit", "Cash", "No Charge", "Dispute", "Unknown"}
	for b.Len() < n {
		day := 1 + r.IntN(28)
		h, m, s := r.IntN(24), r.IntN(60), r.IntN(60)
		dur := 60 + r.IntN(3600)
		dist := r.ExpFloat64() * 3
		fare := 2.5 + dist*2.5 + float64(dur)/120
		tip := 0.0
		if r.IntN(2) == 0 {
			tip = fare * (0.1 + r.Float64()*0.15)
		}
		fmt.Fprintf(&b, `{"vendor_id":"%s","pickup_datetime":"2015-01-%02d %02d:%02d:%02d",`+
			`"dropoff_datetime":"2015-01-%02d %02d:%02d:%02d","passenger_count":%d,"trip_distance":%.2f,`+
			`"pickup_location":[%.6f,%.6f],"dropoff_location":[%.6f,%.6f],"rate_code_id":"%d",`+
			`"store_and_fwd_flag":"%s","payment_type":"%s","fare_amount":%.2f,"extra":%.1f,`+
			`"mta_tax":0.5,"tip_amount":%.2f,"tolls_amount":%.2f,"improvement_surcharge":0.3,`+
			`"total_amount":%.2f,"trip_type":"1","cab_color":"yellow"}`+"\n",
			vendors[r.IntN(len(vendors))], day, h, m, s, day, (h+dur/3600)%24, (m+dur/60)%60, s,
			1+r.IntN(6), dist, -74.05+r.Float64()*0.3, 40.6+r.Float64()*0.3,
			-74.05+r.Float64()*0.3, 40.6+r.Float64()*0.3, 1+r.IntN(6),
			[]string{"N", "Y"}[r.IntN(2)], payments[r.IntN(len(payments))],
			fare, float64(r.IntN(3))*0.5, tip, float64(r.IntN(10)/9)*5.54, fare+tip+0.8)
	}
	return b.Bytes()[:n]
}

// encodeBytes encodes data with Encode and checks the reported sizes.
func encodeBytes(t testing.TB, data []byte, opt EncoderOptions) []byte {
	t.Helper()
	var obj bytes.Buffer
	logical, comp, err := Encode(context.Background(), &obj, bytes.NewReader(data), opt)
	if err != nil {
		t.Fatalf("Encode(%d bytes): %v", len(data), err)
	}
	if logical != int64(len(data)) || comp != int64(obj.Len()) {
		t.Fatalf("Encode sizes = (%d, %d), want (%d, %d)", logical, comp, len(data), obj.Len())
	}
	return obj.Bytes()
}

// parseObject parses obj's seek table the way segfs does: fetch the
// TailSize tail, then the exact length if that was not enough.
func parseObject(t testing.TB, obj []byte) *SeekTable {
	t.Helper()
	size := int64(len(obj))
	tab, err := ParseSeekTable(obj[size-TailSize(size):], size)
	var nm *NeedMoreError
	if errors.As(err, &nm) {
		if nm.Need <= nm.Have || nm.Need > size {
			t.Fatalf("NeedMoreError %+v for an object of %d bytes", nm, size)
		}
		tab, err = ParseSeekTable(obj[size-nm.Need:], size)
	}
	if err != nil {
		t.Fatalf("ParseSeekTable(%d-byte object): %v", size, err)
	}
	return tab
}

// decodeObject decodes every frame of obj and returns the logical bytes.
func decodeObject(t testing.TB, d *Decoder, obj []byte, tab *SeekTable) []byte {
	t.Helper()
	var out []byte
	var buf []byte
	for i, f := range tab.Frames {
		var err error
		buf, err = d.DecodeFrame(f, obj[f.CompOff:f.CompOff+f.CompSize], buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		out = append(out, buf...)
	}
	return out
}

func newTestDecoder(t testing.TB) *Decoder {
	t.Helper()
	d, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// entry is one hand-written seek table entry.
type entry struct {
	comp, size, sum uint32
}

// appendTable appends a seek table frame for entries to dst.
func appendTable(dst []byte, entries []entry, checksums bool) []byte {
	es := entrySizeNoSum
	var desc byte
	if checksums {
		es, desc = entrySizeSum, checksumFlag
	}
	dst = binary.LittleEndian.AppendUint32(dst, skippableMagic)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(entries)*es+FooterSize))
	for _, e := range entries {
		dst = binary.LittleEndian.AppendUint32(dst, e.comp)
		dst = binary.LittleEndian.AppendUint32(dst, e.size)
		if checksums {
			dst = binary.LittleEndian.AppendUint32(dst, e.sum)
		}
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(entries)))
	dst = append(dst, desc)
	return binary.LittleEndian.AppendUint32(dst, seekableMagic)
}

// frameSpec is one frame of a hand-built object: its compressed bytes and
// what the table should claim about it.
type frameSpec struct {
	comp []byte
	size int // claimed decompressed size
	sum  uint32
}

// buildObject concatenates the frames and appends a seek table for them.
func buildObject(frames []frameSpec, checksums bool) []byte {
	var obj []byte
	var es []entry
	for _, f := range frames {
		obj = append(obj, f.comp...)
		es = append(es, entry{comp: uint32(len(f.comp)), size: uint32(f.size), sum: f.sum})
	}
	return appendTable(obj, es, checksums)
}

// specFor compresses data into one frame with EncodeAll (frame content
// size in the header) or, if streaming, with the streaming encoder (no
// content size), and describes it truthfully.
func specFor(t testing.TB, data []byte, streaming bool) frameSpec {
	t.Helper()
	var comp []byte
	if streaming {
		var b bytes.Buffer
		w, err := zstd.NewWriter(&b, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		comp = b.Bytes()
	} else {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		comp = enc.EncodeAll(data, nil)
		enc.Close()
	}
	return frameSpec{comp: comp, size: len(data), sum: uint32(xxhash.Sum64(data))}
}

// rleFrame hand-builds a zstd frame without a content size that decodes
// to n bytes of b, in RLE blocks of 128 KiB: about 4 bytes per 128 KiB.
func rleFrame(n int, b byte) []byte {
	f := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528) // zstd magic
	f = append(f, 0x00, 0x38)                              // no FCS, no checksum; window 128 KiB
	for first := true; first || n > 0; first = false {
		sz := min(n, 128<<10)
		n -= sz
		last := uint32(0)
		if n == 0 {
			last = 1
		}
		h := uint32(sz)<<3 | 1<<1 | last // block type 1: RLE
		f = append(f, byte(h), byte(h>>8), byte(h>>16), b)
	}
	return f
}
