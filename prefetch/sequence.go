package prefetch

import "sync"

// Sequence tracks one open file's access pattern to size its readahead.
// The zero value is ready; it may be used concurrently (the kernel sends
// several reads of one handle at once).
type Sequence struct {
	mu      sync.Mutex
	nextOff int64 // where the last read ended
	window  int   // readahead window in parts; 0 after a seek
	run     int   // sequential reads in a row, up to seqRun
	started bool
	// fromStart: the reads since the last seek continue a first read at
	// offset 0.
	fromStart bool
	aheadTo   int64 // the last part readahead was issued for; -1 after a seek
}

// seqSlack is how far a read may start from where the previous one ended
// and still count as sequential: the kernel's concurrent readahead
// requests arrive slightly out of order.
const seqSlack = 4 << 20

// seqRun is how many sequential reads in a row open the readahead window.
// One is not enough: a random reader's next read lands within seqSlack of
// its last one now and then (one read in fifty over a 400 MB file), and
// readahead for it would read a whole part from disk or the remote that
// nobody wants, in the way of the reads that follow. Two in a row by
// chance are rare (one in 2,500 there). A reader from the start of the
// file counts its first read.
const seqRun = 2

// Observe records a read of [off, end). It returns the readahead window in
// parts: 0 until seqRun sequential reads in a row, then 1, doubling on
// every sequential read up to max; a seek drops it to 0. streaming
// reports whether this read belongs to a sequential stream: it continues
// the read before it, and either seqRun reads in a row did so or the
// stream began at offset 0. A single read that lands near the one before
// is not a stream: a random reader does that now and then (see seqRun),
// and so does the kernel's read-around of a page fault in a mapped file,
// which sends a few adjacent reads at once.
func (s *Sequence) Observe(off, end int64, max int) (window int, streaming bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := !s.started && off == 0
	sequential := first ||
		(s.started && off >= s.nextOff-seqSlack && off <= s.nextOff+seqSlack)
	s.started = true
	if end > s.nextOff || !sequential {
		s.nextOff = end
	}
	if !sequential {
		s.window, s.run = 0, 0
		s.aheadTo = -1
		s.fromStart = false
		return 0, false
	}
	if first {
		s.fromStart = true
	}
	s.run = min(s.run+1, seqRun)
	switch {
	case s.run < seqRun:
	case s.window == 0:
		s.window = 1
	default:
		s.window = min(2*s.window, max)
	}
	return s.window, s.run >= seqRun || s.fromStart
}

// Ahead returns the parts to issue readahead for after a read that ended
// in part last with the given window: those in (last, last+window] that
// earlier reads of this sequence did not already issue. from > to means
// none.
func (s *Sequence) Ahead(last, window int64) (from, to int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, to = max(last+1, s.aheadTo+1), last+window
	if to > s.aheadTo {
		s.aheadTo = to
	}
	return from, to
}
