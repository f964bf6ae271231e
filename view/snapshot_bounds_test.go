package view_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/snapshot"
	"github.com/segfs/segfs/view"
)

// memStore is a store of objects in memory, some of them listed with a
// size and no bytes (a listing costs what a test needs, not a file
// each). It counts the requests it answers, and calls onList after a
// listing. Safe for concurrent use.
type memStore struct {
	mu     sync.Mutex
	data   map[string][]byte
	sizes  map[string]int64 // listed objects without bytes
	onList func()
	stats  atomic.Int64
	gets   atomic.Int64
}

func newMemStore() *memStore {
	return &memStore{data: map[string][]byte{}, sizes: map[string]int64{}}
}

func (m *memStore) put(key string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data[key] = b
}

func (m *memStore) obj(key string) (fetcher.Object, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.data[key]; ok {
		return fetcher.Object{Key: key, Size: int64(len(b)), ETag: "e"}, true
	}
	if n, ok := m.sizes[key]; ok {
		return fetcher.Object{Key: key, Size: n, ETag: "e"}, true
	}
	return fetcher.Object{}, false
}

// sub is the store below prefix p of m.
func (m *memStore) sub(p string) fetcher.Store { return &memSub{m, p} }

// opener opens sub-stores of m.
func (m *memStore) opener() view.Opener {
	return func(_ context.Context, sub string) (fetcher.Store, error) { return m.sub(sub), nil }
}

type memSub struct {
	m      *memStore
	prefix string
}

func (s *memSub) key(k string) string {
	if s.prefix == "" {
		return k
	}
	return s.prefix + "/" + k
}

func (s *memSub) List(ctx context.Context) ([]fetcher.Object, error) {
	s.m.mu.Lock()
	var out []fetcher.Object
	pre := s.key("")
	for k, b := range s.m.data {
		if strings.HasPrefix(k, pre) {
			out = append(out, fetcher.Object{Key: k[len(pre):], Size: int64(len(b)), ETag: "e"})
		}
	}
	for k, n := range s.m.sizes {
		if strings.HasPrefix(k, pre) {
			out = append(out, fetcher.Object{Key: k[len(pre):], Size: n, ETag: "e"})
		}
	}
	s.m.mu.Unlock()
	slices.SortFunc(out, func(a, b fetcher.Object) int { return strings.Compare(a.Key, b.Key) })
	if s.m.onList != nil {
		s.m.onList()
	}
	return out, ctx.Err()
}

func (s *memSub) Stat(ctx context.Context, key string) (fetcher.Object, error) {
	s.m.stats.Add(1)
	o, ok := s.m.obj(s.key(key))
	if !ok {
		return fetcher.Object{}, fmt.Errorf("%s: %w", key, fetcher.ErrNotFound)
	}
	o.Key = key
	return o, ctx.Err()
}

func (s *memSub) ReadRange(ctx context.Context, obj fetcher.Object, off int64, p []byte) error {
	s.m.gets.Add(1)
	s.m.mu.Lock()
	b, ok := s.m.data[s.key(obj.Key)]
	s.m.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: %w", obj.Key, fetcher.ErrNotFound)
	}
	copy(p, b[off:])
	return ctx.Err()
}

func (s *memSub) Counters() *fetcher.Counters { return &fetcher.Counters{} }
func (s *memSub) String() string              { return "mem:" + s.prefix }

// putRoot writes index.latest and index-1 of doc below base.
func putRoot(t *testing.T, m *memStore, base string, doc any) {
	t.Helper()
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	m.put(path.Join(base, "index.latest"), binary.BigEndian.AppendUint64(nil, 1))
	m.put(path.Join(base, "index-1"), raw)
}

// onePartEach is a shard snapshot of files of length bytes in parts of
// one byte: files x length parts.
func onePartEach(files int, length int64) *snapshot.ShardSnapshot {
	s := &snapshot.ShardSnapshot{Name: "s1", IndexVersion: 1}
	for i := range files {
		s.Files = append(s.Files, snapshot.FileInfo{Blob: fmt.Sprintf("__b%d", i), Name: fmt.Sprintf("_%d.fdt", i), Length: length, PartSize: 1, WrittenBy: "8.7.0"})
	}
	return s
}

