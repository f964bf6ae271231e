package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/reader"
)

// refreshPrefetchWait bounds how long a new commit of an index waits
// for its open's ranges before it shows.
const refreshPrefetchWait = 2 * time.Second

// refresher keeps a mount's view following its store: at every
// --refresh interval, and at once on SIGHUP, it lists the store again and
// changes the tree in one step (fs.Root.Refresh). One refresh runs at a
// time. A failed listing changes nothing: it is counted, logged (at warn
// once, then at debug while the failures go on) and tried again at the
// next interval or SIGHUP; the view stays the last good one.
type refresher struct {
	list func(ctx context.Context, prev []entry.Entry) (entries []entry.Entry, keys int, err error)
	// shards, instead of list, follows a repository mount's shards: the
	// entries of those with a newer commit, by directory (repoTree.newer).
	shards   func(ctx context.Context) (updates map[string][]entry.Entry, files int, commit func(applied map[string]bool), err error)
	root     *segfs.Root
	rd       *reader.Reader
	eng      *engine
	interval time.Duration // 0: on SIGHUP only
	keep     time.Duration // how long a name a newer listing dropped stays (--keep-removed)
	index    bool          // the mount is one index's directory: prefetch a new commit's open at once
	log      *slog.Logger

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	failing bool // the last refresh failed; only the run goroutine uses it
}

// plainLister lists a plain layout's store as the mount did, keeping
// what it knows of the versions listed before (entry.FromObjectsAfter):
// an idle store costs one listing per refresh.
func plainLister(store fetcher.Store, parallel int, log *slog.Logger) func(context.Context, []entry.Entry) ([]entry.Entry, int, error) {
	return func(ctx context.Context, prev []entry.Entry) ([]entry.Entry, int, error) {
		objects, err := store.List(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("list %s: %w", store, err)
		}
		entries, err := entry.FromObjectsAfter(ctx, store, objects, prev, parallel, log)
		return entries, len(objects), err
	}
}

// shardLister follows an OpenSearch shard mounted at its newest
// metadata file: each call lists the metadata prefix (the store
// openMetadata opens, once) and, when a newer metadata file is there,
// resolves it as the mount did, checking only the blobs it does not
// already show (layout.Newer). A metadata file whose blobs are not all
// there as it says fails the refresh: the view never shows a partial
// commit.
func shardLister(cur *layout.Shard, openMetadata func(context.Context) (fetcher.Store, error), parallel int, log *slog.Logger) func(context.Context, []entry.Entry) ([]entry.Entry, int, error) {
	var md fetcher.Store
	return func(ctx context.Context, _ []entry.Entry) ([]entry.Entry, int, error) {
		if md == nil {
			st, err := openMetadata(ctx)
			if err != nil {
				return nil, 0, fmt.Errorf("metadata of the shard at %s: %w", cur.MetadataPath, err)
			}
			md = st
		}
		next, err := layout.Newer(ctx, md, cur, parallel)
		if err != nil {
			return nil, 0, err
		}
		if next == nil {
			return cur.Entries, len(cur.Entries), nil
		}
		if err := next.Err(); err != nil {
			return nil, 0, err
		}
		log.Info("newer metadata file", "metadata", next.MetadataFile, "generation", next.Metadata.Generation,
			"files", len(next.Entries), "was", cur.MetadataFile)
		cur = next
		return cur.Entries, len(cur.Entries), nil
	}
}

// startRefresher starts r's goroutine; Close stops it.
func startRefresher(r *refresher) *refresher {
	ctx, cancel := context.WithCancel(context.Background())
	r.kick, r.cancel, r.done = make(chan struct{}, 1), cancel, make(chan struct{})
	go r.run(ctx)
	return r
}

// now asks for a refresh at once (SIGHUP). A refresh already asked for
// and not yet begun takes this one in.
func (r *refresher) now() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Close stops the refreshes and waits for one in progress to end: its
// listing is cancelled, and a tree change already begun is finished.
// Later calls do nothing.
func (r *refresher) Close() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

func (r *refresher) run(ctx context.Context) {
	defer close(r.done)
	var tick <-chan time.Time
	if r.interval > 0 {
		t := time.NewTicker(r.interval)
		defer t.Stop()
		tick = t.C
	}
	// expire fires when the first name kept for --keep-removed is due.
	expire := time.NewTimer(time.Hour)
	expire.Stop()
	defer expire.Stop()
	arm := func(next time.Time) {
		expire.Stop()
		if !next.IsZero() {
			expire.Reset(time.Until(next))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-r.kick:
		case <-expire.C:
			c, next := r.root.Expire(time.Now())
			arm(next)
			if !c.Empty() {
				r.log.Info("kept files removed", "removed", len(c.Removed), "kept", r.root.Stats().FilesKept.Load())
			}
			continue
		}
		if next, ok := r.refresh(ctx); ok {
			arm(next)
		}
	}
}

