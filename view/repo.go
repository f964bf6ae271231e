package view

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
)

// repoTree is the view of an OpenSearch remote-store repository,
// resolved as it is used: <index-uuid>/<shard>/ for a repository, or
// <shard>/ for one index (Spec.IndexUUID alone). Every shard reads
// through one store, the repository's root, so one fetch pool and one
// cache serve them all.
type repoTree struct {
	repo     *RemoteStore
	log      *slog.Logger
	parallel int
	tolerate bool

	budget *shardBudget

	mu      sync.Mutex
	indices map[string]IndexRef  // by UUID, as first asked for
	shards  map[string]*followed // the shards shown, by directory, for Next
}

// followed is a shard a repository view shows: the commit it shows,
// and the store of its metadata prefix, opened at its first refresh.
type followed struct {
	cur *Shard
	md  fetcher.Store
}

// openRepository opens the store of SOURCE's bucket (or directory) as
// a repository's root; with Spec.IndexUUID, that index must be there.
func openRepository(ctx context.Context, spec Spec, o Options) (View, error) {
	top, base, err := repositoryRoot(ctx, spec.Source, o.Store)
	if err != nil {
		return nil, err
	}
	t := &repoTree{repo: &RemoteStore{Top: top, Base: base, IndexUUID: spec.IndexUUID, Log: o.Log},
		budget: newShardBudget(o.maxShards()), log: o.Log, parallel: o.Parallel, tolerate: o.Tolerate,
		indices: map[string]IndexRef{}, shards: map[string]*followed{}}
	if spec.IndexUUID != "" {
		if _, ok, err := t.index(ctx, spec.IndexUUID); err != nil {
			return nil, err
		} else if !ok {
			return nil, fmt.Errorf("%w: %s: no index %s below %q (no remote-index-path file, no directory)", ErrLayout, top, spec.IndexUUID, base)
		}
	}
	return t, nil
}

func (t *repoTree) Store() fetcher.Store { return t.repo.Top }
func (t *repoTree) Keys() int            { return 0 }

// Follows: each shard shown follows its newest metadata file.
func (t *repoTree) Follows() Follow { return Follow{Refresh: true, Commits: true} }

// Depth: index and shard directories, or shard directories alone for
// one index.
func (t *repoTree) Depth() int {
	if t.repo.IndexUUID != "" {
		return 1
	}
	return 2
}

// split returns the index UUID and the rest of a directory path.
func (t *repoTree) split(dir string) (uuid, rest string) {
	if t.repo.IndexUUID != "" {
		return t.repo.IndexUUID, dir
	}
	uuid, rest, _ = strings.Cut(dir, "/")
	return uuid, rest
}

// index returns what the repository says of index uuid, asked once
// (a listed index's index path file read at its first use).
func (t *repoTree) index(ctx context.Context, uuid string) (IndexRef, bool, error) {
	t.mu.Lock()
	ref, ok := t.indices[uuid]
	t.mu.Unlock()
	var err error
	if ok {
		if ref, err = t.repo.Complete(ctx, ref); err != nil {
			return ref, false, err
		}
	} else if ref, ok, err = t.repo.Index(ctx, uuid); err != nil || !ok {
		return ref, ok, err
	}
	t.mu.Lock()
	t.indices[uuid] = ref
	t.mu.Unlock()
	return ref, true, nil
}

// Dirs: the root's listing keeps what it found of each index (its path
// type, or its index path file to read), so that opening a listed index
// asks the store nothing more about it; it shows the indices but the
// Hidden ones, which Has finds.
func (t *repoTree) Dirs(ctx context.Context, dir string) ([]string, error) {
	if dir == "" && t.Depth() == 2 {
		refs, err := t.repo.Indices(ctx)
		if err != nil {
			return nil, err
		}
		names := make([]string, 0, len(refs))
		t.mu.Lock()
		for _, ref := range refs {
			if !ref.Hidden {
				names = append(names, ref.UUID)
			}
			if _, ok := t.indices[ref.UUID]; !ok {
				t.indices[ref.UUID] = ref
			}
		}
		t.mu.Unlock()
		return names, nil
	}
	uuid, _ := t.split(dir)
	ref, err := t.knownIndex(ctx, uuid)
	if err != nil {
		return nil, err
	}
	shards, err := t.repo.Shards(ctx, ref)
	return shardNames(shards), err
}

