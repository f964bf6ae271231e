package reader

import (
	"context"
	"sync"
)

// arrival is the bytes of one range fetch's buffer as they come in, so
// that a read joining the fetch takes its bytes once they are in, not at
// the fetch's end: a buffered open reads 16 KiB of a head fetched a MiB
// wide for a mapped open's faults, and a GET's first bytes arrive a
// latency after it starts, its last ones its length at one connection's
// rate later.
//
// A byte counts as in once the fetch's GET has put it in the buffer from
// a response checked against the pinned ETag
// (fetcher.ReadRangeProgress): it is final, even if the GET fails later.
// After a failure (end(false)) nothing more is taken. The range tier's
// buffers are never recycled, so a reader's bytes stay as they were.
// Part fetches do not use it: a stream reading a part as it arrives cost
// case 1 more CPU than it saved (docs/BENCH.md). mu is a leaf lock.
type arrival struct {
	mu      sync.Mutex
	buf     []byte // the fetch's buffer; nil until it starts
	prefix  int    // INVARIANT: buf[:prefix] is in
	ended   bool   // the fetch returned
	failed  bool   // it failed: nothing more is taken
	waiters []arrivalWait
}

// arrivalWait is a reader waiting for buf[:hi].
type arrivalWait struct {
	hi int
	ch chan struct{} // closed once the bytes are in or the fetch ended
}

// taken is what take gave a reader: the bytes (nil if none), whether
// it waited for them, and whether the fetch had not returned yet.
type taken struct {
	data   []byte
	waited bool
	early  bool
}

// start records the fetch's buffer, before its GET.
func (a *arrival) start(buf []byte) {
	a.mu.Lock()
	a.buf = buf
	a.mu.Unlock()
}

// filled records that buf[:n] is in: the GET's progress. It wakes the
// readers whose bytes are in.
func (a *arrival) filled(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prefix = max(a.prefix, n)
	kept := a.waiters[:0]
	for _, w := range a.waiters {
		if a.inLocked(w.hi) {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(a.waiters[len(kept):])
	a.waiters = kept
}

// end records the fetch's end: with ok every byte is in; without,
// nothing more is taken. It wakes every reader.
func (a *arrival) end(ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ended = true
	if ok {
		a.prefix = len(a.buf)
	} else {
		a.failed = true
	}
	for _, w := range a.waiters {
		close(w.ch)
	}
	a.waiters = nil
}

// inLocked reports whether buf[:hi] is in. a.mu must be held.
func (a *arrival) inLocked(hi int) bool {
	return a.buf != nil && !a.failed && hi >= 0 && hi <= a.prefix
}

// takeLocked returns buf[:hi] if it is in. a.mu must be held.
func (a *arrival) takeLocked(hi int, waited bool) taken {
	if !a.inLocked(hi) {
		return taken{waited: waited}
	}
	return taken{data: a.buf[:hi:hi], waited: waited, early: !a.ended}
}

// take returns buf[:hi] once it is in, waiting for it. It returns no
// bytes if done closes or the fetch fails first, and ctx's error if ctx
// ends first.
func (a *arrival) take(ctx context.Context, hi int, done <-chan struct{}) (taken, error) {
	a.mu.Lock()
	if t := a.takeLocked(hi, false); t.data != nil || a.ended {
		a.mu.Unlock()
		return t, nil
	}
	w := arrivalWait{hi: hi, ch: make(chan struct{})}
	a.waiters = append(a.waiters, w)
	a.mu.Unlock()
	select {
	case <-w.ch:
	case <-done:
	case <-ctx.Done():
		return taken{waited: true}, ctx.Err()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.takeLocked(hi, true), nil
}
