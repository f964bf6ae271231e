package stats

import (
	"sync/atomic"
	"testing"
	"time"
)

type sample struct {
	A     atomic.Int64  `stat:"a_total"`
	B     int64         `stat:"b"`
	C     int           `stat:"c"`
	D     bool          `stat:"d"`
	E     time.Duration `stat:"e_ns"`
	Q     [3]int        `stat:"q0,q1,q2"`
	Plain int64         // not served
}

func TestCollect(t *testing.T) {
	s := &sample{B: 2, C: 3, D: true, E: 5 * time.Nanosecond, Q: [3]int{7, 8, 9}, Plain: 11}
	s.A.Store(1)
	got := map[string]int64{}
	Collect(got, s)
	want := map[string]int64{"a_total": 1, "b": 2, "c": 3, "d": 1, "e_ns": 5, "q0": 7, "q1": 8, "q2": 9}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
}

func TestCollectRefusesDuplicatesAndUnknownTypes(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	mustPanic("duplicate", func() {
		m := map[string]int64{}
		Collect(m, &sample{})
		Collect(m, &sample{})
	})
	mustPanic("string field", func() {
		Collect(map[string]int64{}, struct {
			S string `stat:"s"`
		}{})
	})
	mustPanic("array names", func() {
		Collect(map[string]int64{}, struct {
			Q [2]int `stat:"only"`
		}{})
	})
	mustPanic("not a struct", func() { Collect(map[string]int64{}, 3) })
}

func TestEachKindsAndHistograms(t *testing.T) {
	var v struct {
		N   atomic.Int64  `stat:"n"`
		G   int64         `stat:"g" kind:"gauge"`
		D   time.Duration `stat:"d_ns"`
		H   Histogram     `stat:"h_seconds"`
		Per [2]Histogram  `stat:"per_seconds" label:"tier=a,b"`
	}
	v.H.Observe(time.Millisecond)
	v.Per[1].Observe(2 * time.Second)
	v.Per[1].Observe(time.Hour)
	var got []Counter
	Each(&v, func(c Counter) { got = append(got, c) })
	want := []Counter{{Name: "n"}, {Name: "g", Kind: GaugeKind}, {Name: "d_ns", Nanos: true}}
	if len(got) != len(want) {
		t.Fatalf("Each: %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Each[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	m := map[string]int64{}
	Collect(m, &v)
	if len(m) != 3 {
		t.Errorf("Collect took histograms: %v", m)
	}
	type hist struct {
		name, label, value string
		count              uint64
	}
	var hs []hist
	Histograms(&v, func(name, label, value string, h *Histogram) {
		hs = append(hs, hist{name, label, value, h.Snapshot().Count})
	})
	wantH := []hist{{"h_seconds", "", "", 1}, {"per_seconds", "tier", "a", 0}, {"per_seconds", "tier", "b", 2}}
	if len(hs) != len(wantH) {
		t.Fatalf("Histograms: %+v", hs)
	}
	for i := range wantH {
		if hs[i] != wantH[i] {
			t.Errorf("Histograms[%d] = %+v, want %+v", i, hs[i], wantH[i])
		}
	}
}

func TestHistogramBuckets(t *testing.T) {
	var h Histogram
	h.Observe(Bounds[0])     // on a bound: in that bucket
	h.Observe(Bounds[0] + 1) // just above: the next
	h.Observe(2 * time.Hour) // above the last: +Inf only
	s := h.Snapshot()
	if s.Count != 3 || s.Cumulative[0] != 1 || s.Cumulative[1] != 2 || s.Cumulative[len(Bounds)-1] != 2 {
		t.Errorf("snapshot %+v", s)
	}
	if want := 2*Bounds[0] + 1 + 2*time.Hour; s.Sum != want {
		t.Errorf("sum %v, want %v", s.Sum, want)
	}
}