// hostileShard is a repository of one snapshot of index "logs", shard 0
// holding ss; it returns the store and the shard directory.
func hostileShard(t *testing.T, ss *snapshot.ShardSnapshot) (*memStore, string) {
	t.Helper()
	m := newMemStore()
	gen := "g"
	putRoot(t, m, "", map[string]any{
		"snapshots": []snapshot.SnapshotInfo{{Name: "s1", UUID: "u1", State: snapshot.StateSuccess}},
		"indices":   map[string]snapshot.IndexInfo{"logs": {ID: "ix", Snapshots: []string{"u1"}, ShardGenerations: []*string{&gen}}},
	})
	dir := layout.SnapshotShardPath(layout.Fixed, "", "ix", 0)
	m.put(path.Join(dir, "snap-u1.dat"), snapshot.EncodeShardSnapshot(ss, true))
	return m, dir
}

// A shard snapshot whose files claim 2^20 parts in all, none of them
// stored, resolves at the cost of one part a file (issue 42: every name
// was built before the first was looked up); one of 100,000 such files
// fails, naming the bound on a shard's parts.
func TestSnapshotResolveLazyParts(t *testing.T) {
	m, _ := hostileShard(t, onePartEach(16, snapshot.MaxShardParts/16))
	start := time.Now()
	sh, err := view.Snapshot{Index: "logs"}.Resolve(context.Background(), m.opener(), "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("16 files of 65,536 parts, none stored: %v", time.Since(start))
	if len(sh.Problems) != 16 || len(sh.Entries) != 0 {
		t.Fatalf("%d problems, %d entries; want one problem a file, no entry", len(sh.Problems), len(sh.Entries))
	}
	if d := sh.Problems[3].Detail; d != "names blob __b3.part0 for part 0 of _3.fdt, which does not exist" {
		t.Errorf("problem: %s", d)
	}

	m, _ = hostileShard(t, onePartEach(100_000, 1<<20))
	_, err = view.Snapshot{Index: "logs"}.Resolve(context.Background(), m.opener(), "", quiet)
	if err == nil || !errors.Is(err, snapshot.ErrBlob) || !strings.Contains(err.Error(), "MaxShardParts") {
		t.Errorf("100,000 files of 2^20 parts: %v, want an error naming MaxShardParts", err)
	}
}

// A resolve whose context ends while it walks the parts returns the
// context's error: here the context is cancelled once the shard's
// listing (of 8,000 parts, all as the snapshot says) is made. (That a
// walk of one file's parts looks at its context: TestFindPartsContext.)
func TestSnapshotResolveHonoursContext(t *testing.T) {
	const parts = 8000
	m, dir := hostileShard(t, onePartEach(4, parts/4))
	for i := range 4 {
		for p := range parts / 4 {
			m.sizes[fmt.Sprintf("%s/__b%d.part%d", dir, i, p)] = 1
		}
	}
	sh, err := view.Snapshot{Index: "logs"}.Resolve(context.Background(), m.opener(), "", quiet)
	if err != nil || sh.Err() != nil || len(sh.Entries) != 4 {
		t.Fatalf("every part stored: %v, %v, %d entries", err, sh.Err(), len(sh.Entries))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.onList = cancel
	_, err = view.Snapshot{Index: "logs"}.Resolve(ctx, m.opener(), "", quiet)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while walking the parts: %v, want context.Canceled", err)
	}
}

// catalogRepo writes a repository of snaps snapshots each holding index
// "big", whose index-N gives it shards shard generations (none: probed)
// and whose first probed shards exist: each a snap-<uuid>.dat of one
// file.
func catalogRepo(t *testing.T, snaps, shards, stored int) *memStore {
	t.Helper()
	m := newMemStore()
	var infos []snapshot.SnapshotInfo
	var uuids []string
	for i := range snaps {
		u := fmt.Sprintf("u%d", i)
		infos = append(infos, snapshot.SnapshotInfo{Name: fmt.Sprintf("s%d", i), UUID: u, State: snapshot.StateSuccess})
		uuids = append(uuids, u)
	}
	gen := "g"
	gens := make([]*string, shards)
	for i := range gens {
		gens[i] = &gen
	}
	putRoot(t, m, "", map[string]any{"snapshots": infos, "indices": map[string]snapshot.IndexInfo{"big": {ID: "ix", Snapshots: uuids, ShardGenerations: gens}}})
	ss := &snapshot.ShardSnapshot{Name: "s", IndexVersion: 1, Files: []snapshot.FileInfo{{Blob: "__a", Name: "_0.cfs", Length: 10, PartSize: 1 << 30}}}
	raw := snapshot.EncodeShardSnapshot(ss, false)
	for _, u := range uuids {
		for sh := range stored {
			m.put(path.Join(layout.SnapshotShardPath(layout.Fixed, "", "ix", sh), "snap-"+u+".dat"), raw)
		}
	}
	return m
}

// ReadCatalog reads at most MaxShards shard snapshots: an index-N that
// claims more (2,000 snapshots of an index of 65,536 shards, 131 million)
// fails with ErrTooManyShards before a shard is requested, and costs
// memory in proportion to index-N, not to the shards it claims; probing
// a repository without shard counts is charged shard by shard, the probe
// that finds none too.
func TestReadCatalogBound(t *testing.T) {
	ctx := context.Background()
	m := catalogRepo(t, 2000, snapshot.MaxIndexShards, 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := view.ReadCatalog(ctx, m.opener(), "", view.CatalogFilter{}, 4)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, view.ErrTooManyShards) || !strings.Contains(err.Error(), `hold 131072000 (index "big" 131072000 of them), more than 65536`) {
		t.Errorf("2,000 x 65,536 shards: %v, want ErrTooManyShards naming the count and the index", err)
	}
	if n := m.stats.Load(); n != 2 {
		t.Errorf("%d stats, want 2 (index.latest and index-1): no shard's", n)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("%d MiB allocated; want at most 64 (index-N decoded, no shard)", alloc>>20)
	}

	// Within the bound: one snapshot, with the filter or with a bound
	// of exactly its shards.
	m = catalogRepo(t, 3, 40, 40)
	for _, f := range []view.CatalogFilter{{Snapshot: "s1"}, {MaxShards: 120}} {
		cat, err := view.ReadCatalog(ctx, m.opener(), "", f, 4)
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		n := 0
		for _, s := range cat.Snapshots {
			for _, sh := range s.Indices[0].Shards {
				if sh.Error != "" || sh.Files != 1 {
					t.Errorf("%+v: %s shard %d: %+v", f, s.Name, sh.Shard, sh)
				}
				n++
			}
		}
		if want := 40 * max(1, min(3, f.MaxShards/40)); n != want {
			t.Errorf("%+v: %d shards read, want %d", f, n, want)
		}
	}
	if _, err := view.ReadCatalog(ctx, m.opener(), "", view.CatalogFilter{MaxShards: 119}, 4); !errors.Is(err, view.ErrTooManyShards) {
		t.Errorf("120 shards, a bound of 119: %v, want ErrTooManyShards", err)
	}

	// Probed: 5 shards stored, so 6 probes; a bound of 5 stops at the
	// sixth, having made 5, and a bound of 6 lists the 5.
	m = catalogRepo(t, 1, 0, 5)
	for _, c := range []struct {
		max, shards int
		fail        bool
	}{{5, 0, true}, {6, 5, false}, {0, 5, false}} {
		m.stats.Store(0)
		cat, err := view.ReadCatalog(ctx, m.opener(), "", view.CatalogFilter{MaxShards: c.max}, 4)
		if c.fail != errors.Is(err, view.ErrTooManyShards) || !c.fail && err != nil {
			t.Errorf("probed, bound %d: %v", c.max, err)
			continue
		}
		if probes := m.stats.Load() - 2; c.max > 0 && probes > int64(c.max) {
			t.Errorf("probed, bound %d: %d shard stats", c.max, probes)
		}
		if !c.fail && len(cat.Snapshots[0].Indices[0].Shards) != c.shards {
			t.Errorf("probed, bound %d: %d shards, want %d", c.max, len(cat.Snapshots[0].Indices[0].Shards), c.shards)
		}
	}
}
