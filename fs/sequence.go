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
	case s.window == 0:
		s.window = 1
	default:
		s.window = min(2*s.window, max)
	}
	return s.window
}
