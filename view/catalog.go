package view

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/snapshot"
)

// Catalog is what a snapshot repository holds, as segfs snapshots lists
// it: each snapshot of the root index-N, the indices it holds and, for
// each of their shards, the files its snap-<uuid>.dat names.
type Catalog struct {
	Generation int64             `json:"generation"`
	Snapshots  []CatalogSnapshot `json:"snapshots"`
}

// CatalogSnapshot is one snapshot, with the indices it holds (by name).
type CatalogSnapshot struct {
	Name    string         `json:"name"`
	UUID    string         `json:"uuid"`
	State   string         `json:"state"`
	Version string         `json:"version,omitempty"`
	Indices []CatalogIndex `json:"indices"`
}

// CatalogIndex is one index of a snapshot.
type CatalogIndex struct {
	Name   string         `json:"name"`
	ID     string         `json:"id"`
	Shards []CatalogShard `json:"shards"`
}

// CatalogShard is one shard of an index in a snapshot: its files and
// their bytes, or why its snap-<uuid>.dat could not be read.
type CatalogShard struct {
	Shard   int    `json:"shard"`
	Files   int    `json:"files"`
	Virtual int    `json:"virtual_files"` // of Files, those held in the metadata (v__)
	Bytes   int64  `json:"bytes"`
	Error   string `json:"error,omitempty"`
}

// CatalogFilter narrows a catalog to one snapshot and one index ("" for
// all of each); with an index, the snapshots that do not hold it are left
// out. MaxShards bounds what one ReadCatalog reads.
type CatalogFilter struct {
	Snapshot string
	Index    string
	// MaxShards is the most shard snapshots ReadCatalog reads, each a
	// HEAD and a GET of its snap-<uuid>.dat, counting the shards it
	// probes for an index index-N gives no shard count for (the probe
	// that finds none too); 0 means DefaultCatalogShards. Past it,
	// ReadCatalog fails with ErrTooManyShards before allocating or
	// requesting anything past it: one index of 65,536 shards in 2,000
	// snapshots, an index-N of 467 KB, would be 131 million (issue 42).
	MaxShards int
}

// DefaultCatalogShards is CatalogFilter.MaxShards when it is 0: every
// shard of the largest index segfs takes (snapshot.MaxIndexShards) in
// one snapshot.
const DefaultCatalogShards = snapshot.MaxIndexShards

// ErrTooManyShards is what ReadCatalog's error wraps when the snapshots
// and indices its filter keeps hold more shard snapshots than
// CatalogFilter.MaxShards.
var ErrTooManyShards = errors.New("more shard snapshots than the catalog may read")

// MaxProbedShards bounds the shards probed for an index that index-N
// gives no shard count for (repositories written before Elasticsearch
// 7.6): shard numbers 0, 1, ... are tried until one has no snapshot.
const MaxProbedShards = 1024

