package entry

import (
	"slices"
	"testing"
	"time"
)

// A dropped name stays until its time, and goes at it, when it is back
// in the listing, or when a new listing's directory or file is in its
// way; with no keep nothing stays.
func TestGrace(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	const keep = time.Minute
	var g Grace
	old := []Entry{ent("_0.cfs", "1", 10), ent("segments_1", "1", 5), ent("x", "1", 1), ent("d/y", "1", 1)}
	shown := []Entry{ent("_1.cfs", "2", 10), ent("segments_2", "2", 5)}
	visible, next := g.Apply(old, shown, keep, t0)
	want := []string{"_1.cfs", "segments_2", "_0.cfs", "d/y", "segments_1", "x"}
	if !slices.Equal(names(visible), want) || !next.Equal(t0.Add(keep)) || g.Len() != 4 {
		t.Fatalf("visible %v next %v kept %d; want %v, %v, 4", names(visible), next, g.Len(), want, t0.Add(keep))
	}
	// Later: x is back, a file "d" takes the directory of d/y, a
	// directory "segments_1/" takes that name; _0.cfs stays.
	shown2 := []Entry{ent("_1.cfs", "2", 10), ent("segments_2", "2", 5), ent("x", "3", 2), ent("d", "3", 1), ent("segments_1/z", "3", 1)}
	visible, next = g.Apply(visible, shown2, keep, t0.Add(time.Second))
	want = []string{"_1.cfs", "segments_2", "x", "d", "segments_1/z", "_0.cfs"}
	if !slices.Equal(names(visible), want) || !next.Equal(t0.Add(keep)) {
		t.Errorf("visible %v next %v; want %v, %v", names(visible), next, want, t0.Add(keep))
	}
	// The first drop's time keeps: a name kept is not kept longer by a
	// later listing that lacks it too.
	visible, next = g.Apply(visible, shown2, keep, t0.Add(keep))
	if !slices.Equal(names(visible), names(shown2)) || !next.IsZero() || g.Len() != 0 {
		t.Errorf("at the due time: visible %v next %v kept %d; want the listing alone", names(visible), next, g.Len())
	}
	var none Grace
	if visible, next := none.Apply(old, shown, 0, t0); !slices.Equal(names(visible), names(shown)) || !next.IsZero() {
		t.Errorf("with no keep: %v %v", names(visible), next)
	}
}
