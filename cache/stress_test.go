package cache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/leakcheck"
)

// TestConcurrentStress runs readers, writers, pins and eviction at once
// over a small key space under a bound of a few parts. Every hit must
// return the exact bytes, and the index must match the disk at the end.
func TestConcurrentStress(t *testing.T) {
	const (
		workers = 8
		ops     = 400
		objects = 4
		parts   = 6
	)
	cfg := testConfig(t)
	cfg.MaxBytes = 6 * fileSize(key("stress/0", 0), testPart)
	cfg.MaxWriters = 2
	c := openTest(t, cfg)

	sizeOf := func(k Key) int { return testPart - int(k.Index)*700 } // varied sizes
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			ctx := context.Background()
			p := make([]byte, testPart)
			for range ops {
				obj := fmt.Sprintf("stress/%d", r.IntN(objects))
				k := key(obj, int64(r.IntN(parts)))
				want := partData(k, sizeOf(k))
				switch op := r.IntN(10); {
				case op < 4:
					if err := c.Put(ctx, k, want); err != nil {
						t.Errorf("Put %s: %v", k, err)
					}
				case op < 9:
					off := r.Int64N(int64(len(want)))
					n, ok, err := c.ReadAt(ctx, k, p[:r.IntN(3*testBlock)+1], off)
					if err != nil {
						t.Errorf("ReadAt: %v", err)
					}
					if ok && !bytes.Equal(p[:n], want[off:off+int64(n)]) {
						t.Errorf("ReadAt %s at %d: wrong bytes", k, off)
					}
				default:
					c.Pin(obj, k.ETag)
					c.Contains(k)
					c.Unpin(obj, k.ETag)
				}
			}
		})
	}
	wg.Wait()
	st := c.Stats()
	t.Logf("hits %d misses %d puts %d evictions %d", st.Hits, st.Misses, st.Puts, st.Evictions)
	if st.CorruptRemoved != 0 || st.ReadErrors != 0 || st.PutErrors != 0 {
		t.Errorf("stats %+v", st)
	}
	if st.Bytes > cfg.MaxBytes {
		t.Errorf("bytes %d over the bound %d", st.Bytes, cfg.MaxBytes)
	}
	checkAccounting(t, c)
}

// TestNoGoroutineLeak opens, uses and closes caches and memory tiers and
// checks that the goroutine count returns to where it was.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 3 {
		cfg := testConfig(t)
		c, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		k := key("leak", 0)
		mustPut(t, c, k, []byte("x"))
		read(t, c, k, 0, 1)
		if err := c.Close(); err != nil { // may stop the load midway
			t.Fatal(err)
		}
	}
	leakcheck.Settle(t, before, 5*time.Second)
}
