package reader

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// The engine's interface to the FUSE edge: Serve once with the files the
// mount shows, Open a Handle per open file, Read through it (into the
// caller's buffer, or from a borrowed part buffer with its release), and
// Close it. The edge never sees parts, calls or streams.

// Serve is called once the mount serves files, with every file it shows
// in listing order. A seekable zstd object is never promoted to a
// whole-object file (its file shows its decompressed bytes). Then the
// prefetch policies' Mounted plans run (the --prefetch all sweep);
// queuing is quick, the fetches run on the pool.
func (r *Reader) Serve(entries []Entry) {
	files := make([]fetcher.Object, 0, len(entries))
	for _, e := range entries {
		if e.Inline != nil {
			continue
		}
		files = append(files, e.Obj)
		if e.Table != nil && r.whole != nil {
			r.whole.never(e.Obj)
		}
	}
	for _, p := range r.policies {
		r.runPlan(p.Mounted(files, r.cfg.PartSize))
	}
}

// Handle is one open file: its entry, its reads' access pattern (for
// readahead and the stream it may start), and the bytes its reads
// returned. Its methods may be called concurrently (the kernel sends
// several reads of one handle at once), Close once after the last read.
type Handle struct {
	r       *Reader
	entry   Entry
	dir     *prefetch.Dir // its directory, nil if unknown
	lastEnd atomic.Int64  // where its last read ended, for the open profile
	seq     prefetch.Sequence
	served  atomic.Int64 // bytes its reads returned
	closed  sync.Once
}

// Open opens e, the file at p (Dirs), for reads. Its parts are evicted
// from the disk cache last while it is open. With served, its reads come
// to segfs, and the prefetch policies' Opened plans run; a handle the
// edge gave the kernel a whole-object file for (OpenWhole) is opened with
// served false.
func (r *Reader) Open(e Entry, p Place, served bool) *Handle {
	dir, i := p.d, p.i
	r.stats.OpenHandles.Add(1)
	h := &Handle{r: r, entry: e, dir: dir}
	if e.Inline != nil {
		return h // nothing to pin, fetch or build
	}
	r.pins.Pin(e.Obj.Key, e.Obj.ETag)
	if e.Table != nil && r.whole != nil {
		r.whole.never(e.Obj) // before its fill can ask for a build; Serve may not have run yet
	}
	if !served {
		return h
	}
	if dir != nil {
		r.seenDir(dir)
		if r.cfg.SegmentPrefetch && dir.HoldsIndex() {
			r.rtier.opened() // before the plans: their fills wait for the open
		}
		for _, pol := range r.policies {
			r.runPlan(pol.Opened(dir, i, r.cfg.PartSize))
		}
	}
	if e.Table == nil {
		r.whole.request(e.Obj) // built now if every part is cached
	}
	return h
}

// Read reads up to len(dest) bytes of the file at off. It returns the
// bytes, in dest or, with a non-nil release, in a part's own buffer that
// stays valid until release is called (ReadAtRef). A read at or past the
// end returns no bytes.
func (h *Handle) Read(ctx context.Context, dest []byte, off int64) (data []byte, release func(), err error) {
	start := time.Now()
	ctx, tier := withTier(ctx)
	switch {
	case off < 0:
		return nil, nil, fmt.Errorf("read %s at %d: negative offset", h.entry.Name, off)
	case h.entry.Inline != nil:
		markTier(ctx, TierMemory)
		data = dest[:copy(dest, h.entry.Inline[min(off, int64(len(h.entry.Inline))):])]
	case h.entry.Table != nil:
		data, err = h.r.frames.ReadAt(ctx, h.entry, dest, off, &h.seq)
	default:
		data, release, err = h.r.ReadAtRef(ctx, h.entry.Obj, dest, off, &h.seq)
	}
	if err == nil && len(data) > 0 { // a read at the end touched no tier
		h.r.stats.ReadLatency[tier.get()].Since(start)
		if log := h.r.cfg.Logger; log.Enabled(ctx, slog.LevelDebug) {
			log.Debug("read", "name", h.entry.Name, "off", off, "len", len(data), "tier", tier.get(), "took", time.Since(start))
		}
		h.served.Add(int64(len(data)))
		if h.entry.Inline == nil && len(data) > 0 {
			h.r.learned.learn(h, off, int64(len(data)))
		}
	}
	return data, release, err
}

// ReadWhole reports whether the file's pages may leave the kernel's page
// cache once this handle closes (Config.DropAfterRead): its reads
// returned at least the file's size, and the file is larger than a part.
func (h *Handle) ReadWhole() bool {
	size := h.entry.Size()
	return h.r.cfg.DropAfterRead && size > h.r.cfg.PartSize && h.served.Load() >= size
}

// Close ends the handle: the Reader stops following its stream (its
// taken-back fetches are queued again) and unpins its parts. Later calls
// do nothing.
func (h *Handle) Close() {
	h.closed.Do(func() {
		if h.entry.Inline == nil {
			h.r.cursors.endStream(h.entry.Obj, &h.seq)
			h.r.pins.Unpin(h.entry.Obj.Key, h.entry.Obj.ETag)
		}
		h.r.stats.OpenHandles.Add(-1)
	})
}

// OpenWhole returns e's sealed whole-object file, if passthrough is on
// and the cache has one; the edge hands it to the kernel, which then
// serves the open file's reads itself.
func (r *Reader) OpenWhole(e Entry) (*os.File, bool) {
	if !r.Passthrough() || e.Table != nil || e.Inline != nil || e.Obj.Size <= 0 {
		return nil, false
	}
	f, ok := r.wholes.OpenObject(r.cfg.objectKey(e.Obj))
	if ok {
		r.stats.PassthroughOpens.Add(1)
	}
	return f, ok
}