// knownIndex is index for an index the tree shows: gone is an error.
func (t *repoTree) knownIndex(ctx context.Context, uuid string) (IndexRef, error) {
	ref, ok, err := t.index(ctx, uuid)
	if err == nil && !ok {
		err = fmt.Errorf("%w: index %s is no longer in the repository", ErrLayout, uuid)
	}
	return ref, err
}

// shardNames returns shard numbers as directory names.
func shardNames(shards []int) []string {
	names := make([]string, len(shards))
	for i, n := range shards {
		names[i] = strconv.Itoa(n)
	}
	return names
}

// Has: an index the root's last listing found but does not show
// (Hidden). Every other name is listed, so one its listing lacks is
// absent (an index or shard made since shows at the next listing).
func (t *repoTree) Has(dir, name string) bool {
	if dir != "" || t.Depth() != 2 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.indices[name]
	return ok
}

// shardDir parses the shard number of a shard's directory path rest
// ("3/"): a number as a listing names it, so "-0", "+3" and "03" are
// not shards.
func shardDir(dir, rest string) (int, error) {
	name := strings.TrimSuffix(rest, "/")
	n, err := strconv.Atoi(name)
	if err != nil || n < 0 || strconv.Itoa(n) != name {
		return 0, fmt.Errorf("%s is not a shard's directory", dir)
	}
	return n, nil
}

