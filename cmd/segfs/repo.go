package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
)

// repository reports whether the flags name a whole OpenSearch
// repository, or one index of it, rather than one shard: the mount's
// repository form (issue 37).
func (f layoutFlags) repository() bool {
	return f.Layout == "opensearch" && f.Shard < 0
}

// checkRepository refuses what the repository form does not take yet.
func (f layoutFlags) checkRepository() error {
	switch {
	case f.PathType != "" || f.HashAlgorithm != "":
		return fmt.Errorf("--path-type and --hash-algorithm name one shard's paths; a repository mount takes each index's from its remote-index-path file (the fixed type without one)")
	case f.Metadata != "newest" && f.Metadata != "":
		return fmt.Errorf("--metadata names one shard's metadata file; a repository mount shows each shard's newest")
	}
	return nil
}

// repoTree is the tree of a repository mount, resolved as it is used
// (segfs.Lazy): MOUNTPOINT/<index-uuid>/<shard>/ for a repository, or
// MOUNTPOINT/<shard>/ for one index (--index-uuid alone). Every shard
// reads through one store, the repository's root, so one fetch pool and
// one cache serve them all.
type repoTree struct {
	repo *layout.Repository
	log  *slog.Logger

	budget *shardBudget

	mu      sync.Mutex
	indices map[string]layout.IndexRef // by UUID, as first asked for
	shards  map[string]*followed       // the shards shown, by directory, for the refreshes
}

// followed is a shard a repository mount shows: the commit it shows,
// and the store of its metadata prefix, opened at its first refresh.
type followed struct {
	cur *layout.Shard
	md  fetcher.Store
}

// openRepository opens the repository form of --layout opensearch: the
// store of SOURCE's bucket (or directory) and the lazy tree.
func openRepository(ctx context.Context, src string, f layoutFlags, cfg fetcher.Config, maxShards int, log *slog.Logger) (*source, *repoTree, error) {
	if err := f.checkRepository(); err != nil {
		return nil, nil, err
	}
	top, base, err := repositoryRoot(ctx, src, cfg)
	if err != nil {
		return nil, nil, err
	}
	t := &repoTree{repo: &layout.Repository{Top: top, Base: base, IndexUUID: f.IndexUUID, Log: log},
		budget: newShardBudget(maxShards), log: log, indices: map[string]layout.IndexRef{}, shards: map[string]*followed{}}
	if f.IndexUUID != "" {
		if _, ok, err := t.index(ctx, f.IndexUUID); err != nil {
			return nil, nil, err
		} else if !ok {
			return nil, nil, fmt.Errorf("%w: %s: no index %s below %q (no remote-index-path file, no directory)", layout.ErrLayout, top, f.IndexUUID, base)
		}
	}
	return &source{store: top}, t, nil
}