// refresh lists the store and applies what changed. It returns when the
// first kept name is due, and false if the listing failed (the tree,
// and what it keeps, stay).
func (r *refresher) refresh(ctx context.Context) (time.Time, bool) {
	if r.shards != nil {
		return r.refreshShards(ctx)
	}
	start := time.Now()
	entries, keys, err := r.list(ctx, r.root.Entries())
	if err != nil {
		if ctx.Err() == nil { // else closing
			r.failed(err)
		}
		return time.Time{}, false
	}
	if r.failing {
		r.log.Info("refresh works again")
		r.failing = false
	}
	r.eng.relisted(keys)
	if r.index && !segfs.Diff(r.root.Listed(), segfs.Shown(entries, slog.New(slog.DiscardHandler))).Empty() {
		// A new commit: what opening it reads first, so that an engine
		// that finds its segments_N opens it from memory; bounded, so
		// that a slow store does not hold the view back for long.
		pctx, cancel := context.WithTimeout(ctx, refreshPrefetchWait)
		err := r.rd.PrefetchOpen(pctx, entries)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.log.Info("a new commit shows before all of its open's ranges are fetched", "waited", refreshPrefetchWait)
		}
	}
	c, next := r.root.RefreshKeeping(entries, r.keep, time.Now())
	took := time.Since(start).Round(time.Millisecond)
	if c.Empty() {
		r.log.Debug("refreshed: nothing changed", "files", len(entries), "took", took)
		return next, true
	}
	// The prefetch policies see the new versions as the mount's files
	// (--prefetch all fetches them).
	r.rd.Serve(append(c.Added[:len(c.Added):len(c.Added)], c.Changed...))
	if r.index && len(c.Added)+len(c.Changed) > 0 {
		r.root.Seen() // a new commit of the index: its open's ranges now
	}
	r.log.Info("refreshed", "added", len(c.Added), "changed", len(c.Changed), "removed", len(c.Removed),
		"kept", r.root.Stats().FilesKept.Load(), "files", len(r.root.Entries()), "hidden", c.Hidden, "took", took)
	return next, true
}

// failed counts and logs a refresh that changed nothing.
func (r *refresher) failed(err error) {
	r.root.Stats().RefreshFailures.Add(1)
	if r.failing {
		r.log.Debug("refresh failed again; the mount keeps its view", "err", err)
	} else {
		r.log.Warn("refresh failed; the mount keeps its view and tries again", "err", err, "interval", r.interval)
	}
	r.failing = true
}

// refreshShards is refresh for a repository mount: the shards shown
// with a newer commit get its files (what opening it reads fetched
// first, as for one shard), in one change of the tree that keeps every
// other file as it is, those of a shard resolved meanwhile included;
// the directories listed so far list again at their next use, so that
// new indices and shards show.
func (r *refresher) refreshShards(ctx context.Context) (time.Time, bool) {
	start := time.Now()
	updates, files, commit, err := r.shards(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.failed(err)
		}
		return time.Time{}, false
	}
	if r.failing {
		r.log.Info("refresh works again")
		r.failing = false
	}
	r.root.Relist()
	r.eng.relisted(files)
	var fresh []entry.Entry
	for _, es := range updates {
		fresh = append(fresh, es...)
	}
	if len(fresh) > 0 {
		pctx, cancel := context.WithTimeout(ctx, refreshPrefetchWait)
		if err := r.rd.PrefetchOpen(pctx, fresh); err != nil && ctx.Err() == nil {
			r.log.Info("a new commit shows before all of its open's ranges are fetched", "waited", refreshPrefetchWait)
		}
		cancel()
	}
	applied := map[string]bool{}
	c, next := r.root.RefreshWith(func(listed []entry.Entry) []entry.Entry {
		out := make([]entry.Entry, 0, len(listed)+len(fresh))
		for _, e := range listed {
			dir := path.Dir(e.Name) + "/"
			if _, ok := updates[dir]; ok {
				applied[dir] = true // shown: its new commit replaces it
				continue
			}
			out = append(out, e)
		}
		// A shard not shown yet (resolved, its files not added) takes
		// its own resolution, and this update again at the next refresh.
		for _, dir := range slices.Sorted(maps.Keys(applied)) {
			out = append(out, updates[dir]...)
		}
		return out
	}, r.keep, time.Now())
	commit(applied)
	took := time.Since(start).Round(time.Millisecond)
	if c.Deferred {
		// Lookups held the tree for reading all of viewWait (each only
		// while it reads or changes the tree); the shards with a newer
		// commit are asked again at the next refresh.
		r.log.Info("refresh deferred: lookups hold the tree", "shards", len(updates), "took", took)
		return next, true
	}
	if c.Empty() {
		r.log.Debug("refreshed: no shard changed", "took", took)
		return next, true
	}
	r.rd.Serve(append(c.Added[:len(c.Added):len(c.Added)], c.Changed...))
	r.log.Info("refreshed", "shards", len(applied), "added", len(c.Added), "changed", len(c.Changed), "removed", len(c.Removed),
		"kept", r.root.Stats().FilesKept.Load(), "files", len(r.root.Entries()), "took", took)
	return next, true
}
