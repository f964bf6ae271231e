package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Sentinel errors. Callers test with errors.Is.
var (
	// ErrNoSpace: the part was not cached for lack of room, because the
	// file system is full (ENOSPC, EDQUOT), the free-space floor could not
	// be kept, or the part does not fit within MaxBytes. The caller
	// serves the bytes it has and goes on.
	ErrNoSpace = errors.New("no space to cache part")
	// ErrClosed is returned by calls on a closed Cache.
	ErrClosed = errors.New("cache closed")
	// ErrUnsafeDir: the cache directory is a symlink, is not a
	// directory, is writable by group or others, is not owned by the
	// current user, or its lock or tmp is not what segfs makes there.
	ErrUnsafeDir = errors.New("unsafe cache directory")
	// ErrInUse: another Cache, in this or another process, has the
	// directory open.
	ErrInUse = errors.New("cache directory in use")
)

// Config configures a Cache. Zero fields take the documented defaults.
type Config struct {
	// Dir is the cache directory; required. It is created 0700 if
	// missing. An existing one must be a real directory (not a symlink)
	// owned by the current user and not group- or other-writable, and
	// either empty or a segfs cache; anything else is refused (see
	// dir.go).
	Dir string
	// MaxBytes bounds the bytes of part files on disk, headers included.
	// 0: no bound but the free-space floor.
	MaxBytes int64
	// MinFree is the free-space floor in bytes on the cache's file
	// system. 0: MinFreeFraction of the file system's size. Negative: no
	// floor.
	MinFree int64
	// MinFreeFraction is used when MinFree is 0. Default 0.05.
	MinFreeFraction float64
	// MaxWriters bounds the Puts writing to disk at once, and so the OS
	// threads blocked in disk writes. Default 4.
	MaxWriters int
	// IO is IODirect or IOBuffered: how part data moves between the
	// disk and the caller's buffers. Default IODirect.
	IO string
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger

	blockSize int64                           // test hook; default DefaultBlockSize
	statfs    func(dir string) (space, error) // test hook; default statfs
	holdLoad  <-chan struct{}                 // test hook: if set, the index load starts once it is closed
	// Test hooks of direct I/O; default setDirectFd and (*os.File).Write.
	setDirectFd func(fd int, on bool) error
	writeDirect func(f *os.File, b []byte) (int, error)
}

// DefaultMaxWriters and DefaultMinFreeFraction are Config's defaults.
const (
	DefaultMaxWriters      = 4
	DefaultMinFreeFraction = 0.05
)

// HeldDescriptors is how many file descriptors an open Cache keeps open
// between calls: the directory, its lock file, and its subdirectories
// (tmp/ and the fan-out ones), each opened on first use. Each Put being
// written holds one more (MaxWriters of them), and each read of a part
// one while it reads.
const HeldDescriptors = tmpSlot + 3

