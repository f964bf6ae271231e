package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/reader"
)

// refresher keeps a mount's view following its store: at every
// --refresh interval, and at once on SIGHUP, it lists the store again and
// changes the tree in one step (fs.Root.Refresh). One refresh runs at a
// time. A failed listing changes nothing: it is counted, logged (at warn
// once, then at debug while the failures go on) and tried again at the
// next interval or SIGHUP; the view stays the last good one.
type refresher struct {
	list     func(ctx context.Context, prev []entry.Entry) (entries []entry.Entry, keys int, err error)
	root     *segfs.Root
	rd       *reader.Reader
	eng      *engine
	interval time.Duration // 0: on SIGHUP only
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
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-r.kick:
		}
		r.refresh(ctx)
	}
}

// refresh lists the store and applies what changed.
func (r *refresher) refresh(ctx context.Context) {
	start := time.Now()
	entries, keys, err := r.list(ctx, r.root.Entries())
	if err != nil {
		if ctx.Err() != nil {
			return // closing
		}
		r.root.Stats().RefreshFailures.Add(1)
		if r.failing {
			r.log.Debug("refresh failed again; the mount keeps its view", "err", err)
		} else {
			r.log.Warn("refresh failed; the mount keeps its view and tries again", "err", err, "interval", r.interval)
		}
		r.failing = true
		return
	}
	if r.failing {
		r.log.Info("refresh works again")
		r.failing = false
	}
	r.eng.relisted(keys)
	c := r.root.Refresh(entries)
	took := time.Since(start).Round(time.Millisecond)
	if c.Empty() {
		r.log.Debug("refreshed: nothing changed", "files", len(entries), "took", took)
		return
	}
	// The prefetch policies see the new versions as the mount's files
	// (--prefetch all fetches them).
	r.rd.Serve(append(c.Added[:len(c.Added):len(c.Added)], c.Changed...))
	r.log.Info("refreshed", "added", len(c.Added), "changed", len(c.Changed), "removed", len(c.Removed),
		"files", len(r.root.Entries()), "took", took)
}
