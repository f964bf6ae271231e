package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/daemon"
	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/follow"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/mountinfo"
	"github.com/segfs/segfs/ops"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/view"
)

// mountCmd is `segfs mount`.
type mountCmd struct {
	Source     string `arg:"" help:"Remote store: s3://bucket[/prefix] or file:///dir."`
	Mountpoint string `arg:"" help:"An existing empty directory to mount on."`

	storeFlags   `embed:""`
	layoutFlags  `embed:""`
	cacheFlags   `embed:""`
	controlFlags `embed:""`

	PartSize            byteSize      `name:"part-size" default:"8MiB" help:"Size of the aligned parts that are fetched and cached."`
	MaxFetches          int           `name:"max-fetches" default:"16" help:"Most remote reads in flight at once, for the whole mount: the size of the fetch pool."`
	BackgroundFetches   int           `name:"background-fetches" placeholder:"N" help:"Most of the --max-fetches that background work (the rest of opened files; every file with --prefetch all) may hold; the others stay free for reads that wait and for readahead. Default: three quarters of --max-fetches; with --prefetch all, all but one."`
	SplitSize           byteSize      `name:"split-size" default:"1MiB" help:"When fetch workers are idle, a part fetch splits into GETs of at least this size run in parallel on them (at most 8), so that a reader waiting on one part waits for several connections instead of one; a busy pool fetches whole parts. 0 fetches every part with one GET."`
	Prefetch            string        `name:"prefetch" default:"open" enum:"none,open,all" help:"Background fetching: none; open (the rest of each opened file, and the next 32 files of one part or less after it in its directory); all (every file after mounting, small files first)."`
	SegmentPrefetch     bool          `name:"segment-prefetch" default:"true" negatable:"" help:"When a directory holding a Lucene index is first looked up, listed or has a file opened (the mount's root, and a shard's directory of --layout opensearch or snapshot, at mount), fetch at once what opening the index reads, as the kernel asks for it: of every file the head and the tail that a page fault reads around (--readahead, in --max-read requests; 1MiB and 516KiB by default), or the whole file where they meet, kept in a range tier in memory and in the cache; reads wait for these fetches rather than fetching again. In every --prefetch mode; --no-segment-prefetch turns it off."`
	RangeMemory         byteSize      `name:"range-memory" default:"64MiB" help:"Memory for the heads and tails fetched ahead for index opens (--segment-prefetch), so that an open after the mount-time prefetch reads no disk; the rest of them are read from the cache. 0 keeps none in memory."`
	MemoryCache         byteSize      `name:"memory-cache" default:"64MiB" help:"Memory for parts the disk cache cannot take (a full disk); 0 keeps none."`
	FrameCache          byteSize      `name:"frame-cache" default:"64MiB" help:"Memory for decoded seekable-zstd frames kept for later reads; a frame larger than this is never kept (it is decoded for each read that needs it). 0 keeps none."`
	DecodeMemory        byteSize      `name:"decode-memory" default:"64MiB" help:"Memory for seekable-zstd frames being decoded at once: each decode reserves its compressed bytes plus 2.25 times its frame size and 256KiB before it allocates anything (what a corrupt frame may take), and waits while other decodes hold the rest. Must hold one frame of --max-frame-size (52.3MiB for the default 16MiB)."`
	MaxFrameSize        byteSize      `name:"max-frame-size" default:"16MiB" help:"Largest decompressed frame of a seekable-zstd object that segfs decodes (and largest compressed frame: what zstd may need for that many bytes). An object with a larger frame is listed at its logical size, but every read of it fails with EIO and a log line naming the frame. segfs push writes 256KiB frames by default and at most 16MiB; the format allows 1GiB, which a hostile object could claim to make each read allocate that much."`
	MaxRead             byteSize      `name:"max-read" default:"1MiB" help:"Largest read request the kernel sends (max_read)."`
	Readahead           byteSize      `name:"readahead" default:"1MiB" help:"How far ahead of a sequential reader the kernel reads, sent as --max-read requests all in flight at once (the mount's read_ahead_kb; needs root, else the kernel's 128KiB stays). It is also what the kernel reads around each page fault of a memory-mapped file that did not ask for MADV_RANDOM."`
	IdleTimeout         time.Duration `name:"idle-timeout" default:"30s" help:"A response body that delivers no bytes for this long is re-requested."`
	Passthrough         bool          `name:"passthrough" help:"Copy each object whose parts are all cached into one whole-object file in the cache (it counts toward --cache-size), and hand later opens of it to the kernel, which then serves their reads from that file without segfs (FUSE passthrough: Linux 6.9+, root). The file is checked as it is built and sealed; a change to it is found at open. Off by default: it costs a second copy of each cached object on disk."`
	DropAfterRead       bool          `name:"drop-after-read" default:"true" negatable:"" help:"When the last open handle of a file larger than --part-size is closed after reading the whole file (a copy out of the mount), ask the kernel to drop the file's pages from its page cache: a copy of a shard does not push other files' pages out, and the kernel reuses that memory for the next file. The bytes stay in segfs's caches. --no-drop-after-read keeps them."`
	MetricsAddr         string        `name:"metrics-addr" help:"Serve metrics in the Prometheus text format at http://ADDR/metrics, with latency histograms, and the same counters as one JSON object at http://ADDR/stats (e.g. 127.0.0.1:9100). Off by default."`
	BackgroundBandwidth byteSize      `name:"background-bandwidth" default:"0" placeholder:"RATE" help:"Most bytes per second that background fetches (segfs warm, the rest of opened files, --prefetch all) start together, e.g. 50MiB: each part fetch waits in the queue until its bytes are paid for at this rate, and then runs at full speed; a read that comes to wait on one lifts the cap from it. Reads and readahead are never capped. 0: no cap."`
	PprofAddr           string        `name:"pprof-addr" help:"Serve Go profiles (heap, goroutines, CPU and execution traces on demand) at http://ADDR/debug/pprof/ (e.g. 127.0.0.1:6060), on a listener of their own: --metrics-addr never serves them. Off by default: profiles show the process's memory."`
	Debug               bool          `help:"Log every FUSE request and its answer, at info level (very verbose)."`
	Refresh             time.Duration `name:"refresh" default:"0" placeholder:"DURATION" help:"List the store again every DURATION (e.g. 30s) and change the view to it: new objects appear, removed ones go, an object whose ETag or size changed becomes a new file (a new inode) while handles opened before keep reading the old version as far as the cache or the store still holds it. With --layout opensearch: look for a newer metadata file (one listing of the metadata prefix; the data prefix is not listed again) and show its commit, its files before its segments_N. SIGHUP refreshes at once, with or without it. 0 (the default): the view stays as listed at mount until a SIGHUP."`
	MaxShards           int           `name:"max-shards" default:"1000" placeholder:"N" help:"With a repository mount (--layout opensearch without --shard, or --layout snapshot without --index and --shard): most shards shown at once; the lookup of one more fails with EIO and a log line. Each shard's files count in the memory bound as it is looked up."`
	MaxDirs             int           `name:"max-dirs" default:"65536" placeholder:"N" help:"With a repository mount: most directories (indices, snapshots, shards) shown in all; a listing that would pass it is refused, and its directory fails with EIO and a log line. Each counts 2KiB in the memory bound."`
	KeepRemoved         time.Duration `name:"keep-removed" default:"1m" placeholder:"DURATION" help:"With --layout opensearch: how long a file that a newer commit no longer names stays visible after the refresh that dropped it, for the readers of the older commit that still open it. 0 removes it at once."`

	AllowOther   bool          `name:"allow-other" xor:"allow" help:"Let every user use the mount (FUSE allow_other), as --uid, --gid, --file-mode and --dir-mode permit: the kernel checks them for each access (root bypasses them). Without it or --allow-root, only the mounting user may use the mount. A user other than root needs user_allow_other in /etc/fuse.conf."`
	AllowRoot    bool          `name:"allow-root" xor:"allow" help:"Let only the mounting user and root use the mount: it is mounted with allow_other and segfs refuses every other user's request with EACCES. The kernel then caches no attributes, so that each lookup and stat reaches segfs. A user other than root needs user_allow_other in /etc/fuse.conf. Not with --allow-other."`
	UID          ownerID       `name:"uid" placeholder:"N" help:"Owner shown for every file and directory. Default: the mounting user."`
	GID          ownerID       `name:"gid" placeholder:"N" help:"Group shown for every file and directory. Default: the mounting user's group."`
	FileMode     permBits      `name:"file-mode" default:"0444" help:"Permission bits of every file, in octal (0444, 444 or 0o444); read and execute bits only, as the mount is read-only. The kernel enforces them (and --dir-mode) against each caller; root bypasses them."`
	DirMode      permBits      `name:"dir-mode" default:"0555" help:"Permission bits of every directory, in octal; read and execute bits only."`
	UnmountGrace time.Duration `name:"unmount-grace" default:"10s" help:"After SIGINT or SIGTERM, while files are still open, keep serving them and retry the unmount for up to this long; then detach the mount, fail the reads still pending and exit. A second SIGINT or SIGTERM ends the wait at once. SIGHUP refreshes the view (--refresh)."`
}

