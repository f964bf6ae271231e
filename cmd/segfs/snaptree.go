package main

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/snapshot"
)

// snapshotRepository reports whether the flags name a whole snapshot
// repository: --layout snapshot with no --index and no --shard.
func (f layoutFlags) snapshotRepository() bool {
	return f.Layout == "snapshot" && f.Index == "" && f.Shard < 0
}

// snapTree is the tree of a snapshot repository mount (segfs.Lazy):
// MOUNTPOINT/<snapshot>/<index>/<shard>/, each shard resolved at its
// first lookup as --layout snapshot resolves one. Every shard reads
// through one store, the repository's root, whose PartsStore shows the
// files stored in parts as they resolve.
type snapTree struct {
	top    fetcher.Store
	parts  layout.PartsStore
	base   string
	budget shardBudget
	log    *slog.Logger

	mu   sync.Mutex
	repo *snapshot.Repository // the root as last read
}

// openSnapshotRepository opens the repository form of --layout
// snapshot: the root store, its index-N read at once (a repository that
// is not one fails the mount).
func openSnapshotRepository(ctx context.Context, src string, f layoutFlags, cfg fetcher.Config, maxShards int, log *slog.Logger) (*source, *snapTree, error) {
	if f.Snapshot != "newest" && f.Snapshot != "" {
		return nil, nil, fmt.Errorf("--snapshot %s: a mount of the whole repository shows every snapshot; name --index and --shard too to mount one shard of it", f.Snapshot)
	}
	top, base, err := repositoryRoot(ctx, src, cfg)
	if err != nil {
		return nil, nil, err
	}
	repo, err := layout.ReadSnapshotRoot(ctx, top, base)
	if err != nil {
		return nil, nil, err
	}
	t := &snapTree{top: top, parts: layout.NewPartsStore(top), base: base, budget: shardBudget{max: int64(maxShards)}, log: log, repo: repo}
	log.Info("snapshot repository", "source", top.String(), "generation", repo.Generation, "snapshots", len(repo.Snapshots), "indices", len(repo.Indices))
	return &source{store: t.parts}, t, nil
}

// Depth implements segfs.Lazy: snapshots, their indices, their shards.
func (t *snapTree) Depth() int { return 3 }

func (t *snapTree) root() *snapshot.Repository {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.repo
}

// pick returns the snapshot and index a directory path names.
func (t *snapTree) pick(repo *snapshot.Repository, snap, index string) (snapshot.SnapshotInfo, snapshot.IndexInfo, error) {
	info, ix, err := repo.Pick(snap, index)
	if err != nil {
		return info, ix, fmt.Errorf("%w: %w", layout.ErrLayout, err)
	}
	return info, ix, nil
}

// Dirs implements segfs.Lazy: the successful snapshots, in the order
// they were taken; a snapshot's indices; an index's shards in it.
func (t *snapTree) Dirs(ctx context.Context, dir string) ([]string, error) {
	repo := t.root()
	parts := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	switch {
	case dir == "":
		var names []string
		for _, s := range repo.Snapshots {
			if s.State == snapshot.StateSuccess {
				names = append(names, s.Name)
			}
		}
		return names, nil
	case len(parts) == 1:
		var uuid string
		for _, s := range repo.Snapshots {
			if s.Name == parts[0] {
				uuid = s.UUID
			}
		}
		var names []string
		for name, ix := range repo.Indices {
			if slices.Contains(ix.Snapshots, uuid) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names, nil
	}
	info, ix, err := t.pick(repo, parts[0], parts[1])
	if err != nil {
		return nil, err
	}
	shards, err := layout.SnapshotShards(ctx, t.top, t.base, info, ix, 16)
	return shardNames(shards), err
}

// Has implements segfs.Lazy: a snapshot taken after the root was read
// (the root is read again), or a directory its listing did not show.
func (t *snapTree) Has(ctx context.Context, dir, name string) (bool, error) {
	if dir == "" {
		repo, err := layout.ReadSnapshotRoot(ctx, t.top, t.base)
		if err != nil {
			return false, err
		}
		t.mu.Lock()
		if repo.Generation > t.repo.Generation {
			t.repo = repo
		}
		repo = t.repo
		t.mu.Unlock()
		for _, s := range repo.Snapshots {
			if s.Name == name && s.State == snapshot.StateSuccess {
				return true, nil
			}
		}
		return false, nil
	}
	if strings.Count(dir, "/") == 2 {
		if n, err := strconv.Atoi(name); err != nil || n < 0 || strconv.Itoa(n) != name {
			return false, nil // not a shard's number
		}
	}
	names, err := t.Dirs(ctx, dir)
	return slices.Contains(names, name), err
}

// Files implements segfs.Lazy: one shard of one index of one snapshot,
// at most maxShards in all, its keys below the root.
func (t *snapTree) Files(ctx context.Context, dir string) ([]entry.Entry, error) {
	parts := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%s is not a shard's directory", dir)
	}
	shard, err := strconv.Atoi(parts[2])
	if err != nil {
		return nil, fmt.Errorf("%s is not a shard's directory", dir)
	}
	if err := t.budget.take(); err != nil {
		return nil, err
	}
	open := func(ctx context.Context, sub string) (fetcher.Store, error) { return fetcher.Sub(t.top, sub) }
	sh, err := layout.Snapshot{Name: parts[0], Index: parts[1], Shard: shard}.ResolveIn(ctx, open, t.base, t.root(), t.log)
	if err == nil {
		err = sh.Err()
	}
	if err != nil {
		t.budget.give()
		return nil, err
	}
	out := make([]entry.Entry, len(sh.Entries))
	for i, e := range sh.Entries {
		e.Name = dir + e.Name
		if e.Inline == nil {
			if ps, ok := sh.Joined[e.Obj.Key]; ok {
				full := make([]fetcher.Object, len(ps))
				for j, p := range ps {
					p.Key = path.Join(sh.Path, p.Key)
					full[j] = p
				}
				e.Obj = t.parts.Add(path.Join(sh.Path, e.Obj.Key), full)
			} else {
				e.Obj.Key = path.Join(sh.Path, e.Obj.Key)
			}
		}
		out[i] = e
	}
	return out, nil
}
