package fs

import "sync"

// Sequence tracks one open file's access pattern to size its readahead.
// The zero value is ready; it may be used concurrently (the kernel sends
// several reads of one handle at once).
type Sequence struct {
	mu      sync.Mutex
	nextOff int64 // where the last read ended
	window  int   // readahead window in parts; 0 after a seek
	started bool
	aheadTo int64 // the last part readahead was issued for; -1 after a seek
}

// seqSlack is how far a read may start from where the previous one ended
// and still count as sequential: the kernel's concurrent readahead
// requests arrive slightly out of order.
const seqSlack = 4 << 20

// observe records a read of [off, end) and returns the readahead window in
// parts: it doubles on every sequential read up to max, and drops to 0 on
// a seek.
func (s *Sequence) observe(off, end int64, max int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	sequential := (!s.started && off == 0) ||
		(s.started && off >= s.nextOff-seqSlack && off <= s.nextOff+seqSlack)
	s.started = true
	if end > s.nextOff || !sequential {
		s.nextOff = end
	}
	switch {
	case !sequential:
		s.window = 0
		s.aheadTo = -1
	case s.window == 0:
		s.window = 1
	default:
		s.window = min(2*s.window, max)
	}
	return s.window
}

// ahead returns the parts to issue readahead for after a read that ended
// in part last with the given window: those in (last, last+window] that
// earlier reads of this sequence did not already issue. from > to means
// none.
func (s *Sequence) ahead(last, window int64) (from, to int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, to = max(last+1, s.aheadTo+1), last+window
	if to > s.aheadTo {
		s.aheadTo = to
	}
	return from, to
}