// reserved returns how many fetch workers background work leaves free;
// 0 asks for the scheduler's default (a quarter). With --prefetch all the
// default leaves one: such a mount serves a copy, whose reads trail the
// fill and find their parts fetched, and there background work is most
// of what the pool has to do (docs/BENCH.md, "Measured and not kept",
// has the figures).
func (c *mountCmd) reserved() int {
	switch {
	case c.BackgroundFetches != 0:
		return c.MaxFetches - c.BackgroundFetches
	case prefetch.Mode(c.Prefetch) == prefetch.All && c.MaxFetches > 1:
		return 1
	}
	return 0
}

// checkFetchFlags checks --part-size and --max-fetches, which the mount
// and restore share.
func checkFetchFlags(partSize byteSize, maxFetches int) error {
	switch {
	case partSize < 4096:
		return fmt.Errorf("--part-size %v: must be at least 4KiB", partSize)
	case partSize > 1<<30:
		return fmt.Errorf("--part-size %v: must be at most 1GiB", partSize)
	case maxFetches < 1 || maxFetches > 1024:
		return fmt.Errorf("--max-fetches %d: must be between 1 and 1024", maxFetches)
	}
	return nil
}

func (c *mountCmd) validate() error {
	spec := c.spec(c.Source)
	if err := spec.Check(); err != nil {
		return err
	}
	if c.Refresh > 0 {
		if err := spec.Fixed(); err != nil {
			return fmt.Errorf("--refresh: %w", err)
		}
	}
	if spec.Tree() {
		switch {
		case prefetch.Mode(c.Prefetch) == prefetch.All:
			return fmt.Errorf("--prefetch all: a repository mount resolves its shards as they are used and has no listing to sweep; warm a shard's directory with segfs warm")
		case c.MaxShards < 1:
			return fmt.Errorf("--max-shards %d: must be at least 1", c.MaxShards)
		case c.MaxDirs < 1 || c.MaxDirs > 1<<24:
			return fmt.Errorf("--max-dirs %d: must be between 1 and %d", c.MaxDirs, 1<<24)
		}
	}
	if err := checkFetchFlags(c.PartSize, c.MaxFetches); err != nil {
		return err
	}
	switch {
	case c.Refresh < 0:
		return fmt.Errorf("--refresh %v: must be 0 (off) or a positive interval", c.Refresh)
	case c.KeepRemoved < 0:
		return fmt.Errorf("--keep-removed %v: must not be negative", c.KeepRemoved)
	case c.BackgroundFetches < 0 || c.BackgroundFetches > max(c.MaxFetches-1, 1):
		return fmt.Errorf("--background-fetches %d: must be between 1 and %d (one fewer than --max-fetches)", c.BackgroundFetches, max(c.MaxFetches-1, 1))
	case c.MaxRead < 4096 || c.MaxRead > 1<<20:
		return fmt.Errorf("--max-read %v: must be between 4KiB and 1MiB", c.MaxRead)
	case c.Readahead < 4096 || c.Readahead > 64<<20 || c.Readahead%4096 != 0:
		return fmt.Errorf("--readahead %v: must be a multiple of 4KiB between 4KiB and 64MiB", c.Readahead)
	case c.SplitSize < 0 || (c.SplitSize > 0 && c.SplitSize < 64<<10):
		return fmt.Errorf("--split-size %v: must be 0 (never split) or at least 64KiB", c.SplitSize)
	case c.CacheSize < 0:
		return fmt.Errorf("--cache-size %v: must not be negative", c.CacheSize)
	case c.IdleTimeout <= 0:
		return fmt.Errorf("--idle-timeout %v: must be positive", c.IdleTimeout)
	case c.UnmountGrace < 0:
		return fmt.Errorf("--unmount-grace %v: must not be negative", c.UnmountGrace)
	case c.BackgroundBandwidth < 0 || (c.BackgroundBandwidth > 0 && c.BackgroundBandwidth < 64<<10):
		return fmt.Errorf("--background-bandwidth %v: must be 0 (no cap) or at least 64KiB (per second)", c.BackgroundBandwidth)
	case c.FrameCache < 0:
		return fmt.Errorf("--frame-cache %v: must not be negative", c.FrameCache)
	case c.MaxFrameSize < 1 || c.MaxFrameSize > 1<<30:
		return fmt.Errorf("--max-frame-size %v: must be between 1B and 1GiB (the format's limit)", c.MaxFrameSize)
	case int64(c.DecodeMemory) < reader.MinDecodeMemory(int64(c.MaxFrameSize)):
		return fmt.Errorf("--decode-memory %v: must be at least %v, what one frame of --max-frame-size %v may take to decode",
			c.DecodeMemory, byteSize(reader.MinDecodeMemory(int64(c.MaxFrameSize))), c.MaxFrameSize)
	}
	return nil
}

