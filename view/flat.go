package view

import (
	"context"
	"fmt"
	"time"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
)

// flat is a view of one directory whose files are listed at Open:
// plain objects, one OpenSearch shard or one snapshot shard.
type flat struct {
	store    fetcher.Store
	entries  []entry.Entry
	keys     int
	problems []Problem
	sums     map[string]uint64
	follow   Follow
	// next lists the store again: the files and the keys listed now;
	// nil when the view is fixed.
	next func(ctx context.Context, prev []entry.Entry) ([]entry.Entry, int, error)
}

func (v *flat) Store() fetcher.Store { return v.store }
func (v *flat) Depth() int           { return 0 }
func (v *flat) Keys() int            { return v.keys }
func (v *flat) Follows() Follow      { return v.follow }

func (v *flat) Dirs(ctx context.Context, dir string) ([]string, error) {
	return nil, fmt.Errorf("%s: a flat view has no directories to list", dir)
}

func (v *flat) Has(dir, name string) bool { return false }

func (v *flat) Files(ctx context.Context, dir string) ([]entry.Entry, error) {
	if dir != "" {
		return nil, fmt.Errorf("%s: a flat view's files are all at its root", dir)
	}
	return v.entries, nil
}

func (v *flat) Next(ctx context.Context, shown []entry.Entry) (*Update, error) {
	if v.next == nil {
		return nil, fmt.Errorf("the view is fixed")
	}
	entries, keys, err := v.next(ctx, shown)
	if err != nil {
		return nil, err
	}
	return &Update{Entries: entries, Keys: keys}, nil
}

func (v *flat) All(ctx context.Context) (*Resolved, error) {
	return &Resolved{Store: v.store, Entries: v.entries, Keys: v.keys, Problems: v.problems, Sums: v.sums}, nil
}

// openPlain lists SOURCE: every object is a file under its key, a
// seekable zstd object at its logical size (its seek table read, at
// most Options.Parallel at once).
func openPlain(ctx context.Context, spec Spec, o Options) (View, error) {
	store, err := fetcher.Open(ctx, spec.Source, o.Store)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	objects, err := store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", store, err)
	}
	var total int64
	for _, obj := range objects {
		total += obj.Size
	}
	o.Log.Info("listed", "source", store.String(), "objects", len(objects), "bytes", total, "took", time.Since(start).Round(time.Millisecond))
	entries, err := entry.FromObjects(ctx, store, objects, o.Parallel, o.Log)
	if err != nil {
		return nil, err
	}
	return &flat{store: store, entries: entries, keys: len(objects), follow: Follow{Refresh: true}, next: plainLister(store, o)}, nil
}

// plainLister lists a plain view's store as Open did, keeping what it
// knows of the versions listed before (entry.FromObjectsAfter): an idle
// store costs one listing per refresh.
func plainLister(store fetcher.Store, o Options) func(context.Context, []entry.Entry) ([]entry.Entry, int, error) {
	return func(ctx context.Context, prev []entry.Entry) ([]entry.Entry, int, error) {
		objects, err := store.List(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("list %s: %w", store, err)
		}
		entries, err := entry.FromObjectsAfter(ctx, store, objects, prev, o.Parallel, o.Log)
		return entries, len(objects), err
	}
}

// openShard resolves one OpenSearch shard. SOURCE names the
// repository (RepositoryOpener). At its newest metadata file the view
// follows the shard's commits; at a named one it is fixed.
func openShard(ctx context.Context, spec Spec, o Options) (View, error) {
	os, err := spec.opensearch()
	if err != nil {
		return nil, err
	}
	open, root, base, err := RepositoryOpener(spec.Source, o.Store)
	if err != nil {
		return nil, err
	}
	sh, err := os.Resolve(ctx, open, base, o.Log)
	if err != nil {
		return nil, err
	}
	if err := sh.Err(); err != nil && !o.Tolerate {
		return nil, err
	}
	v := &flat{store: sh.Data, entries: sh.Entries, keys: len(sh.Entries), problems: sh.Problems, sums: map[string]uint64{}}
	for _, f := range sh.Metadata.Files {
		v.sums[f.Name] = f.Checksum
	}
	if spec.newest() {
		// The metadata prefix's requests count with the data's: one
		// source in /stats.
		mdCfg := o.Store
		mdCfg.Counters = sh.Data.Counters()
		v.follow = Follow{Refresh: true, Commits: true}
		v.next = shardLister(sh, func(ctx context.Context) (fetcher.Store, error) {
			return fetcher.Open(ctx, root+"/"+sh.MetadataPath, mdCfg)
		}, o)
	}
	return v, nil
}

// shardLister follows an OpenSearch shard at its newest metadata file:
// each call lists the metadata prefix (the store openMetadata opens,
// once) and, when a newer metadata file is there, resolves it as Open
// did, checking only the blobs it does not already show (Newer).
// A metadata file whose blobs are not all there as it says fails the
// refresh: the view never shows a partial commit. One refresh runs at a
// time (the refresher's).
func shardLister(cur *Shard, openMetadata func(context.Context) (fetcher.Store, error), o Options) func(context.Context, []entry.Entry) ([]entry.Entry, int, error) {
	var md fetcher.Store
	return func(ctx context.Context, _ []entry.Entry) ([]entry.Entry, int, error) {
		if md == nil {
			st, err := openMetadata(ctx)
			if err != nil {
				return nil, 0, fmt.Errorf("metadata of the shard at %s: %w", cur.MetadataPath, err)
			}
			md = st
		}
		next, err := Newer(ctx, md, cur, o.Parallel)
		if err != nil {
			return nil, 0, err
		}
		if next == nil {
			return cur.Entries, len(cur.Entries), nil
		}
		if err := next.Err(); err != nil {
			return nil, 0, err
		}
		o.Log.Info("newer metadata file", "metadata", next.MetadataFile, "generation", next.Metadata.Generation,
			"files", len(next.Entries), "was", cur.MetadataFile)
		cur = next
		return cur.Entries, len(cur.Entries), nil
	}
}

// openSnapshot resolves one shard of a snapshot repository. SOURCE is
// the repository's root (RepositoryOpener). A snapshot never changes:
// the view is fixed.
func openSnapshot(ctx context.Context, spec Spec, o Options) (View, error) {
	open, _, base, err := RepositoryOpener(spec.Source, o.Store)
	if err != nil {
		return nil, err
	}
	sh, err := Snapshot{Name: spec.Snapshot, Index: spec.Index, Shard: spec.Shard}.Resolve(ctx, open, base, o.Log)
	if err != nil {
		return nil, err
	}
	if err := sh.Err(); err != nil && !o.Tolerate {
		return nil, err
	}
	return &flat{store: sh.Data, entries: sh.Entries, keys: len(sh.Entries), sums: sh.Checksums, problems: sh.Problems}, nil
}