func (c Config) withDefaults() Config {
	if c.MinFreeFraction <= 0 {
		c.MinFreeFraction = DefaultMinFreeFraction
	}
	if c.MaxWriters <= 0 {
		c.MaxWriters = DefaultMaxWriters
	}
	if c.IO == "" {
		c.IO = IODirect
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.blockSize == 0 {
		c.blockSize = DefaultBlockSize
	}
	if c.statfs == nil {
		c.statfs = statfs
	}
	if c.setDirectFd == nil {
		c.setDirectFd = setDirectFd
	}
	if c.writeDirect == nil {
		c.writeDirect = (*os.File).Write
	}
	return c
}

// Cache is a persistent store of immutable object parts in a local
// directory. All methods may be called concurrently.
type Cache struct {
	// Immutable after construction.
	cfg      Config
	dir      string        // absolute, for messages and statfs
	dirs     *dirs         // the directory held open; every file is named relative to it
	sem      chan struct{} // one token per Put writing to disk
	ctx      context.Context
	cancel   context.CancelFunc // stops the loader and waiting Puts
	loadDone chan struct{}      // closed when the index load ends
	scratch  sync.Pool          // *[]byte of blockSize, for partial blocks
	tmpSeq   atomic.Uint64
	direct   atomic.Bool // part data is written and read with O_DIRECT where it can be
	stats    counters

	closeOnce sync.Once
	closeErr  error // set once by closeOnce

	// Guarded by mu.
	mu     sync.Mutex
	closed bool
	ops    sync.WaitGroup // ReadAt and Put calls in progress; Add under mu
	idx    *index
}

type counters struct {
	hits, misses, readBytes        atomic.Int64
	puts, putBytes, putErrors      atomic.Int64
	evictions, evictedBytes        atomic.Int64
	corrupt, readErrors            atomic.Int64
	noSpace, boundSkips            atomic.Int64
	loadedParts, loadNanos, strays atomic.Int64
	promotions, promotedBytes      atomic.Int64
	promoteErrors, objectOpens     atomic.Int64
	badObjects, directBytes        atomic.Int64
	directReadBytes, badFiles      atomic.Int64
	indexLoaded                    atomic.Bool
}

// Stats is a snapshot of a Cache's counters and gauges.
type Stats struct {
	Hits            int64         `stat:"cache_hits"`   // ReadAt calls served from disk
	Misses          int64         `stat:"cache_misses"` // ReadAt calls not served (absent or bad part)
	ReadBytes       int64         // bytes returned by ReadAt
	Puts            int64         `stat:"cache_puts"` // parts written
	PutBytes        int64         // bytes of part files written, headers included
	PutErrors       int64         `stat:"cache_put_errors"` // Puts that failed for another reason than space
	Evictions       int64         `stat:"cache_evictions"`  // parts removed to keep the bounds
	EvictedBytes    int64         // bytes of those parts
	CorruptRemoved  int64         `stat:"cache_corrupt_removed"`   // bad parts found by ReadAt and removed
	BadFilesRemoved int64         `stat:"cache_bad_files_removed"` // entries named as parts that could not be used as files (a symlink, a directory, a FIFO, unreadable), removed
	ReadErrors      int64         // ReadAt calls that met an I/O error (a miss)
	NoSpace         int64         `stat:"cache_no_space"` // Puts skipped: file system full or floor not kept
	BoundSkips      int64         // Puts skipped: the part did not fit within MaxBytes
	Bytes           int64         `stat:"cache_bytes" kind:"gauge"` // bytes of indexed part files on disk
	Parts           int64         `stat:"cache_parts" kind:"gauge"`
	MaxBytes        int64         `stat:"cache_max_bytes" kind:"gauge"` // Config.MaxBytes: the most bytes Bytes may reach // indexed part files on disk
	PinnedObjects   int64         // objects pinned now
	IndexLoaded     bool          `stat:"cache_index_loaded" kind:"gauge"` // the start-up index load has ended
	LoadedParts     int64         // parts the index load found on disk
	StrayFiles      int64         // files in the cache directory that are not parts, left alone
	IndexLoadTime   time.Duration `stat:"cache_index_load_ns" kind:"gauge"`
	WholeObjects    int64         `stat:"whole_objects" kind:"gauge"` // indexed whole-object files (Promote)
	Promotions      int64         `stat:"promotions"`                 // whole-object files built
	PromotedBytes   int64         `stat:"promoted_bytes"`             // object bytes copied into them
	PromoteErrors   int64         `stat:"promote_errors"`             // Promotes that failed for another reason than space or a missing part
	ObjectOpens     int64         // OpenObject calls that returned a sealed file
	BadObjects      int64         `stat:"bad_whole_objects"`       // whole-object files removed: seal broken, data file changed
	DirectBytes     int64         `stat:"cache_direct_bytes"`      // part and whole-object data bytes written with O_DIRECT (the rest went through the page cache)
	DirectReadBytes int64         `stat:"cache_direct_read_bytes"` // part data bytes read with O_DIRECT
}

// Open opens or creates the cache in cfg.Dir. It checks that the
// directory is segfs's (a refusal is a *DirError, and nothing in the
// directory has been touched then), takes an exclusive lock on it, removes
// temporary files left by a crash, and starts
// loading the index of the parts on disk in the background; it does not
// wait for the load. ReadAt and Put work while the index loads.
func Open(cfg Config) (*Cache, error) {
	cfg = cfg.withDefaults()
	if cfg.Dir == "" {
		return nil, errors.New("cache: no directory")
	}
	if cfg.IO != IODirect && cfg.IO != IOBuffered {
		return nil, fmt.Errorf("cache: I/O mode %q: want %q or %q", cfg.IO, IODirect, IOBuffered)
	}
	if b := cfg.blockSize; b < minBlockSize || b > maxBlockSize || b&(b-1) != 0 {
		return nil, fmt.Errorf("cache: block size %d", b)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("cache dir %s: %w", cfg.Dir, err)
	}
	d, err := openDirs(dir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		cfg:      cfg,
		dir:      dir,
		dirs:     d,
		sem:      make(chan struct{}, cfg.MaxWriters),
		ctx:      ctx,
		cancel:   cancel,
		loadDone: make(chan struct{}),
		idx:      newIndex(),
	}
	c.direct.Store(cfg.IO == IODirect)
	c.scratch.New = func() any { b := make([]byte, cfg.blockSize); return &b }
	go c.load()
	return c, nil
}

// begin registers a ReadAt or Put; it returns false once Close began.
func (c *Cache) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.ops.Add(1)
	return true
}