// Run mounts and serves until the mount goes away or a signal arrives.
// Every check a user can fail (bad URL, mountpoint, bucket, credentials)
// runs before anything is mounted.
func (c *mountCmd) Run(log *slog.Logger) error {
	if err := c.validate(); err != nil {
		return err
	}
	if _, err := fetcher.ParseSource(c.Source); err != nil {
		return err
	}
	if err := checkMountpoint(c.Mountpoint, log); err != nil {
		return err
	}
	// Named from here on as the kernel will name the mount: a mountpoint
	// given through a symlink is found in mountinfo by readiness and
	// unmount, and its control socket by status under either name.
	mp, err := ops.CanonicalMountpoint(c.Mountpoint)
	if err != nil {
		return err
	}
	c.Mountpoint = mp

	if err := c.checkAllowOther(os.Getuid(), fuseConf); err != nil {
		return err
	}

	// Signals are caught from here on. Until the mount is up, SIGINT and
	// SIGTERM cancel the start (ctx); then sigs has them unmount. SIGHUP
	// never ends segfs: by default it would, and leave its mount dead.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	spec := c.spec(c.Source)
	v, err := view.Open(ctx, spec, view.Options{Store: c.storeFlags.config(c.IdleTimeout, c.MaxFetches*2, log),
		Parallel: c.MaxFetches, MaxShards: c.MaxShards, Log: log})
	if err != nil {
		return err
	}
	store := v.Store()
	var entries []entry.Entry
	if v.Depth() == 0 {
		if entries, err = v.Files(ctx, ""); err != nil {
			return err
		}
	}

	eng, err := newEngine(c.engineConfig(store, v.Keys()), log)
	if err != nil {
		return err
	}
	defer eng.Close()
	pc, rd := eng.disk, eng.rd
	checkFileLimit(fileNeedOf(c), log)

	root := segfs.NewRoot(entries, rd, c.attr(), log)
	if v.Depth() > 0 {
		// The memory bound grows with the files of the shards looked up.
		root.SetLazy(v, segfs.LazyLimits{AdmitFiles: func(files int) error { eng.relisted(files); return nil }, MaxDirs: c.MaxDirs})
	}

	var metrics *ops.Metrics
	if c.MetricsAddr != "" || c.PprofAddr != "" {
		metrics, err = ops.StartMetrics(c.MetricsAddr, c.PprofAddr, eng.daemon(root), log)
		if err != nil {
			return err
		}
		defer metrics.Close()
	}

	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted before mounting: %w", err)
	}
	server, err := segfs.Mount(c.Mountpoint, root, segfs.MountConfig{
		FsName:     store.String(),
		MaxRead:    int(c.MaxRead),
		Readahead:  int(c.Readahead),
		Debug:      c.Debug,
		Logger:     log,
		AllowOther: c.AllowOther,
		AllowRoot:  c.AllowRoot,
	})
	if err != nil {
		return err
	}
	if c.Passthrough {
		if err := segfs.ProbePassthrough(server, pc.Dir()); err != nil {
			log.Warn("--passthrough is off: segfs serves every read itself", "err", err)
			rd.DisablePassthrough()
		}
	}
	log.Info("mounted", "source", store.String(), "mountpoint", c.Mountpoint,
		"cache", pc.Dir(), "prefetch", c.Prefetch, "max_fetches", c.MaxFetches, "passthrough", rd.Passthrough())
	// The mount's root is seen at mount: when it is an index's directory
	// (a shard's layout, or a plain prefix holding one index) its open is
	// what the mount is for, and its ranges are fetched while the engine
	// starts up, as an ls of the root would. A root without an index
	// plans nothing.
	root.Seen()
	rd.Serve(root.Entries())
	control, err := ops.StartControl(c.controlDir(), c.Mountpoint, ops.ControlLimits(), eng.daemon(root), log)
	if err != nil {
		// status and warm cannot reach this mount; it serves all the same.
		log.Warn("no control socket: segfs status and segfs warm cannot reach this mount", "err", err)
	} else {
		defer control.Close()
	}
	var refr *follow.Refresher
	if v.Follows().Refresh {
		refr = follow.Start(follow.Config{View: v, Root: root, Reader: rd, Relisted: eng.relisted,
			Interval: c.Refresh, Keep: c.KeepRemoved, Log: log})
		defer refr.Close() // before the control socket, the metrics and the engine close
	}
	daemon.SignalReady(c.Mountpoint, log)

	served := make(chan struct{})
	go func() {
		server.Wait()
		close(served)
	}()
