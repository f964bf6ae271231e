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
