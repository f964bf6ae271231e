package cache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// makeParts writes n valid part files of small parts straight into a
// cache directory (as a previous run would have left them) and returns
// their keys. Part i holds partData(key, 64+i%64).
func makeParts(t testing.TB, dir string, n int) []Key {
	t.Helper()
	// The directory as a run leaves it: marked, locked by nobody.
	c, err := Open(Config{Dir: dir, MinFree: -1, Logger: quietLogger(), blockSize: testBlock})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for i := range 256 {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("%02x", i)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([]Key, n)
	var wg sync.WaitGroup
	const workers = 4
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				k := key(fmt.Sprintf("segments/data/_%d.cfs", i/8), int64(i%8))
				keys[i] = k
				data := partData(k, 64+i%64)
				hdr := encodeHeader(k, data, testBlock)
				if err := os.WriteFile(k.id().path(dir), append(hdr, data...), 0o600); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return keys
}

// TestIndexLoad100k measures how soon a cache of 100,000 parts is usable
// and how long its index takes to load. It asserts no wall-clock bound;
// it logs the times. With -short or -race it uses 10,000 parts: creating
// the files is what takes long (about 100 µs each here), and times under
// the race detector mean little.
func TestIndexLoad100k(t *testing.T) {
	n := 100_000
	if testing.Short() || raceEnabled {
		n = 10_000
	}
	cfg := testConfig(t)
	start := time.Now()
	keys := makeParts(t, cfg.Dir, n)
	t.Logf("wrote %d part files in %v", n, time.Since(start))

	start = time.Now()
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opened := time.Since(start)
	// Usable before the load ends: a read hits, a Put lands.
	if got, ok := read(t, c, keys[n-1], 0, 200); !ok || !bytes.Equal(got, partData(keys[n-1], 64+(n-1)%64)) {
		t.Fatal("read during the load missed")
	}
	firstRead := time.Since(start)
	mustPut(t, c, key("new", 0), []byte("new part"))
	waitLoaded(t, c)
	loaded := time.Since(start)

	st := c.Stats()
	t.Logf("%d parts: Open returned in %v, first read served at %v, index loaded in %v (load goroutine: %v)",
		st.LoadedParts, opened, firstRead, loaded, st.IndexLoadTime)
	if st.LoadedParts != int64(n+1) || st.Parts != int64(n+1) {
		t.Errorf("loaded %d, indexed %d; want %d", st.LoadedParts, st.Parts, n+1)
	}
	checkAccounting(t, c)
}

// TestLoadRacesWithUse reads (some parts damaged), writes and evicts
// while the index loads, and checks that each part file is counted once
// and removed files not at all.
func TestLoadRacesWithUse(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	cfg := testConfig(t)
	keys := makeParts(t, cfg.Dir, n)
	for i := 0; i < n; i += 97 { // damage about 1%
		flipByte(t, keys[i].id().path(cfg.Dir), func(size, _ int64) int64 { return size - 1 })
	}
	cfg.MaxBytes = int64(n) * 250 / 2 // about half of what is there
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 2))
			p := make([]byte, 128)
			for j := range 2000 {
				i := r.IntN(n)
				k := keys[i]
				want := partData(k, 64+i%64)
				if j%4 == 0 {
					if err := c.Put(context.Background(), k, want); err != nil {
						t.Errorf("Put: %v", err)
					}
					nk := key(fmt.Sprintf("fresh/%d", w), int64(j))
					if err := c.Put(context.Background(), nk, partData(nk, 100)); err != nil {
						t.Errorf("Put: %v", err)
					}
					continue
				}
				got, ok, err := c.ReadAt(context.Background(), k, p, 0)
				if err != nil {
					t.Errorf("ReadAt: %v", err)
				}
				if ok && !bytes.Equal(p[:got], want) {
					t.Errorf("part %d: wrong bytes", i)
				}
			}
		})
	}
	wg.Wait()
	waitLoaded(t, c)
	st := c.Stats()
	t.Logf("found %d, hits %d, misses %d, corrupt %d, puts %d, evictions %d, kept %d parts (%d bytes, bound %d), load %v",
		st.LoadedParts, st.Hits, st.Misses, st.CorruptRemoved, st.Puts, st.Evictions, st.Parts, st.Bytes, cfg.MaxBytes, st.IndexLoadTime)
	if st.Bytes > cfg.MaxBytes {
		t.Errorf("bytes %d over the bound %d after the load", st.Bytes, cfg.MaxBytes)
	}
	checkAccounting(t, c)
}

// BenchmarkIndexLoad measures Open until the index of 100,000 parts is
// loaded (files in the page cache).
func BenchmarkIndexLoad(b *testing.B) {
	cfg := testConfig(b)
	makeParts(b, cfg.Dir, 100_000)
	b.ResetTimer()
	for b.Loop() {
		c, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		<-c.IndexLoaded()
		c.Close()
	}
}
