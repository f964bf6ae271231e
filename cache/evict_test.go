package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fileSize is the size of the part file of a part of n bytes of key k.
func fileSize(k Key, n int) int64 { return headerLen(k, int64(n), testBlock) + int64(n) }

func TestSizeBoundUnderChurn(t *testing.T) {
	const n, parts = 4000, 8
	cfg := testConfig(t)
	cfg.MaxBytes = parts * fileSize(key("churn/00", 0), n)
	c := openTest(t, cfg)

	var wg sync.WaitGroup
	var over atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := range 3 * parts {
				k := key(fmt.Sprintf("churn/%02d", w), int64(i))
				if err := c.Put(context.Background(), k, partData(k, n)); err != nil {
					t.Errorf("Put %s: %v", k, err)
				}
				if b := c.Stats().Bytes; b > cfg.MaxBytes {
					over.Store(b)
				}
			}
		})
	}
	wg.Wait()
	if b := over.Load(); b != 0 {
		t.Errorf("bytes on disk reached %d, bound %d", b, cfg.MaxBytes)
	}
	bytes, files, _ := diskUsage(t, c.Dir())
	if bytes > cfg.MaxBytes || files != parts {
		t.Errorf("disk holds %d parts, %d bytes; bound %d bytes (%d parts)", files, bytes, cfg.MaxBytes, parts)
	}
	if st := c.Stats(); st.Puts != 4*3*parts || st.Evictions != st.Puts-parts {
		t.Errorf("puts %d evictions %d", st.Puts, st.Evictions)
	}
	checkAccounting(t, c)
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBytes = 3 * fileSize(key("lru", 0), 100)
	c := openTest(t, cfg)
	for i := range 3 {
		mustPut(t, c, key("lru", int64(i)), partData(key("lru", int64(i)), 100))
	}
	read(t, c, key("lru", 0), 0, 1) // 1 is now the least recently used
	mustPut(t, c, key("lru", 3), partData(key("lru", 3), 100))
	for i, want := range []bool{true, false, true, true} {
		if got := c.Contains(key("lru", int64(i))); got != want {
			t.Errorf("part %d cached: %v, want %v", i, got, want)
		}
	}
}

func TestPinnedEvictedLast(t *testing.T) {
	const n = 100
	cfg := testConfig(t)
	cfg.MaxBytes = 4 * fileSize(key("open", 0), n)
	c := openTest(t, cfg)
	put := func(obj string, i int64) { mustPut(t, c, key(obj, i), partData(key(obj, i), n)) }

	c.Pin("open", `"etag-1"`)
	put("open", 0)
	put("open", 1)
	for i := range 20 { // churn through the two unpinned slots
		put("closed", int64(i))
	}
	if !c.Contains(key("open", 0)) || !c.Contains(key("open", 1)) {
		t.Fatal("a pinned part was evicted while unpinned parts were left")
	}
	if st := c.Stats(); st.PinnedObjects != 1 {
		t.Errorf("pinned objects %d", st.PinnedObjects)
	}

	// All pinned: the bound still holds, least recently used first.
	c.Pin("closed", `"etag-1"`)
	for i := range 20 {
		read(t, c, key("closed", int64(i)), 0, 1) // attach the unread parts to their object
	}
	for i := 2; i < 6; i++ {
		put("open", int64(i))
	}
	if st := c.Stats(); st.Bytes > cfg.MaxBytes {
		t.Fatalf("bytes %d over the bound %d with every part pinned", st.Bytes, cfg.MaxBytes)
	}

	c.Unpin("closed", `"etag-1"`)
	c.Unpin("open", `"etag-1"`)
	if st := c.Stats(); st.PinnedObjects != 0 {
		t.Errorf("pinned objects %d after Unpin", st.PinnedObjects)
	}
	defer func() {
		if recover() == nil {
			t.Error("Unpin without Pin did not panic")
		}
	}()
	c.Unpin("open", `"etag-1"`)
}

func TestPartLargerThanBound(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBytes = 1000
	c := openTest(t, cfg)
	k := key("huge", 0)
	err := c.Put(context.Background(), k, partData(k, 2000))
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put: %v, want ErrNoSpace", err)
	}
	if st := c.Stats(); st.BoundSkips != 1 || st.Parts != 0 {
		t.Errorf("stats %+v", st)
	}
	checkAccounting(t, c)
}

// fakeDisk is a file system of total bytes whose free space is what the
// cache's part files and the other users leave.
type fakeDisk struct {
	t     testing.TB
	dir   string
	total int64
	other atomic.Int64 // bytes used by others
}

func (d *fakeDisk) statfs(string) (space, error) {
	used, _, _ := diskUsage(d.t, d.dir)
	return space{avail: d.total - used - d.other.Load(), total: d.total}, nil
}

func TestFreeSpaceFloor(t *testing.T) {
	const n = 4000
	cfg := testConfig(t)
	cfg.MinFree = 0
	cfg.MinFreeFraction = 0.25
	disk := &fakeDisk{t: t, dir: cfg.Dir, total: 100_000}
	cfg.statfs = disk.statfs
	c := openTest(t, cfg)
	floor := int64(25_000)

	disk.other.Store(30_000)
	for i := range 40 {
		k := key("floor", int64(i))
		mustPut(t, c, k, partData(k, n))
		if sp, _ := disk.statfs(""); sp.avail < floor {
			t.Fatalf("after part %d: %d bytes free, floor %d", i, sp.avail, floor)
		}
	}
	if c.Stats().Evictions == 0 {
		t.Fatal("no eviction")
	}

	// Others fill the disk below the floor: the cache gives up all it has,
	// then skips caching.
	disk.other.Store(80_000)
	k := key("floor", 99)
	if err := c.Put(context.Background(), k, partData(k, n)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put below the floor: %v, want ErrNoSpace", err)
	}
	if st := c.Stats(); st.NoSpace != 1 || st.Parts != 0 {
		t.Errorf("stats %+v", st)
	}
	checkAccounting(t, c)

	// Space comes back: caching resumes.
	disk.other.Store(0)
	mustPut(t, c, k, partData(k, n))
}

// TestTrimAtLoad reopens a cache with a lower bound: the load evicts
// the least recently used parts (by atime and mtime) down to it.
func TestTrimAtLoad(t *testing.T) {
	const n = 500
	cfg := testConfig(t)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 10 {
		k := key("trim", int64(i))
		mustPut(t, c, k, partData(k, n))
		// Part 0 was used last, part 9 first.
		at := now.Add(-time.Duration(i) * time.Hour)
		if err := os.Chtimes(partPath(c, k), at, at); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()

	cfg.MaxBytes = 4 * fileSize(key("trim", 0), n)
	c = openTest(t, cfg)
	if st := c.Stats(); st.Bytes > cfg.MaxBytes || st.Parts != 4 || st.LoadedParts != 10 {
		t.Errorf("after load: %+v", st)
	}
	for i := range 10 {
		if got, want := c.Contains(key("trim", int64(i))), i < 4; got != want {
			t.Errorf("part %d kept: %v, want %v", i, got, want)
		}
	}
	checkAccounting(t, c)
}
