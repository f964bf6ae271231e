package main

import "testing"

func TestRangesOf(t *testing.T) {
	log := `{"time":"t","level":"INFO","msg":"mounted"}
{"time":"t","level":"DEBUG","msg":"range fetch","key":"lucene/_0.fdt","off":0,"len":1048576}
not json, but it says range fetch
{"time":"t","level":"DEBUG","msg":"range fetch","key":"lucene/segments_1","off":64,"len":728}
`
	got, err := rangesOf(log)
	want := []span{{"lucene/_0.fdt", 0, 1 << 20}, {"lucene/segments_1", 64, 728}}
	if err != nil || len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("rangesOf = %v, %v; want %v", got, err, want)
	}
	if _, err := rangesOf(`{"msg":"range fetch","key":"","off":0,"len":5}`); err == nil {
		t.Error("a range fetch line without a key was taken")
	}
	if !sameSpans(want, []span{want[1], want[0]}) || sameSpans(want, want[:1]) || sameSpans(want, []span{want[0], {"lucene/segments_1", 0, 728}}) {
		t.Error("sameSpans is not equality of the sets of spans")
	}
}