serving:
	for {
		select {
		case <-served:
			daemon.SignalStopping(log)
			log.Info("unmounted", "mountpoint", c.Mountpoint)
			break serving
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				if refr == nil {
					log.Info("SIGHUP received; this mount's view is fixed (a snapshot, or a named --metadata)", "mountpoint", c.Mountpoint)
					continue
				}
				log.Info("SIGHUP received; refreshing the view", "mountpoint", c.Mountpoint)
				refr.Now()
				continue
			}
			if refr != nil {
				refr.Close() // nothing changes the tree while it detaches
			}
			daemon.SignalStopping(log)
			log.Info("signal received; unmounting", "signal", signalName(sig), "mountpoint", c.Mountpoint, "grace", c.UnmountGrace)
			unmountServer(c.Mountpoint, served, sigs, c.UnmountGrace, rd, log)
			break serving
		}
	}
	logSummary(log, store, rd, pc)
	return nil
}

func logSummary(log *slog.Logger, store fetcher.Store, rd *reader.Reader, pc *cache.Cache) {
	c := store.Counters()
	rs := rd.Stats()
	cs := pc.Stats()
	log.Info("summary",
		"reads", rs.Reads.Load(), "read_bytes", rs.ReadBytes.Load(),
		"gets", c.Gets.Load(), "get_bytes", c.GetBytes.Load(),
		"retries", c.Retries.Load(), "read_errors", c.ReadErrors.Load(),
		"cache_hits", rs.DiskHits.Load(), "cache_bytes", cs.Bytes, "cache_parts", cs.Parts)
}