// Files: one shard resolved (its newest metadata), at most
// Options.MaxShards in all.
func (t *repoTree) Files(ctx context.Context, dir string) ([]entry.Entry, error) {
	uuid, rest := t.split(dir)
	shard, err := shardDir(dir, rest)
	if err != nil {
		return nil, err
	}
	ref, err := t.knownIndex(ctx, uuid)
	if err != nil {
		return nil, err
	}
	var sh *Shard
	var entries []entry.Entry
	err = t.budget.resolveShard(ctx, func() (err error) {
		sh, entries, err = t.repo.Shard(ctx, ref, shard, dir)
		if err == nil {
			err = sh.Err()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.shards[dir] = &followed{cur: sh}
	t.mu.Unlock()
	return entries, nil
}

// Next looks for a newer commit of every shard shown (Newer: a
// listing of its metadata prefix each), in parallel, and returns the
// files of each shard that has one, by directory. A shard whose newer
// metadata cannot be read, or names blobs that are not all there, keeps
// its view: it is logged, and tried again at the next refresh; only
// when every shard fails does Next.
func (t *repoTree) Next(ctx context.Context, _ []entry.Entry) (*Update, error) {
	t.mu.Lock()
	dirs := slices.Sorted(maps.Keys(t.shards))
	shown := make([]*followed, len(dirs))
	for i, d := range dirs {
		shown[i] = t.shards[d]
	}
	t.mu.Unlock()
	next := make([]*Shard, len(dirs))
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	// Each shard's look in a resolution slot, as a lookup's resolution
	// (a newer metadata file is read and decoded as at Open, and the
	// memory bound counts ResolveSlots of them), and at most Parallel
	// HEADs at once in all: the slots times each one's own.
	inner := max(1, t.parallel/ResolveSlots)
	for i, f := range shown {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = t.budget.resolve(ctx, func() error {
				if f.md == nil {
					md, err := fetcher.Sub(t.repo.Top, f.cur.MetadataPath)
					if err != nil {
						return err
					}
					f.md = md // only this refresh's goroutine for f touches it
				}
				n, err := Newer(ctx, f.md, f.cur, inner)
				if err == nil && n != nil {
					err = n.Err()
				}
				next[i] = n
				return err
			})
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u := &Update{Dirs: map[string][]entry.Entry{}}
	failed := 0
	for i, d := range dirs {
		switch {
		case errs[i] != nil:
			failed++
			t.log.Warn("refresh of a shard failed; it keeps its view", "dir", d, "err", errs[i])
			u.Keys += len(shown[i].cur.Entries)
		case next[i] != nil:
			u.Dirs[d] = EntriesBelow(next[i], d)
			u.Keys += len(next[i].Entries)
		default:
			u.Keys += len(shown[i].cur.Entries)
		}
	}
	if failed == len(dirs) && failed > 0 {
		return nil, fmt.Errorf("the refresh of every one of the %d shards shown failed (the first: %w)", failed, errs[slices.IndexFunc(errs, func(e error) bool { return e != nil })])
	}
	u.Commit = func(applied map[string]bool) {
		for i, d := range dirs {
			if applied[d] && next[i] != nil {
				t.log.Info("newer metadata file", "dir", d, "metadata", next[i].MetadataFile, "generation", next[i].Metadata.Generation,
					"files", len(next[i].Entries), "was", shown[i].cur.MetadataFile)
				shown[i].cur = next[i]
			}
		}
	}
	return u, nil
}

// All resolves every shard of the repository (or of the index
// Spec.IndexUUID names): its files named <index-uuid>/<shard>/<file>
// (<shard>/<file> for one index), read through the repository's root.
// A shard that cannot be resolved, and each file a shard's store does
// not hold as its metadata says, is a problem: with Options.Tolerate
// (verify) it is reported, else the first one fails All.
func (t *repoTree) All(ctx context.Context) (*Resolved, error) {
	r := &Resolved{Store: t.repo.Top, Sums: map[string]uint64{}}
	uuids := []string{t.repo.IndexUUID}
	if t.repo.IndexUUID == "" {
		var err error
		if uuids, err = t.Dirs(ctx, ""); err != nil {
			return nil, err
		}
	}
	for _, uuid := range uuids {
		ref, ok, err := t.index(ctx, uuid)
		if err == nil && ok {
			var shards []int
			if shards, err = t.repo.Shards(ctx, ref); err == nil {
				err = t.addShards(ctx, r, ref, shards)
			}
		}
		switch {
		case err != nil && t.tolerate && ctx.Err() == nil:
			r.Problems = append(r.Problems, Problem{File: layout.FileEntry{Name: uuid}, Detail: err.Error()})
		case err != nil:
			return nil, err
		}
	}
	r.Keys = len(r.Entries)
	t.log.Info("repository resolved", "source", r.Store.String(), "indices", len(uuids), "files", len(r.Entries), "problems", len(r.Problems))
	return r, nil
}

// addShards resolves the shards of one index into r (All): with
// Options.Tolerate, a shard that cannot be resolved is a problem of r;
// else it fails the whole.
func (t *repoTree) addShards(ctx context.Context, r *Resolved, ref IndexRef, shards []int) error {
	for _, n := range shards {
		prefix := strconv.Itoa(n) + "/"
		if t.repo.IndexUUID == "" {
			prefix = ref.UUID + "/" + prefix
		}
		name := strings.TrimSuffix(prefix, "/")
		sh, entries, err := t.repo.Shard(ctx, ref, n, prefix)
		if err == nil && !t.tolerate {
			err = sh.Err()
		}
		switch {
		case err != nil && !t.tolerate:
			return fmt.Errorf("shard %s: %w", name, err)
		case ctx.Err() != nil:
			return ctx.Err() // an interruption, not a shard's problem
		case err != nil:
			r.Problems = append(r.Problems, Problem{File: layout.FileEntry{Name: name}, Detail: err.Error()})
			continue
		}
		for _, p := range sh.Problems {
			p.File.Name = prefix + p.File.Name
			r.Problems = append(r.Problems, p)
		}
		for _, fe := range sh.Metadata.Files {
			r.Sums[prefix+fe.Name] = fe.Checksum
		}
		r.Entries = append(r.Entries, entries...)
	}
	return nil
}