// ReadCatalog reads the repository below base: index.latest, the root
// index-N, and for each shard of each index of each snapshot (those the
// filter keeps) its snap-<uuid>.dat, parallel of them at once. The shard
// counts index-N gives are summed first, nothing read when they pass
// f.MaxShards, and the indices without one probed a batch at a time,
// each batch charged to MaxShards before it is allocated or requested:
// the memory and the requests are those of the shards read, at most
// MaxShards, whatever index-N claims. A shard whose metadata cannot be
// read is listed with its error; an error reading the root, a bound
// passed (ErrTooManyShards) or ctx's error is returned, with no
// catalog.
func ReadCatalog(ctx context.Context, open Opener, base string, f CatalogFilter, parallel int) (*Catalog, error) {
	top, repo, err := openRoot(ctx, open, base)
	if err != nil {
		return nil, err
	}
	if f.Index != "" {
		if _, ok := repo.Indices[f.Index]; !ok {
			return nil, fmt.Errorf("%w: %s: no index %q in the repository (generation %d)", ErrLayout, top, f.Index, repo.Generation)
		}
	}
	limit := int64(f.MaxShards)
	if limit <= 0 {
		limit = DefaultCatalogShards
	}
	// The indices of each snapshot, by its uuid, in name order: one pass
	// over index-N's lists, not one per snapshot and index.
	held := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(repo.Indices)) {
		if f.Index != "" && name != f.Index {
			continue
		}
		for _, u := range repo.Indices[name].Snapshots {
			if l := held[u]; len(l) == 0 || l[len(l)-1] != name { // a uuid listed twice counts once
				held[u] = append(l, name)
			}
		}
	}
	found := f.Snapshot == ""
	cat := &Catalog{Generation: repo.Generation}
	type pair struct{ s, i int } // cat.Snapshots[s].Indices[i]
	var known, probe []pair
	var charged int64             // shard snapshots index-N gives counts for
	byIndex := map[string]int64{} // of them, by index
	for _, sn := range repo.Snapshots {
		if f.Snapshot != "" && sn.Name != f.Snapshot {
			continue
		}
		found = true
		cs := CatalogSnapshot{Name: sn.Name, UUID: sn.UUID, State: snapshot.State(sn.State), Version: sn.Version, Indices: []CatalogIndex{}}
		for _, name := range held[sn.UUID] {
			ix := repo.Indices[name]
			p := pair{len(cat.Snapshots), len(cs.Indices)}
			cs.Indices = append(cs.Indices, CatalogIndex{Name: name, ID: ix.ID, Shards: []CatalogShard{}})
			n := int64(len(ix.ShardGenerations))
			if n == 0 {
				probe = append(probe, p)
				continue
			}
			charged += n // at most 2^16 a pair, of fewer pairs than index-N has bytes: no overflow
			byIndex[name] += n
			known = append(known, p)
		}
		if f.Index == "" || len(cs.Indices) > 0 {
			cat.Snapshots = append(cat.Snapshots, cs)
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %s: no snapshot %q in the repository (generation %d)", ErrLayout, top, f.Snapshot, repo.Generation)
	}
	if charged > limit {
		most := slices.MaxFunc(slices.Collect(maps.Keys(byIndex)), func(a, b string) int {
			return cmp.Or(cmp.Compare(byIndex[a], byIndex[b]), strings.Compare(b, a)) // of a tie, the first name
		})
		return nil, fmt.Errorf("%w: the snapshots and indices selected hold %d (index %q %d of them), more than %d", ErrTooManyShards, charged, most, byIndex[most], limit)
	}
	r := &catalogReader{top: top, repo: repo, base: base, parallel: parallel, limit: limit, charged: charged, decodes: make(chan struct{}, catalogDecodes)}
	// Every shard of the indices index-N gives a shard count for, at most
	// limit in all (charged above), then the others probed.
	ts := make([]catalogTask, 0, charged)
	for _, p := range known {
		cs := &cat.Snapshots[p.s]
		ci := &cs.Indices[p.i]
		ci.Shards = make([]CatalogShard, len(repo.Indices[ci.Name].ShardGenerations))
		for sh := range ci.Shards {
			ts = append(ts, catalogTask{ci, cs.UUID, sh})
		}
	}
	r.read(ctx, ts)
	for _, p := range probe {
		if err := r.probe(ctx, &cat.Snapshots[p.s], &cat.Snapshots[p.s].Indices[p.i]); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return cat, nil
}

// catalogReader reads the shard snapshots of a catalog, parallel at
// once, and charges those it probes to its bound. Not safe for
// concurrent use.
type catalogReader struct {
	top            fetcher.Store
	repo           *snapshot.Repository
	base           string
	parallel       int
	limit, charged int64 // the shard snapshots it may read, and those read or to be read
	// decodes holds catalogDecodes slots: a shard snapshot is decoded
	// in one, and one of more than smallBlob bytes read in one too, so
	// that the parallel readers never hold more than a few decodes at
	// their worst (snapshot.MaxDecoded each).
	decodes chan struct{}
}

// catalogDecodes bounds the shard snapshots a catalog decodes at once;
// smallBlob is the largest snap-*.dat read outside a decode's slot (a
// real shard's is kilobytes), so that the readers' buffers stay small.
const (
	catalogDecodes = 2
	smallBlob      = 1 << 20
)

// catalogTask is one shard snapshot to read: shard sh of index ci in
// the snapshot of uuid.
type catalogTask struct {
	ci   *CatalogIndex
	uuid string
	sh   int
}

// read reads each task's shard snapshot into its row.
func (r *catalogReader) read(ctx context.Context, ts []catalogTask) {
	each(ctx, len(ts), r.parallel, func(i int) {
		t := ts[i]
		key := path.Join(layout.SnapshotShardPath(layout.PathType(r.repo.Indices[t.ci.Name].ShardPathType), r.base, t.ci.ID, t.sh), "snap-"+t.uuid+".dat")
		t.ci.Shards[t.sh] = catalogShard(ctx, r.top, key, t.sh, r.decodes)
	})
}

// probe reads the shards of ci, an index of cs that index-N gives no
// shard count for, from 0 until one has no snap-<uuid>.dat (at most
// MaxProbedShards), a batch of parallel at a time, each batch charged
// before it is allocated or requested.
func (r *catalogReader) probe(ctx context.Context, cs *CatalogSnapshot, ci *CatalogIndex) error {
	batch := int64(max(r.parallel, 1))
	for from := 0; from < MaxProbedShards; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(min(batch, int64(MaxProbedShards-from), r.limit-r.charged))
		if n == 0 {
			return fmt.Errorf("%w: %d read or probed, and index %q of snapshot %q has shards to probe from %d on", ErrTooManyShards, r.charged, ci.Name, cs.Name, from)
		}
		r.charged += int64(n)
		ci.Shards = append(ci.Shards, make([]CatalogShard, n)...)
		ts := make([]catalogTask, n)
		for i := range ts {
			ts[i] = catalogTask{ci, cs.UUID, from + i}
		}
		r.read(ctx, ts)
		if i := slices.IndexFunc(ci.Shards[from:], func(s CatalogShard) bool { return s.Error == notFound }); i >= 0 {
			ci.Shards = ci.Shards[:from+i]
			return nil
		}
		from += n
	}
	return nil
}

