package cache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

const benchPart = 8 << 20

func benchCache(b *testing.B) (*Cache, Key) {
	cfg := testConfig(b)
	cfg.blockSize = DefaultBlockSize
	c := openTest(b, cfg)
	k := Key{Source: "s3://bucket/prefix", Object: "segments/data/_0.cfs__gX7bNIIBrs0AUNsR2yEG", ETag: `"0123456789abcdef0123456789abcdef"`, PartSize: benchPart}
	mustPut(b, c, k, partData(k, benchPart))
	return c, k
}

// BenchmarkReadAt4KiB: warm random 4 KiB reads of an 8 MiB part (header
// read and checked, one 16 KiB block read and checked).
func BenchmarkReadAt4KiB(b *testing.B) { benchRandomReads(b, 4<<10, 4096) }

// BenchmarkReadAt128KiB: warm random 128 KiB reads (the FUSE request size).
func BenchmarkReadAt128KiB(b *testing.B) { benchRandomReads(b, 128<<10, 1) }

// benchRandomReads reads size bytes at random offsets, multiples of align,
// of a warm 8 MiB part.
func benchRandomReads(b *testing.B, size int, align int64) {
	c, k := benchCache(b)
	p := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		off := r.Int64N((benchPart-int64(size))/align+1) * align
		if _, ok, err := c.ReadAt(ctx, k, p, off); !ok || err != nil {
			b.Fatal("miss", err)
		}
	}
}

// BenchmarkReadAtPart: warm reads of a whole 8 MiB part.
func BenchmarkReadAtPart(b *testing.B) {
	c, k := benchCache(b)
	p := make([]byte, benchPart)
	ctx := context.Background()
	b.SetBytes(benchPart)
	for b.Loop() {
		if _, ok, err := c.ReadAt(ctx, k, p, 0); !ok || err != nil {
			b.Fatal("miss", err)
		}
	}
}

// BenchmarkPut: writes of new 8 MiB parts under a bound, so that each
// Put also evicts one.
func BenchmarkPut(b *testing.B) {
	cfg := testConfig(b)
	cfg.blockSize = DefaultBlockSize
	cfg.MaxBytes = 8 * (benchPart + 4096)
	c := openTest(b, cfg)
	k := Key{Source: "s3://b", Object: "o", ETag: "e", PartSize: benchPart}
	data := partData(k, benchPart)
	ctx := context.Background()
	b.SetBytes(benchPart)
	for b.Loop() {
		if err := c.Put(ctx, k, data); err != nil {
			b.Fatal(err)
		}
		k.Index++
	}
}

// BenchmarkPutParallel: 32 goroutines Put 1 MiB parts at once through
// MaxWriters slots. It reports the process's OS threads at the end (Go
// keeps idle threads, so this is the peak): run it alone, with
// -bench PutParallel, for a meaningful number.
func BenchmarkPutParallel(b *testing.B) {
	for _, writers := range []int{4, 32} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			cfg := testConfig(b)
			cfg.blockSize = DefaultBlockSize
			cfg.MaxWriters = writers
			cfg.MaxBytes = 64 << 20
			c := openTest(b, cfg)
			const size = 1 << 20
			data := partData(key("parallel", 0), size)
			var next atomic.Int64
			b.SetBytes(size)
			b.SetParallelism(16) // 32 goroutines on 2 CPUs
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					k := Key{Source: "s3://b", Object: "o", ETag: "e", PartSize: size, Index: next.Add(1)}
					if err := c.Put(context.Background(), k, data); err != nil {
						b.Error(err)
					}
				}
			})
			b.ReportMetric(float64(osThreads()), "threads")
		})
	}
}

func osThreads() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
