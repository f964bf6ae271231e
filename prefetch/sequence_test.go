package prefetch

import "testing"

func TestSequenceWindowAndAhead(t *testing.T) {
	var s Sequence
	const max = 8
	// Sequential reads from the start: the window doubles up to max, and
	// each part is issued for readahead once.
	steps := []struct {
		off, end int64
		window   int
		from, to int64 // readahead issued, for a part size of 100
		last     int64
	}{
		{0, 50, 0, 0, 0, 0}, // one read is not yet a sequence
		{50, 100, 1, 1, 1, 0},
		{100, 150, 2, 2, 3, 1},
		{150, 200, 4, 4, 5, 1},
		{200, 250, 8, 6, 10, 2},
		{250, 300, 8, 11, 10, 2}, // nothing new to issue
	}
	for i, st := range steps {
		w, streaming := s.Observe(st.off, st.end, max)
		if w != st.window || !streaming {
			t.Fatalf("step %d: window %d streaming %v, want %d and true (a stream from the start)", i, w, streaming, st.window)
		}
		if w == 0 {
			continue // the reader issues no readahead
		}
		from, to := s.Ahead(st.last, int64(w))
		if from != st.from || to != st.to {
			t.Fatalf("step %d: ahead [%d,%d], want [%d,%d]", i, from, to, st.from, st.to)
		}
	}
	// A seek resets the window and what was issued.
	if w, streaming := s.Observe(50<<20, 50<<20+50, max); w != 0 || streaming {
		t.Fatalf("after a seek: window %d streaming %v, want 0 and false", w, streaming)
	}
	if w, streaming := s.Observe(50<<20+50, 50<<20+100, max); w != 0 || streaming {
		t.Fatalf("one sequential read after the seek: window %d streaming %v, want 0 and false (not yet a stream)", w, streaming)
	}
	if w, streaming := s.Observe(50<<20+100, 50<<20+150, max); w != 1 || !streaming {
		t.Fatalf("two sequential reads after the seek: window %d streaming %v, want 1 and true", w, streaming)
	}
	if from, to := s.Ahead(50, 1); from != 51 || to != 51 {
		t.Fatalf("ahead after a seek [%d,%d], want [51,51]", from, to)
	}
}

// A random reader's reads that land near the one before, one at a time,
// never open the window.
func TestSequenceIgnoresChanceNeighbours(t *testing.T) {
	var s Sequence
	offs := []int64{100 << 20, 100<<20 + 3<<20, 300 << 20, 7 << 20, 7<<20 - 2<<20, 250 << 20, 0, 180 << 20}
	for _, off := range offs {
		if w, streaming := s.Observe(off, off+4096, 8); w != 0 || streaming {
			t.Fatalf("read at %d: window %d streaming %v, want 0 and false", off, w, streaming)
		}
	}
}
