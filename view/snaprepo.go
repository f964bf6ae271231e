package view

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/snapshot"
)

// snapTree is the view of a whole snapshot repository:
// <snapshot>/<index>/<shard>/, each shard resolved at its first lookup
// as a snapshot shard's view resolves one. Every shard reads through
// one store, the repository's root, whose PartsStore shows the files
// stored in parts as they resolve.
type snapTree struct {
	top    fetcher.Store
	parts  PartsStore
	base   string
	budget *shardBudget
	log    *slog.Logger

	mu     sync.Mutex
	repo   *snapshot.Repository // the root as last read
	badGen int64                // a newer generation whose index-N could not be parsed; -1 for none
}

// openSnapshotRepository opens the root store and reads its index-N at
// once: a repository that is not one fails Open.
func openSnapshotRepository(ctx context.Context, spec Spec, o Options) (View, error) {
	if spec.Snapshot != "newest" && spec.Snapshot != "" {
		return nil, fmt.Errorf("--snapshot %s: a mount of the whole repository shows every snapshot; name --index and --shard too to mount one shard of it", spec.Snapshot)
	}
	top, base, err := repositoryRoot(ctx, spec.Source, o.Store)
	if err != nil {
		return nil, err
	}
	repo, err := ReadSnapshotRoot(ctx, top, base)
	if err != nil {
		return nil, err
	}
	t := &snapTree{top: top, parts: NewPartsStore(top), base: base, budget: newShardBudget(o.maxShards()), log: o.Log, repo: repo, badGen: -1}
	o.Log.Info("snapshot repository", "source", top.String(), "generation", repo.Generation, "snapshots", len(repo.Snapshots), "indices", len(repo.Indices))
	return t, nil
}

func (t *snapTree) Store() fetcher.Store { return t.parts }
func (t *snapTree) Keys() int            { return 0 }

// Follows: a snapshot never changes; one taken since shows at the
// root's next listing (Dirs reads a newer index-N).
func (t *snapTree) Follows() Follow { return Follow{} }

func (t *snapTree) Next(ctx context.Context, _ []entry.Entry) (*Update, error) {
	return nil, errors.New("a snapshot repository's view has no refresh: its root's listing finds new snapshots")
}

func (t *snapTree) All(ctx context.Context) (*Resolved, error) { return nil, ErrOneShard }

// Depth: snapshots, their indices, their shards.
func (t *snapTree) Depth() int { return 3 }

func (t *snapTree) root() *snapshot.Repository {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.repo
}

// reread reads the root again if the repository has a newer generation
// (index.latest: one small GET when it has not), and returns the root
// as it now is. A newer index-N that cannot be parsed is logged and
// never fetched again (it does not change once written): the root read
// before stays.
func (t *snapTree) reread(ctx context.Context) (*snapshot.Repository, error) {
	t.mu.Lock()
	gen, bad := t.repo.Generation, t.badGen
	t.mu.Unlock()
	repo, next, err := ReadSnapshotRootNewer(ctx, t.top, t.base, gen, bad)
	if errors.Is(err, snapshot.ErrBlob) {
		t.log.Warn("a newer index-N of the snapshot repository cannot be read; the mount keeps the one it read, and does not fetch it again", "generation", next, "was", gen, "err", err)
		t.mu.Lock()
		t.badGen = next
		t.mu.Unlock()
		return t.root(), nil
	}
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if repo != nil && repo.Generation > t.repo.Generation {
		t.log.Info("snapshot repository", "generation", repo.Generation, "was", t.repo.Generation, "snapshots", len(repo.Snapshots))
		t.repo = repo
	}
	return t.repo, nil
}

// snapshotDirs returns the successful snapshots of repo that a
// directory can name, in the order they were taken: a name that two
// snapshots share names neither (logged), since a lookup could not
// tell which it means.
func snapshotDirs(repo *snapshot.Repository, log *slog.Logger) []string {
	count := make(map[string]int, len(repo.Snapshots))
	for _, s := range repo.Snapshots {
		count[s.Name]++
	}
	var names []string
	for _, s := range repo.Snapshots {
		switch {
		case s.State != snapshot.StateSuccess:
		case count[s.Name] > 1:
			log.Warn("snapshot name given to more than one snapshot: none of them is shown", "snapshot", s.Name, "snapshots", count[s.Name], "generation", repo.Generation)
			count[s.Name] = -1 // said once
		case count[s.Name] < 0:
		default:
			names = append(names, s.Name)
		}
	}
	return names
}

