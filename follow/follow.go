// Package follow keeps a mount's tree following its store: at every
// interval, and at once when asked (SIGHUP), it asks the view for its
// next state (view.View.Next) and changes the tree in one step
// (fs.Root), fetching first what opening a new commit reads. It joins
// the three packages that know nothing of each other: view (what the
// store holds now), fs (what the mount shows) and reader (what is
// fetched).
package follow

import (
	"context"
	"log/slog"
	"maps"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/segfs/segfs/entry"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/view"
)

// refreshPrefetchWait bounds how long a new commit of an index waits
// for its open's ranges before it shows.
const refreshPrefetchWait = 2 * time.Second

// Config says what a Refresher follows and applies to.
type Config struct {
	View   view.View
	Root   *segfs.Root
	Reader *reader.Reader
	// Relisted is told each new view's keys: the memory bound follows
	// them. Nil: not told.
	Relisted func(keys int)
	Interval time.Duration // 0: only when asked (Now)
	// Keep is how long a name a newer commit dropped stays
	// (--keep-removed), for a view that follows commits.
	Keep time.Duration
	Log  *slog.Logger
}

// Refresher keeps a mount's view following its store: at every
// Interval, and at once on Now, it lists the store again and changes
// the tree in one step (fs.Root.Refresh). One refresh runs at a time. A
// failed listing changes nothing: it is counted, logged (at warn once,
// then at debug while the failures go on) and tried again at the next
// interval or Now; the view stays the last good one.
type Refresher struct {
	v        view.View
	root     *segfs.Root
	rd       *reader.Reader
	relisted func(keys int)
	interval time.Duration
	keep     time.Duration
	log      *slog.Logger

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	failing bool // the last refresh failed; only the run goroutine uses it
}

// Start starts a Refresher's goroutine; Close stops it.
func Start(cfg Config) *Refresher {
	r := &Refresher{v: cfg.View, root: cfg.Root, rd: cfg.Reader, relisted: cfg.Relisted,
		interval: cfg.Interval, log: cfg.Log}
	if cfg.View.Follows().Commits {
		// Readers of the commit before still hold its files.
		r.keep = cfg.Keep
	}
	if r.relisted == nil {
		r.relisted = func(int) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.kick, r.cancel, r.done = make(chan struct{}, 1), cancel, make(chan struct{})
	go r.run(ctx)
	return r
}

// Now asks for a refresh at once (SIGHUP). A refresh already asked for
// and not yet begun takes this one in.
func (r *Refresher) Now() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Close stops the refreshes and waits for one in progress to end: its
// listing is cancelled, and a tree change already begun is finished.
// Later calls do nothing.
func (r *Refresher) Close() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

func (r *Refresher) run(ctx context.Context) {
	defer close(r.done)
	var tick <-chan time.Time
	if r.interval > 0 {
		t := time.NewTicker(r.interval)
		defer t.Stop()
		tick = t.C
	}
	// expire fires when the first name kept for Keep is due.
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

// refresh asks the view for its next state and applies what changed.
// It returns when the first kept name is due, and false if the view
// could not be read (the tree, and what it keeps, stay).
func (r *Refresher) refresh(ctx context.Context) (time.Time, bool) {
	start := time.Now()
	u, err := r.v.Next(ctx, r.root.Entries())
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
	r.relisted(u.Keys)
	if u.Dirs != nil {
		return r.refreshDirs(ctx, u, start)
	}
	commits := r.v.Follows().Commits
	if commits && !entry.Diff(r.root.Listed(), entry.Shown(u.Entries, slog.New(slog.DiscardHandler))).Empty() {
		// A new commit: what opening it reads first, so that an engine
		// that finds its segments_N opens it from memory.
		r.prefetchOpen(ctx, u.Entries)
	}
	c, next := r.root.RefreshKeeping(u.Entries, r.keep, time.Now())
	took := time.Since(start).Round(time.Millisecond)
	if c.Empty() {
		r.log.Debug("refreshed: nothing changed", "files", len(u.Entries), "took", took)
		return next, true
	}
	// The prefetch policies see the new versions as the mount's files
	// (--prefetch all fetches them).
	r.rd.Serve(append(c.Added[:len(c.Added):len(c.Added)], c.Changed...))
	if commits && len(c.Added)+len(c.Changed) > 0 {
		r.root.Seen() // a new commit of the index: its open's ranges now
	}
	r.log.Info("refreshed", "added", len(c.Added), "changed", len(c.Changed), "removed", len(c.Removed),
		"kept", r.root.Stats().FilesKept.Load(), "files", len(r.root.Entries()), "hidden", c.Hidden, "took", took)
	return next, true
}

// prefetchOpen fetches what opening a new commit's files reads before
// it shows; bounded, so that a slow store does not hold the view back
// for long.
func (r *Refresher) prefetchOpen(ctx context.Context, entries []entry.Entry) {
	pctx, cancel := context.WithTimeout(ctx, refreshPrefetchWait)
	defer cancel()
	if err := r.rd.PrefetchOpen(pctx, entries); err != nil && ctx.Err() == nil {
		r.log.Info("a new commit shows before all of its open's ranges are fetched", "waited", refreshPrefetchWait)
	}
}

// failed counts and logs a refresh that changed nothing.
func (r *Refresher) failed(err error) {
	r.root.Stats().RefreshFailures.Add(1)
	if r.failing {
		r.log.Debug("refresh failed again; the mount keeps its view", "err", err)
	} else {
		r.log.Warn("refresh failed; the mount keeps its view and tries again", "err", err, "interval", r.interval)
	}
	r.failing = true
}

// refreshDirs applies a tree's update: the shards shown with a newer
// commit get its files (what opening it reads fetched first, as for one
// shard), in one change of the tree that keeps every other file as it
// is, those of a shard resolved meanwhile included; the directories
// listed so far list again at their next use, so that new indices and
// shards show.
func (r *Refresher) refreshDirs(ctx context.Context, u *view.Update, start time.Time) (time.Time, bool) {
	r.root.Relist()
	var fresh []entry.Entry
	for _, es := range u.Dirs {
		fresh = append(fresh, es...)
	}
	if len(fresh) > 0 {
		r.prefetchOpen(ctx, fresh)
	}
	applied := map[string]bool{}
	c, next := r.root.RefreshWith(func(listed []entry.Entry) []entry.Entry {
		out := make([]entry.Entry, 0, len(listed)+len(fresh))
		for _, e := range listed {
			dir := path.Dir(e.Name) + "/"
			if _, ok := u.Dirs[dir]; ok {
				applied[dir] = true // shown: its new commit replaces it
				continue
			}
			out = append(out, e)
		}
		// A shard not shown yet (resolved, its files not added) takes
		// its own resolution, and this update again at the next refresh.
		for _, dir := range slices.Sorted(maps.Keys(applied)) {
			out = append(out, u.Dirs[dir]...)
		}
		return out
	}, r.keep, time.Now())
	u.Commit(applied)
	took := time.Since(start).Round(time.Millisecond)
	if c.Deferred {
		// Lookups held the tree for reading all of viewWait (each only
		// while it reads or changes the tree); the shards with a newer
		// commit are asked again at the next refresh.
		r.log.Info("refresh deferred: lookups hold the tree", "shards", len(u.Dirs), "took", took)
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
