package reader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
)

// Promotion to whole-object files (--passthrough): an object whose parts
// are all cached is copied into one whole-object file (cache.Promote),
// and a later open of it may be handed to the kernel with that file
// (OpenWhole, FUSE passthrough), which then serves the open file's reads
// without a round trip through segfs. Promotion runs in one goroutine,
// one object at a time, after a part of an object is stored and when a
// file is opened or reached by a fill.

// promoter builds whole-object files in the background.
type promoter struct {
	// Constant after newPromoter.
	r      *Reader
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}

	off atomic.Bool // passthrough found unusable: no more promotions

	mu     sync.Mutex
	queue  []fetcher.Object
	queued map[objKey]bool // objects in queue
	skip   map[objKey]bool // objects never promoted: seekable zstd
}

func newPromoter(r *Reader) *promoter {
	ctx, cancel := context.WithCancel(context.Background())
	p := &promoter{
		r:      r,
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
		wake:   make(chan struct{}, 1),
		queued: make(map[objKey]bool),
		skip:   make(map[objKey]bool),
	}
	go p.run()
	return p
}

// never marks obj as never promoted.
func (p *promoter) never(obj fetcher.Object) {
	p.mu.Lock()
	p.skip[keyOfObject(obj)] = true
	p.mu.Unlock()
}

// request queues obj for promotion, unless it is queued already. A nil
// promoter (passthrough is off) does nothing: its whole-object file is
// built once every part is cached.
func (p *promoter) request(obj fetcher.Object) {
	if p == nil || p.off.Load() || obj.Size <= 0 {
		return
	}
	k := keyOfObject(obj)
	p.mu.Lock()
	if p.queued[k] || p.skip[k] {
		p.mu.Unlock()
		return
	}
	p.queued[k] = true
	p.queue = append(p.queue, obj)
	p.r.stats.PromotePending.Add(1)
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
			delete(p.queued, keyOfObject(obj))
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
			p.r.stats.PromotePending.Add(-1)
			continue
		}
		err := p.r.wholes.Promote(p.ctx, p.r.cfg.objectKey(obj), p.r.cfg.PartSize)
		p.r.stats.PromotePending.Add(-1)
		switch {
		case err == nil, errors.Is(err, cache.ErrIncomplete), p.ctx.Err() != nil:
		case errors.Is(err, cache.ErrNoSpace):
			p.r.cfg.Logger.Debug("whole-object file not built: no room", "key", obj.Key, "err", err)
		default:
			p.r.cfg.Logger.Warn("whole-object file not built", "key", obj.Key, "err", err)
		}
	}
}

// close cancels a promotion in progress (its temporary file is removed)
// and waits for the goroutine to end.
func (p *promoter) close() {
	p.cancel()
	<-p.done
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
