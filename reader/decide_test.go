package reader

import "testing"

// TestChoose is the tier order of a part read, case by case: memory,
// held, the fetch in flight, disk, then the remote.
func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		name         string
		v            partView
		small, retry bool
		want         source
	}{
		{"nothing anywhere", partView{}, false, false, fromFetch},
		{"memory first", partView{memory: true, call: true, disk: true}, false, false, fromMemory},
		{"held before a call", partView{held: true, call: true, callReady: true}, false, false, fromHeld},
		{"a call before the disk", partView{call: true, disk: true}, false, false, fromCall},
		{"disk", partView{disk: true}, false, false, fromDisk},
		{"small: own range, part in the background", partView{}, true, false, fromRangeAndPart},
		{"small: a background call is not waited for", partView{call: true}, true, false, fromRange},
		{"small: a call with its bytes is joined", partView{call: true, callReady: true}, true, false, fromCall},
		{"small: a call a reader waits on is joined", partView{call: true, callWaited: true}, true, false, fromCall},
		{"small: disk before the remote", partView{call: true, disk: true}, true, false, fromDisk},
		{"small: memory", partView{memory: true}, true, false, fromMemory},
		{"retry: own range, not the part again", partView{}, false, true, fromRange},
		{"retry: disk still first", partView{disk: true}, false, true, fromDisk},
		{"retry small: part in the background", partView{}, true, true, fromRangeAndPart},
	} {
		if got := choose(tc.v, tc.small, tc.retry); got != tc.want {
			t.Errorf("%s: choose(%+v, small %v, retry %v) = %v, want %v", tc.name, tc.v, tc.small, tc.retry, got, tc.want)
		}
	}
}

// TestPlanRead: which parts a logical read spans, which it starts before
// waiting, and whether it is small, borrowed or split in parallel.
func TestPlanRead(t *testing.T) {
	cfg := Config{PartSize: 1000, SmallRead: 100}
	for _, tc := range []struct {
		name           string
		size, off, n   int64
		streaming, ref bool
		want           readPlan
	}{
		{"within a part", 10_000, 10, 500, false, false,
			readPlan{end: 510, first: 0, last: 0, startFrom: 1}},
		{"borrowed within a part", 10_000, 10, 500, false, true,
			readPlan{end: 510, first: 0, last: 0, startFrom: 1, borrow: true}},
		{"across parts starts the rest", 10_000, 900, 2200, false, true,
			readPlan{end: 3100, first: 0, last: 3, startFrom: 1}},
		{"clamped to the object", 1500, 1200, 1000, false, false,
			readPlan{end: 1500, first: 1, last: 1, startFrom: 2}},
		{"small", 10_000, 10, 50, false, true,
			readPlan{end: 60, first: 0, last: 0, small: true, startFrom: 1}},
		{"small across a border: parallel, nothing started", 10_000, 980, 40, false, false,
			readPlan{end: 1020, first: 0, last: 1, small: true, startFrom: 2, parallel: true}},
		{"small but streaming waits for its part", 10_000, 10, 50, true, true,
			readPlan{end: 60, first: 0, last: 0, startFrom: 1, borrow: true}},
		{"small in a short part is not small", 1050, 1010, 20, false, false,
			readPlan{end: 1030, first: 1, last: 1, startFrom: 2}},
	} {
		if got := cfg.planRead(tc.size, tc.off, tc.n, tc.streaming, tc.ref); got != tc.want {
			t.Errorf("%s: planRead(%d, %d, %d) = %+v, want %+v", tc.name, tc.size, tc.off, tc.n, got, tc.want)
		}
	}
}