// IndexLoaded returns a channel that is closed when the start-up index
// load has ended (or was stopped by Close).
func (c *Cache) IndexLoaded() <-chan struct{} { return c.loadDone }

// Dir returns the cache directory's absolute path.
func (c *Cache) Dir() string { return c.dir }

// Pin marks the parts of an object version as in use (its file is open):
// eviction takes them only when no other part is left to take. Pins
// nest; each Pin needs one Unpin. Parts loaded from disk at start are
// known to belong to the object only once they are read or written.
func (c *Cache) Pin(object, etag string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idx.pin(objID{object, etag})
}

// Unpin undoes one Pin. Unpin without a matching Pin panics.
func (c *Cache) Unpin(object, etag string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idx.unpin(objID{object, etag})
}

// Stats returns a snapshot of the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	bytes, parts := c.idx.used, int64(len(c.idx.entries))
	whole := int64(c.idx.wholes)
	parts -= whole
	var pinned int64
	for _, o := range c.idx.objs {
		if o.pins > 0 {
			pinned++
		}
	}
	c.mu.Unlock()
	s := &c.stats
	return Stats{
		Hits:            s.hits.Load(),
		Misses:          s.misses.Load(),
		ReadBytes:       s.readBytes.Load(),
		Puts:            s.puts.Load(),
		PutBytes:        s.putBytes.Load(),
		PutErrors:       s.putErrors.Load(),
		Evictions:       s.evictions.Load(),
		EvictedBytes:    s.evictedBytes.Load(),
		CorruptRemoved:  s.corrupt.Load(),
		ReadErrors:      s.readErrors.Load(),
		NoSpace:         s.noSpace.Load(),
		BoundSkips:      s.boundSkips.Load(),
		Bytes:           bytes,
		Parts:           parts,
		MaxBytes:        c.cfg.MaxBytes,
		PinnedObjects:   pinned,
		IndexLoaded:     s.indexLoaded.Load(),
		LoadedParts:     s.loadedParts.Load(),
		StrayFiles:      s.strays.Load(),
		IndexLoadTime:   time.Duration(s.loadNanos.Load()),
		WholeObjects:    whole,
		Promotions:      s.promotions.Load(),
		PromotedBytes:   s.promotedBytes.Load(),
		PromoteErrors:   s.promoteErrors.Load(),
		ObjectOpens:     s.objectOpens.Load(),
		BadObjects:      s.badObjects.Load(),
		DirectBytes:     s.directBytes.Load(),
		DirectReadBytes: s.directReadBytes.Load(),
		BadFilesRemoved: s.badFiles.Load(),
	}
}

// Close stops the index load, fails Puts still waiting for a writer slot
// with ErrClosed, waits for every ReadAt and Put in progress and releases
// the directory lock. No goroutine of the Cache outlives Close. Calls
// after Close return ErrClosed; Close may be called more than once, and
// every call returns when the first has finished.
func (c *Cache) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.cancel()
		c.ops.Wait()
		<-c.loadDone
		if err := c.dirs.close(); err != nil {
			c.closeErr = fmt.Errorf("cache dir %s: unlock: %w", c.dir, err)
		}
	})
	return c.closeErr
}
