package reader

import (
	"context"
	"sync"
)

// arrival is the bytes of one fetch's buffer as they come in, so that a
// reader of a fetch in flight takes its bytes once they are in, not at
// the fetch's end: a buffered open reads 16 KiB of a head fetched a MiB
// wide, a search reads 4 KiB of a part fetched 8 MiB wide, and a GET's
// first bytes arrive a latency after it starts, its last ones its
// length at one connection's rate later.
//
// A byte counts as in once the fetch's GET has put it in the buffer
// from a response checked against the pinned ETag
// (fetcher.ReadRangeProgress): it is final, even if the GET fails
// later. After a failure (end(false)) no more bytes are taken, and the
// buffer is not recycled if a reader took any (end says so). mu is a
// leaf lock.
type arrival struct {
	mu      sync.Mutex
	buf     []byte   // the fetch's buffer; nil until it starts
	prefix  int      // INVARIANT: buf[:prefix] is in
	spans   [][2]int // further spans of buf that are in (the ranges of a split fetch)
	ended   bool     // the fetch returned
	failed  bool     // it failed: nothing more is taken
	took    bool     // a reader took bytes before the fetch returned
	waiters []arrivalWait
}

// arrivalWait is a reader waiting for buf[lo:hi].
type arrivalWait struct {
	lo, hi int
	ch     chan struct{} // closed once the bytes are in or the fetch ended
}

// start records the fetch's buffer, before its GETs.
func (a *arrival) start(buf []byte) {
	a.mu.Lock()
	a.buf = buf
	a.mu.Unlock()
}

// filled records that buf[:n] is in: the progress of the fetch's first
// GET.
func (a *arrival) filled(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prefix = max(a.prefix, n)
	a.wakeLocked()
}

// spanIn records that buf[lo:hi] is in: a range of a split fetch.
func (a *arrival) spanIn(lo, hi int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.spans = append(a.spans, [2]int{lo, hi})
	a.wakeLocked()
}

// end records the fetch's end: with ok every byte is in; without,
// nothing more is taken. It wakes every reader and reports whether one
// took bytes before it: the buffer must then not be recycled.
func (a *arrival) end(ok bool) (took bool) {
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
	return a.took
}

// inLocked reports whether buf[lo:hi] is in. a.mu must be held.
func (a *arrival) inLocked(lo, hi int) bool {
	if a.buf == nil || a.failed || lo < 0 || lo > hi || hi > len(a.buf) {
		return false
	}
	lo = max(lo, a.prefix)
	for lo < hi {
		next := lo
		for _, s := range a.spans {
			if s[0] <= lo && s[1] > lo {
				next = s[1]
				break
			}
		}
		if next == lo {
			return false
		}
		lo = next
	}
	return true
}

// wakeLocked wakes the readers whose bytes are in. a.mu must be held.
func (a *arrival) wakeLocked() {
	kept := a.waiters[:0]
	for _, w := range a.waiters {
		if a.inLocked(w.lo, w.hi) {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(a.waiters[len(kept):])
	a.waiters = kept
}

// taken is what take gave a reader: the bytes (nil if none), whether
// it waited for them, and whether the fetch had not returned yet.
type taken struct {
	data   []byte
	waited bool
	early  bool
}

// takeLocked returns buf[lo:hi] if it is in, and notes that a reader
// took it. a.mu must be held.
func (a *arrival) takeLocked(lo, hi int, waited bool) taken {
	if !a.inLocked(lo, hi) {
		return taken{waited: waited}
	}
	if !a.ended {
		a.took = true
	}
	return taken{data: a.buf[lo:hi:hi], waited: waited, early: !a.ended}
}

// take returns buf[lo:hi] once it is in, waiting for it. It returns no
// bytes if done closes or the fetch fails first: the caller then reads
// what the fetch published, or its error. It returns ctx's error if ctx
// ends first.
func (a *arrival) take(ctx context.Context, lo, hi int, done <-chan struct{}) (taken, error) {
	a.mu.Lock()
	if t := a.takeLocked(lo, hi, false); t.data != nil || a.ended {
		a.mu.Unlock()
		return t, nil
	}
	w := arrivalWait{lo: lo, hi: hi, ch: make(chan struct{})}
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
	return a.takeLocked(lo, hi, true), nil
}