// checkMountpoint fails with a clear message unless dir is an existing
// directory that nothing is mounted on.
func checkMountpoint(dir string, log *slog.Logger) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, syscall.ENOTCONN) || (err == nil && isDeadSegfsMount(dir)) {
		// A segfs that was killed left its mount behind: clear it.
		if cerr := clearDeadMount(dir, log); cerr != nil {
			return fmt.Errorf("mountpoint %s: a dead FUSE mount is there and could not be cleared: %w", dir, cerr)
		}
		fi, err = os.Stat(dir)
	}
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		return fmt.Errorf("mountpoint %s: a dead FUSE mount is still there; clear it with `segfs unmount --lazy %s`", dir, dir)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("mountpoint %s does not exist; create the directory first", dir)
	case err != nil:
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("mountpoint %s is not a directory", dir)
	}
	if e, mounted, err := mountinfo.Find(dir); err == nil && mounted {
		return fmt.Errorf("mountpoint %s is busy: %s (%s) is already mounted there", dir, e.Source, e.FsType)
	}
	return nil
}

// isDeadSegfsMount reports whether dir is a segfs mount whose server is
// gone. A stat of such a mount can still succeed, from the attributes the
// kernel cached while the server lived (for an hour); statfs is never
// cached, so it reaches the connection and fails if nobody serves it.
func isDeadSegfsMount(dir string) bool {
	e, ok, err := mountinfo.Find(dir)
	if err != nil || !ok || e.FsType != segfs.FuseType {
		return false
	}
	var st syscall.Statfs_t
	err = syscall.Statfs(dir, &st)
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

// clearDeadMount removes a segfs mount whose server is gone: it aborts the
// connection, so that nothing stays blocked on it, and detaches it. Mounts
// of other file systems are left alone.
func clearDeadMount(dir string, log *slog.Logger) error {
	e, ok, err := mountinfo.Find(dir)
	if err != nil {
		return err
	}
	if !ok || e.FsType != segfs.FuseType {
		return fmt.Errorf("%s is not a segfs mount (%s)", dir, e.FsType)
	}
	log.Warn("clearing the dead mount of a segfs that exited", "mountpoint", dir, "source", e.Source)
	if err := mountinfo.Abort(dir); err != nil {
		log.Debug("abort failed; detaching anyway", "err", err)
	}
	return mountinfo.Unmount(dir, true)
}

// engineConfig is the engine a mount of store, with keys listed keys,
// reads through.
func (c *mountCmd) engineConfig(store fetcher.Store, keys int) engineConfig {
	return engineConfig{
		store: store,
		cache: &c.cacheFlags,
		sched: prefetch.Config{Workers: c.MaxFetches, Reserved: c.reserved(), BackgroundRate: int64(c.BackgroundBandwidth)},
		reader: reader.Config{
			PartSize:        int64(c.PartSize),
			MemoryLimit:     c.memoryLimit(),
			Prefetch:        prefetch.Mode(c.Prefetch),
			Passthrough:     c.Passthrough,
			DropAfterRead:   c.DropAfterRead,
			SplitSize:       int64(c.SplitSize),
			SegmentPrefetch: c.SegmentPrefetch,
			Kernel:          c.kernel(),
			RangeMemory:     c.rangeMemory(),
			Frames: reader.FrameConfig{
				CacheBytes:   int64(c.FrameCache),
				DecodeBytes:  int64(c.DecodeMemory),
				MaxFrameSize: int64(c.MaxFrameSize),
			},
		},
		keys:      keys,
		listeners: c.listeners(),
		dirs:      c.lazyDirs(),
		resolve:   c.spec(c.Source).ResolveMemory(),
	}
}

// lazyDirs is how many directories the tree may show: --max-dirs for a
// repository mount, whose directories are made as they are listed; 0
// for another, whose directories follow its keys (the Tree term).
func (c *mountCmd) lazyDirs() int {
	if c.spec(c.Source).Tree() {
		return c.MaxDirs
	}
	return 0
}

// kernel is what the kernel will read around a page fault of the
// mount: --readahead in requests of --max-read, which segfs sets as
// root (fs.Mount); as another user the kernel's default stays.
func (c *mountCmd) kernel() prefetch.Kernel {
	if os.Geteuid() != 0 {
		return prefetch.DefaultKernel
	}
	return prefetch.Kernel{Readahead: int64(c.Readahead), MaxRead: int64(c.MaxRead)}
}

// rangeMemory is --range-memory as the engine takes it: 0 is none (a
// bound no block fits), not the engine's default.
func (c *mountCmd) rangeMemory() int64 {
	if c.RangeMemory == 0 {
		return 1
	}
	return int64(c.RangeMemory)
}

// memoryLimit is --memory-cache as the engine takes it: 0 is none (a
// bound no part fits), not the engine's default.
func (c *mountCmd) memoryLimit() int64 {
	if c.MemoryCache == 0 {
		return 1
	}
	return int64(c.MemoryCache)
}