// Depth implements segfs.Lazy: index and shard directories, or shard
// directories alone for one index.
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
func (t *repoTree) index(ctx context.Context, uuid string) (layout.IndexRef, bool, error) {
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

// Dirs implements segfs.Lazy. The root's listing keeps what it found
// of each index (its path type, or its index path file to read), so
// that opening a listed index asks the store nothing more about it; it
// shows the indices but the Hidden ones, which Has finds.
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
func (t *repoTree) knownIndex(ctx context.Context, uuid string) (layout.IndexRef, error) {
	ref, ok, err := t.index(ctx, uuid)
	if err == nil && !ok {
		err = fmt.Errorf("%w: index %s is no longer in the repository", layout.ErrLayout, uuid)
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

// resolveSlots bounds the shards a repository mount resolves at once.
// One resolution holds a shard's metadata file as read and decoded,
// which a hostile repository can make as large as the decoders allow
// (snapshot.MaxDecoded, layout.MaxMetadataDecoded): the memory bound
// counts that once a slot, not once a lookup in flight.
const resolveSlots = 2

// shardBudget counts the shards a repository mount shows against
// --max-shards, and holds the resolutions' slots.
type shardBudget struct {
	max   int64
	n     atomic.Int64
	slots chan struct{}
}

func newShardBudget(max int) *shardBudget {
	return &shardBudget{max: int64(max), slots: make(chan struct{}, resolveSlots)}
}

// resolve runs fn in one of the resolveSlots, waiting for one as long
// as ctx allows.
func (b *shardBudget) resolve(ctx context.Context, fn func() error) error {
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting to resolve a shard: %w", ctx.Err())
	}
	defer func() { <-b.slots }()
	return fn()
}

// take counts one more shard, or refuses it; give returns one taken for
// a shard that did not resolve.
func (b *shardBudget) take() error {
	if b.n.Add(1) > b.max {
		b.n.Add(-1)
		return fmt.Errorf("--max-shards %d: that many shards are shown already", b.max)
	}
	return nil
}

func (b *shardBudget) give() { b.n.Add(-1) }

// Has implements segfs.Lazy: an index the root's last listing found
// but does not show (Hidden). Every other name is listed, so one its
// listing lacks is absent (an index or shard made since shows at the
// next listing).
func (t *repoTree) Has(dir, name string) bool {
	if dir != "" || t.Depth() != 2 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.indices[name]
	return ok
}

// Files implements segfs.Lazy: one shard resolved (its newest
// metadata), at most maxShards in all.
func (t *repoTree) Files(ctx context.Context, dir string) ([]entry.Entry, error) {
	uuid, rest := t.split(dir)
	shard, err := strconv.Atoi(strings.TrimSuffix(rest, "/"))
	if err != nil {
		return nil, fmt.Errorf("%s is not a shard's directory", dir)
	}
	ref, err := t.knownIndex(ctx, uuid)
	if err != nil {
		return nil, err
	}
	if err := t.budget.take(); err != nil {
		return nil, err
	}
	var sh *layout.Shard
	var entries []entry.Entry
	err = t.budget.resolve(ctx, func() (err error) {
		sh, entries, err = t.repo.Shard(ctx, ref, shard, dir)
		return err
	})
	if err == nil {
		err = sh.Err()
	}
	if err != nil {
		t.budget.give()
		return nil, err
	}
	t.mu.Lock()
	t.shards[dir] = &followed{cur: sh}
	t.mu.Unlock()
	return entries, nil
}

// newer looks for a newer commit of every shard shown (layout.Newer: a
// listing of its metadata prefix each), parallel at once, and returns
// the entries of each shard that has one, by directory, and the files
// the shards would show in all. A shard whose newer metadata cannot be
// read, or names blobs that are not all there, keeps its view: it is
// logged, and tried again at the next refresh. commit makes the shards
// whose update the tree applied show their new commit from then on.
func (t *repoTree) newer(ctx context.Context, parallel int) (updates map[string][]entry.Entry, files int, commit func(applied map[string]bool), err error) {
	t.mu.Lock()
	dirs := slices.Sorted(maps.Keys(t.shards))
	shown := make([]*followed, len(dirs))
	for i, d := range dirs {
		shown[i] = t.shards[d]
	}
	t.mu.Unlock()
	next := make([]*layout.Shard, len(dirs))
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	// Each shard's look in a resolution slot, as a lookup's resolution
	// (a newer metadata file is read and decoded as at mount, and the
	// memory bound counts resolveSlots of them), and at most parallel
	// HEADs at once in all: the slots times each one's own.
	inner := max(1, parallel/resolveSlots)
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
				n, err := layout.Newer(ctx, f.md, f.cur, inner)
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
		return nil, 0, nil, err
	}
	updates = map[string][]entry.Entry{}
	failed := 0
	for i, d := range dirs {
		switch {
		case errs[i] != nil:
			failed++
			t.log.Warn("refresh of a shard failed; it keeps its view", "dir", d, "err", errs[i])
			files += len(shown[i].cur.Entries)
		case next[i] != nil:
			updates[d] = layout.EntriesBelow(next[i], d)
			files += len(next[i].Entries)
		default:
			files += len(shown[i].cur.Entries)
		}
	}
	if failed == len(dirs) && failed > 0 {
		return nil, 0, nil, fmt.Errorf("the refresh of every one of the %d shards shown failed (the first: %w)", failed, errs[slices.IndexFunc(errs, func(e error) bool { return e != nil })])
	}
	commit = func(applied map[string]bool) {
		for i, d := range dirs {
			if applied[d] && next[i] != nil {
				t.log.Info("newer metadata file", "dir", d, "metadata", next[i].MetadataFile, "generation", next[i].Metadata.Generation,
					"files", len(next[i].Entries), "was", shown[i].cur.MetadataFile)
				shown[i].cur = next[i]
			}
		}
	}
	return updates, files, commit, nil
}

// openRepositoryAll resolves every shard of the repository (or of the
// index --index-uuid names) for restore and verify: one source of all
// their files, each named <index-uuid>/<shard>/<file> (<shard>/<file>
// for one index), read through the repository's root. A shard that
// cannot be resolved, and each file a shard's store does not hold as
// its metadata says, is a problem: with tolerate (verify) it is
// reported, else the first one fails the command before anything is
// written.
func openRepositoryAll(ctx context.Context, src string, f layoutFlags, cfg fetcher.Config, tolerate bool, log *slog.Logger) (*source, error) {
	s, t, err := openRepository(ctx, src, f, cfg, int(^uint(0)>>1), log)
	if err != nil {
		return nil, err
	}
	uuids := []string{f.IndexUUID}
	if f.IndexUUID == "" {
		if uuids, err = t.Dirs(ctx, ""); err != nil {
			return nil, err
		}
	}
	s.sums = map[string]uint64{}
	for _, uuid := range uuids {
		ref, ok, err := t.index(ctx, uuid)
		if err == nil && ok {
			var shards []int
			if shards, err = t.repo.Shards(ctx, ref); err == nil {
				err = t.addShards(ctx, s, f, ref, shards, tolerate)
			}
		}
		switch {
		case err != nil && tolerate && ctx.Err() == nil:
			s.problems = append(s.problems, layout.Problem{File: layout.FileEntry{Name: uuid}, Detail: err.Error()})
		case err != nil:
			return nil, err
		}
	}
	s.keys = len(s.entries)
	log.Info("repository resolved", "source", s.store.String(), "indices", len(uuids), "files", len(s.entries), "problems", len(s.problems))
	return s, nil
}

// addShards resolves the shards of one index into s (openRepositoryAll):
// with tolerate, a shard that cannot be resolved is a problem of s; else
// it fails the whole.
func (t *repoTree) addShards(ctx context.Context, s *source, f layoutFlags, ref layout.IndexRef, shards []int, tolerate bool) error {
	for _, n := range shards {
		prefix := strconv.Itoa(n) + "/"
		if f.IndexUUID == "" {
			prefix = ref.UUID + "/" + prefix
		}
		name := strings.TrimSuffix(prefix, "/")
		sh, entries, err := t.repo.Shard(ctx, ref, n, prefix)
		if err == nil && !tolerate {
			err = sh.Err()
		}
		switch {
		case err != nil && !tolerate:
			return fmt.Errorf("shard %s: %w", name, err)
		case ctx.Err() != nil:
			return ctx.Err() // an interruption, not a shard's problem
		case err != nil:
			s.problems = append(s.problems, layout.Problem{File: layout.FileEntry{Name: name}, Detail: err.Error()})
			continue
		}
		for _, p := range sh.Problems {
			p.File.Name = prefix + p.File.Name
			s.problems = append(s.problems, p)
		}
		for _, fe := range sh.Metadata.Files {
			s.sums[prefix+fe.Name] = fe.Checksum
		}
		s.entries = append(s.entries, entries...)
	}
	return nil
}