// pick returns the snapshot and index a directory path names: the one
// snapshot of that very name (no name stands for another, "newest"
// included).
func pick(repo *snapshot.Repository, snap, index string) (snapshot.SnapshotInfo, snapshot.IndexInfo, error) {
	info, ok := repo.Named(snap)
	if !ok {
		return info, snapshot.IndexInfo{}, fmt.Errorf("%w: no snapshot %q of one name in the repository (generation %d)", ErrLayout, snap, repo.Generation)
	}
	ix, ok := repo.Indices[index]
	if !ok || !slices.Contains(ix.Snapshots, info.UUID) {
		return info, ix, fmt.Errorf("%w: snapshot %s does not hold index %q", ErrLayout, snap, index)
	}
	return info, ix, nil
}

// Dirs: the successful snapshots, in the order they were taken (the
// root read again when the repository has a newer generation); a
// snapshot's indices; an index's shards in it.
func (t *snapTree) Dirs(ctx context.Context, dir string) ([]string, error) {
	parts := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	if dir == "" {
		repo, err := t.reread(ctx)
		if err != nil {
			return nil, err
		}
		return snapshotDirs(repo, t.log), nil
	}
	repo := t.root()
	info, ok := repo.Named(parts[0])
	if !ok {
		return nil, fmt.Errorf("%w: no snapshot %q of one name in the repository (generation %d)", ErrLayout, parts[0], repo.Generation)
	}
	if len(parts) == 1 {
		var names []string
		for name, ix := range repo.Indices {
			if slices.Contains(ix.Snapshots, info.UUID) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names, nil
	}
	info, ix, err := pick(repo, parts[0], parts[1])
	if err != nil {
		return nil, err
	}
	shards, err := SnapshotShards(ctx, t.top, t.base, info, ix, 16)
	return shardNames(shards), err
}

// Has: every directory of a snapshot repository is listed, so a name
// its listing lacks is absent (a snapshot taken since shows at the next
// listing).
func (t *snapTree) Has(dir, name string) bool { return false }

// Files: one shard of one index of one snapshot, at most
// Options.MaxShards in all, its keys below the root.
func (t *snapTree) Files(ctx context.Context, dir string) ([]entry.Entry, error) {
	parts := strings.Split(strings.TrimSuffix(dir, "/"), "/")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%s is not a shard's directory", dir)
	}
	shard, err := shardDir(dir, parts[2])
	if err != nil {
		return nil, err
	}
	// The names are looked up before a resolution slot is waited for:
	// an absent snapshot or index fails at once.
	repo := t.root()
	info, ix, err := pick(repo, parts[0], parts[1])
	if err != nil {
		return nil, err
	}
	// Resolved in the repository narrowed to that one snapshot and index,
	// so that no name of the directory path can stand for another
	// snapshot, and a resolution waiting for its slot holds nothing of a
	// root a newer generation replaced.
	ix.Snapshots = []string{info.UUID}
	one := &snapshot.Repository{Generation: repo.Generation, Snapshots: []snapshot.SnapshotInfo{info}, Indices: map[string]snapshot.IndexInfo{parts[1]: ix}}
	open := func(ctx context.Context, sub string) (fetcher.Store, error) { return fetcher.Sub(t.top, sub) }
	var sh *SnapshotShard
	var base string
	err = t.budget.resolveShard(ctx, func() (err error) {
		if sh, err = (Snapshot{Name: info.Name, Index: parts[1], Shard: shard}).ResolveIn(ctx, open, t.base, one, t.log); err != nil {
			return err
		}
		base = sh.Path
		return sh.Err()
	})
	if err != nil {
		return nil, err
	}
	out := make([]entry.Entry, len(sh.Entries))
	for i, e := range sh.Entries {
		e.Name = dir + e.Name
		if e.Inline == nil {
			if ps, ok := sh.Joined[e.Obj.Key]; ok {
				full := make([]fetcher.Object, len(ps))
				for j, p := range ps {
					p.Key = path.Join(base, p.Key)
					full[j] = p
				}
				e.Obj = t.parts.Add(path.Join(base, e.Obj.Key), full)
			} else {
				e.Obj.Key = path.Join(base, e.Obj.Key)
			}
		}
		out[i] = e
	}
	return out, nil
}
