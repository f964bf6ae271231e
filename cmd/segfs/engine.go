package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"sync"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/ops"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/restore"
)

// engine is the stack a command reads the store through: the part
// cache, the fetch pool and the Reader, built in one place for mount,
// verify and restore, with the memory bound their configuration gives
// set as the Go memory limit.
type engine struct {
	store fetcher.Store
	disk  *cache.Cache // nil when the command keeps no part cache
	sched *prefetch.Scheduler
	rd    *reader.Reader
	bound memoryBound
	cfg   engineConfig // as built, for relisted

	relistMu sync.Mutex // guards cfg.keys and bound after the start (relisted)
}

// engineConfig says what to build.
type engineConfig struct {
	store fetcher.Store
	// cache names the part cache; nil keeps none (parts fetched are
	// read once and dropped: restore.DiscardCache).
	cache  *cacheFlags
	sched  prefetch.Config
	reader reader.Config // Source is set from the store
	// keys is the listing's: the tree and the cache's index grow with it.
	keys int
	// own is memory the command holds beside the engine (restore's
	// piece buffers and checks), counted with the part buffers.
	own int64
	// listeners are the HTTP listeners the command serves.
	listeners []ops.Limits
	// dirs is the most directories a repository mount's tree shows
	// (--max-dirs), each a node of segfs.DirBytes; 0 for another mount.
	dirs int
	// resolve is what a repository mount's shard resolutions in flight
	// may hold (view.Spec.ResolveMemory).
	resolve int64
}

// newEngine builds the stack and sets the memory limit; Close takes it
// down. A failure leaves nothing open.
func newEngine(cfg engineConfig, log *slog.Logger) (*engine, error) {
	e := &engine{store: cfg.store}
	var pc reader.Cache = restore.DiscardCache{}
	if cfg.cache != nil {
		disk, err := openCache(*cfg.cache, fetcher.CacheSource(cfg.store), log)
		if err != nil {
			return nil, err
		}
		e.disk, pc = disk, disk
	}
	e.sched = prefetch.New(cfg.sched)
	cfg.reader.Source = fetcher.CacheSource(cfg.store)
	cfg.reader.Logger = log
	rd, err := reader.New(cfg.store, pc, e.sched, cfg.reader)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.rd = rd
	e.cfg = cfg
	e.bound = e.memoryBound(cfg)
	setMemoryLimit(e.bound, log)
	return e, nil
}

// relisted raises the memory bound to a new listing of keys keys (a
// refresh of the view): the tree and the cache's index grow with it. It
// never lowers it while the engine runs: the names kept for a grace, the
// nodes the kernel still holds and the cache index's parts of old
// versions outlive the listing that dropped them. A repository mount
// calls it from its lookups and its refresher at once: relistMu orders
// them.
func (e *engine) relisted(keys int) {
	e.relistMu.Lock()
	defer e.relistMu.Unlock()
	if keys <= e.cfg.keys {
		return
	}
	e.cfg.keys = keys
	e.bound = e.memoryBound(e.cfg)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(e.bound.Total())
	}
}

// memoryBound is the process's bound: the Reader's terms, the command's
// own buffers, the tree, the disk cache's index (at most
// --cache-size/--part-size whole parts plus one short part per object),
// the listeners and the base.
func (e *engine) memoryBound(cfg engineConfig) memoryBound {
	rb := e.rd.MemoryBound()
	b := memoryBound{
		Parts:     rb.Parts + cfg.own,
		Ranges:    rb.Ranges,
		Memory:    rb.Memory,
		Frames:    rb.Frames,
		Tree:      int64(cfg.keys)*segfs.TreeBytesPerKey + int64(cfg.dirs)*segfs.DirBytes,
		Resolve:   cfg.resolve,
		Listeners: listenersMemory(cfg.listeners),
		Base:      baseBytes,
	}
	if cfg.cache != nil {
		b.Index = (int64(cfg.cache.CacheSize)/e.rd.PartSize() + int64(cfg.keys)) * indexBytesPerPart
	}
	return b
}

// Close closes the Reader, then the pool, then the cache: the parts
// handed to the Reader's writers are stored first.
func (e *engine) Close() {
	if e.rd != nil {
		e.rd.Close()
	}
	if e.sched != nil {
		e.sched.Close()
	}
	if e.disk != nil {
		e.disk.Close()
	}
}

// daemon is what the operator surface (package ops) reads of the
// engine and root (nil for a command without a tree).
func (e *engine) daemon(root *segfs.Root) ops.Daemon {
	b := buildInfo()
	return ops.Daemon{Store: e.store, Reader: e.rd, Sched: e.sched, Disk: e.disk, Root: root,
		Version: versionString(), BuildVersion: b.version, Revision: b.revision}
}
