package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
)

// Passthrough: an object whose parts are all cached is copied into one
// whole-object file (cache.Promote), and a later open of it hands that
// file to the kernel (FUSE passthrough, Linux 6.9+), which then serves
// the open file's reads without a round trip through segfs. Promotion runs
// in one goroutine, one object at a time, after a part of an object is
// stored and when a file is opened; the open that finds no whole-object
// file, and every open while such an open lasts, is served by segfs as
// usual (the kernel does not mix the two on one file).

// WholeCache is the part of cache.Cache that builds and opens whole-object
// files.
type WholeCache interface {
	Promote(ctx context.Context, k cache.ObjectKey, partSize int64) error
	OpenObject(k cache.ObjectKey) (*os.File, bool)
}

// promoter builds whole-object files in the background.
type promoter struct {
	cache  WholeCache
	reader *Reader
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}
	off    atomic.Bool // passthrough found unusable: no more promotions

	opens   atomic.Int64 // opens handed to the kernel
	pending atomic.Int64 // objects queued or being promoted

	mu     sync.Mutex
	queue  []fetcher.Object
	queued map[partKey]bool // objects (idx -1) in queue
	skip   map[partKey]bool // objects (idx -1) never promoted: seekable zstd
}

func newPromoter(r *Reader, wc WholeCache) *promoter {
	ctx, cancel := context.WithCancel(context.Background())
	p := &promoter{
		cache:  wc,
		reader: r,
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
		wake:   make(chan struct{}, 1),
		queued: make(map[partKey]bool),
		skip:   make(map[partKey]bool),
	}
	go p.run()
	return p
}

// request queues obj for promotion, unless it is queued already.
func (p *promoter) request(obj fetcher.Object) {
	if p.off.Load() || obj.Size <= 0 {
		return
	}
	k := keyOf(obj, -1)
	p.mu.Lock()
	if p.queued[k] || p.skip[k] {
		p.mu.Unlock()
		return
	}
	p.queued[k] = true
	p.queue = append(p.queue, obj)
	p.pending.Add(1)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *promoter) run() {
	defer close(p.done)
	for {
		p.mu.Lock()
		var obj fetcher.Object
		ok := len(p.queue) > 0
		if ok {
			obj = p.queue[0]
			p.queue = p.queue[1:]
			delete(p.queued, keyOf(obj, -1))
		}
		p.mu.Unlock()
		if !ok {
			select {
			case <-p.wake:
				continue
			case <-p.ctx.Done():
				return
			}
		}
		if p.off.Load() {
			p.pending.Add(-1)
			continue
		}
		err := p.cache.Promote(p.ctx, p.reader.objectKey(obj), p.reader.cfg.PartSize)
		p.pending.Add(-1)
		switch {
		case err == nil, errors.Is(err, cache.ErrIncomplete), p.ctx.Err() != nil:
		case errors.Is(err, cache.ErrNoSpace):
			p.reader.cfg.Logger.Debug("whole-object file not built: no room", "key", obj.Key, "err", err)
		default:
			p.reader.cfg.Logger.Warn("whole-object file not built", "key", obj.Key, "err", err)
		}
	}
}

// close cancels a promotion in progress (its temporary file is removed)
// and waits for the goroutine to end.
func (p *promoter) close() {
	p.cancel()
	<-p.done
}

func (r *Reader) objectKey(obj fetcher.Object) cache.ObjectKey {
	return cache.ObjectKey{Source: r.cfg.Source, Object: obj.Key, ETag: obj.ETag, Size: obj.Size}
}

// Passthrough reports whether opens may be handed to the kernel.
func (r *Reader) Passthrough() bool { return r.whole != nil && !r.whole.off.Load() }

// DisablePassthrough turns passthrough off for the rest of the Reader's
// life, when the kernel or the privileges do not allow it.
func (r *Reader) DisablePassthrough() {
	if r.whole != nil {
		r.whole.off.Store(true)
	}
}

// openWhole returns obj's sealed whole-object file, if the cache has one.
func (r *Reader) openWhole(obj fetcher.Object) (*os.File, bool) {
	if !r.Passthrough() || obj.Size <= 0 {
		return nil, false
	}
	f, ok := r.whole.cache.OpenObject(r.objectKey(obj))
	if ok {
		r.whole.opens.Add(1)
	}
	return f, ok
}

// NoPassthrough marks obj as never served in passthrough mode: a
// seekable zstd object, whose file shows its decompressed bytes.
func (r *Reader) NoPassthrough(obj fetcher.Object) {
	if r.whole != nil {
		r.whole.mu.Lock()
		r.whole.skip[keyOf(obj, -1)] = true
		r.whole.mu.Unlock()
	}
}

// promote asks for obj's whole-object file to be built, if passthrough is
// on; it is built once every part is cached.
func (r *Reader) promote(obj fetcher.Object) {
	if r.whole != nil {
		r.whole.request(obj)
	}
}

// ProbePassthrough checks that the kernel accepts a backing file from the
// cache directory for passthrough on server's connection: that it offered
// passthrough at init, and that this process may register a file (it
// takes CAP_SYS_ADMIN, and a cache directory on a file system that is not
// itself stacked).
func ProbePassthrough(server *fuse.Server, cacheDir string) error {
	if server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return errors.New("the kernel does not offer FUSE passthrough (Linux 6.9 or later)")
	}
	f, err := os.Open(cacheDir + "/lock")
	if err != nil {
		return fmt.Errorf("passthrough probe: %w", err)
	}
	defer f.Close()
	id, errno := server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(f.Fd())})
	if errno != 0 {
		switch errno {
		case syscall.EPERM:
			return errors.New("registering a passthrough file takes CAP_SYS_ADMIN (run as root)")
		case syscall.ELOOP:
			return fmt.Errorf("the file system of %s is itself stacked (overlayfs?); passthrough needs the cache on a plain file system", cacheDir)
		}
		return fmt.Errorf("registering a passthrough file from %s: %w", cacheDir, errno)
	}
	if errno := server.UnregisterBackingFd(id); errno != 0 {
		return fmt.Errorf("unregistering the passthrough probe: %w", errno)
	}
	return nil
}
