package layout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"sync"

	"github.com/segfs/segfs/fetcher"
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
// out.
type CatalogFilter struct {
	Snapshot string
	Index    string
}

// MaxProbedShards bounds the shards probed for an index that index-N
// gives no shard count for (repositories written before Elasticsearch
// 7.6): shard numbers 0, 1, ... are tried until one has no snapshot.
const MaxProbedShards = 1024

// ReadCatalog reads the repository below base: index.latest, the root
// index-N, and for each shard of each index of each snapshot (those the
// filter keeps) its snap-<uuid>.dat, parallel of them at once. A shard
// whose metadata cannot be read is listed with its error; an error
// reading the root is returned.
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
	found := f.Snapshot == ""
	cat := &Catalog{Generation: repo.Generation}
	type job struct{ s, i int }
	var jobs []job
	names := slices.Sorted(maps.Keys(repo.Indices))
	uuids := map[*CatalogIndex]string{} // each index's snapshot
	for _, sn := range repo.Snapshots {
		if f.Snapshot != "" && sn.Name != f.Snapshot {
			continue
		}
		found = true
		cs := CatalogSnapshot{Name: sn.Name, UUID: sn.UUID, State: snapshot.State(sn.State), Version: sn.Version, Indices: []CatalogIndex{}}
		for _, name := range names {
			ix := repo.Indices[name]
			if f.Index != "" && name != f.Index || !holds(ix, sn.UUID) {
				continue
			}
			cs.Indices = append(cs.Indices, CatalogIndex{Name: name, ID: ix.ID, Shards: []CatalogShard{}})
			jobs = append(jobs, job{len(cat.Snapshots), len(cs.Indices) - 1})
		}
		if f.Index == "" || len(cs.Indices) > 0 {
			cat.Snapshots = append(cat.Snapshots, cs)
		}
	}
	if !found {
		return nil, fmt.Errorf("%w: %s: no snapshot %q in the repository (generation %d)", ErrLayout, top, f.Snapshot, repo.Generation)
	}
	// Every shard of the indices index-N gives a shard count for, then
	// the others probed a batch at a time, each batch through the same
	// parallel readers.
	type task struct {
		ci *CatalogIndex
		sh int
	}
	var known []task
	var probe []*CatalogIndex
	for _, j := range jobs {
		ci := &cat.Snapshots[j.s].Indices[j.i]
		uuid := cat.Snapshots[j.s].UUID
		n := len(repo.Indices[ci.Name].ShardGenerations)
		if n == 0 {
			probe = append(probe, ci)
			uuids[ci] = uuid
			continue
		}
		uuids[ci] = uuid
		ci.Shards = make([]CatalogShard, n)
		for sh := range n {
			known = append(known, task{ci, sh})
		}
	}
	read := func(ts []task) {
		each(ctx, len(ts), parallel, func(i int) {
			t := ts[i]
			key := path.Join(SnapshotShardPath(PathType(repo.Indices[t.ci.Name].ShardPathType), base, t.ci.ID, t.sh), "snap-"+uuids[t.ci]+".dat")
			t.ci.Shards[t.sh] = catalogShard(ctx, top, key, t.sh)
		})
	}
	read(known)
	for _, ci := range probe {
		batch := max(parallel, 1)
		for from := 0; from < MaxProbedShards && ctx.Err() == nil; from += batch {
			n := min(batch, MaxProbedShards-from)
			ci.Shards = append(ci.Shards, make([]CatalogShard, n)...)
			ts := make([]task, n)
			for i := range ts {
				ts[i] = task{ci, from + i}
			}
			read(ts)
			if i := slices.IndexFunc(ci.Shards[from:], func(s CatalogShard) bool { return s.Error == notFound }); i >= 0 {
				ci.Shards = ci.Shards[:from+i]
				break
			}
		}
	}
	return cat, ctx.Err()
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
func catalogShard(ctx context.Context, top fetcher.Store, key string, sh int) CatalogShard {
	out := CatalogShard{Shard: sh}
	raw, err := readSmall(ctx, top, key)
	if errors.Is(err, fetcher.ErrNotFound) {
		out.Error = notFound
		return out
	}
	if err != nil {
		out.Error = err.Error()
		return out
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
	latest, err := readSmall(ctx, top, path.Join(base, "index.latest"))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	gen, err := snapshot.ParseLatest(latest)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	raw, err := readSmall(ctx, top, path.Join(base, snapshot.IndexN(gen)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	repo, err := snapshot.ParseIndexN(raw, gen)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	return repo, nil
}

// holds reports whether the index is in the snapshot of uuid.
func holds(ix snapshot.IndexInfo, uuid string) bool {
	for _, u := range ix.Snapshots {
		if u == uuid {
			return true
		}
	}
	return false
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
			key := path.Join(SnapshotShardPath(PathType(ix.ShardPathType), base, ix.ID, from+i), "snap-"+info.UUID+".dat")
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