// each calls fn(0) ... fn(n-1) from at most parallel goroutines, and
// returns when every call has returned. Once ctx is done the calls not
// started are not made.
func each(ctx context.Context, n, parallel int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(parallel, 1), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// notFound is a catalog shard's error when its snap-<uuid>.dat does not
// exist.
const notFound = "no snapshot metadata"

// catalogShard reads one shard's snap-<uuid>.dat at key of top.
func catalogShard(ctx context.Context, top fetcher.Store, key string, sh int, decodes chan struct{}) CatalogShard {
	out := CatalogShard{Shard: sh}
	obj, err := top.Stat(ctx, key)
	if errors.Is(err, fetcher.ErrNotFound) {
		out.Error = notFound
		return out
	}
	if err != nil {
		out.Error = err.Error()
		return out
	}
	slot := func() bool {
		select {
		case decodes <- struct{}{}:
			return true
		case <-ctx.Done():
			out.Error = ctx.Err().Error()
			return false
		}
	}
	held := false
	defer func() {
		if held {
			<-decodes
		}
	}()
	if obj.Size > smallBlob {
		if held = slot(); !held {
			return out
		}
	}
	raw, err := readObject(ctx, top, obj)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	if !held {
		if held = slot(); !held {
			return out
		}
	}
	ss, err := snapshot.ParseShardSnapshot(raw)
	if err != nil {
		out.Error = fmt.Sprintf("%s: %v", key, err)
		return out
	}
	for _, f := range ss.Files {
		out.Files++
		out.Bytes += f.Length
		if f.Virtual() {
			out.Virtual++
		}
	}
	return out
}

// openRoot opens the repository's root and reads its index-N.
func openRoot(ctx context.Context, open Opener, base string) (fetcher.Store, *snapshot.Repository, error) {
	top, err := open(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	repo, err := readRoot(ctx, top, base)
	return top, repo, err
}

// readRoot reads index.latest and the root index-N of the repository
// below base in top.
func readRoot(ctx context.Context, top fetcher.Store, base string) (*snapshot.Repository, error) {
	repo, _, err := ReadSnapshotRootNewer(ctx, top, base, -1, -1) // every generation is newer
	return repo, err
}

// SnapshotShards returns the shard numbers of index ix in the snapshot
// info: 0 to n-1 when index-N gives the index's shard count, else the
// shards found holding a snap-<uuid>.dat (a HEAD each, parallel at
// once, from 0 until one has none, at most MaxProbedShards).
func SnapshotShards(ctx context.Context, top fetcher.Store, base string, info snapshot.SnapshotInfo, ix snapshot.IndexInfo, parallel int) ([]int, error) {
	if n := len(ix.ShardGenerations); n > 0 {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	batch := max(parallel, 1)
	var out []int
	for from := 0; from < MaxProbedShards; from += batch {
		n := min(batch, MaxProbedShards-from)
		found := make([]error, n)
		each(ctx, n, parallel, func(i int) {
			key := path.Join(layout.SnapshotShardPath(layout.PathType(ix.ShardPathType), base, ix.ID, from+i), "snap-"+info.UUID+".dat")
			_, found[i] = top.Stat(ctx, key)
		})
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i, err := range found {
			if errors.Is(err, fetcher.ErrNotFound) {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			out = append(out, from+i)
		}
	}
	return out, nil
}
