package prefetch

import (
	"strings"
	"testing"

	"github.com/segfs/segfs/fetcher"
)

func TestProfileRecordAndWiden(t *testing.T) {
	var p Profile
	const size = 10 << 20
	if p.Record("_0.tim", 500<<10, 0, 100) {
		t.Error("a file no larger than LuceneWhole taught a head")
	}
	if !p.Record("_0.tim", size, 200<<10, 4096) || !p.Record("_1.tim", size, size-300<<10, 4096) || p.Record("_1.tim", size, size-100, 16) {
		t.Error("Record did not grow, or grew, as it should")
	}
	if p.Record("x", size, 0, 10) {
		t.Error("a name without an extension taught something")
	}
	p.Record("_0.fdt", size, 0, 8<<20) // capped
	if e := p.Extents()[".tim"]; e.Head != 200<<10+4096 || e.Tail != 300<<10 {
		t.Errorf(".tim %+v", e)
	}
	if e := p.Extents()[".fdt"]; e.Head != ProfileMax {
		t.Errorf(".fdt %+v, want the head capped at %d", e, ProfileMax)
	}
	d := &Dir{}
	d.Add("segments_2", fetcher.Object{Key: "segments_2", Size: 100})
	d.Add("_0.tim", fetcher.Object{Key: "_0.tim", Size: size})
	d.Add("_0.doc", fetcher.Object{Key: "_0.doc", Size: size})
	plan := LuceneOpen{Profile: &p}.Seen(d, 8<<20)
	lens := map[string][]int64{}
	for _, rg := range plan.Ranges {
		lens[rg.Obj.Key] = append(lens[rg.Obj.Key], rg.Len)
		if want := rg.Obj.Key == "_0.tim"; rg.Learned != want {
			t.Errorf("range %+v: Learned %v, want %v", rg, rg.Learned, want)
		}
	}
	if got := lens["_0.tim"]; len(got) != 2 || got[0] != 200<<10+4096 || got[1] != 300<<10 {
		t.Errorf("_0.tim ranges %v, want the learned head and tail", got)
	}
	if got := lens["_0.doc"]; len(got) != 2 || got[0] != LuceneHead || got[1] != LuceneTail {
		t.Errorf("_0.doc ranges %v, want the built-in ones", got)
	}
}

// A profile is keyed by kind, the name without its segment, so that
// every segment and every shard shares what one taught.
func TestProfileKinds(t *testing.T) {
	for name, want := range map[string]string{
		"_7_Lucene84_0.doc":  "_Lucene84_0.doc",
		"_12_Lucene84_0.doc": "_Lucene84_0.doc",
		"_7.fdt":             ".fdt",
		"idx/0/_a.fdt":       ".fdt",
		"segments_4":         "",
		"notes.txt":          ".txt",
	} {
		if got := Kind(name); got != want {
			t.Errorf("Kind(%q) = %q, want %q", name, got, want)
		}
	}
	var p Profile
	p.Record("shard0/_3.fdt", 10<<20, 10<<20-400<<10, 4096)
	if e := p.extent("shard1/_9.fdt"); e.Tail != 400<<10 {
		t.Errorf("another shard's .fdt extent %+v, want the tail shard 0 taught", e)
	}
}

// Merge widens by another profile and reports growth; the stored form
// round-trips; a record of another version or out of bounds is refused.
func TestProfileMergeAndEncoding(t *testing.T) {
	var a, b Profile
	a.Record("_0.tim", 10<<20, 0, 300<<10)
	b.Record("_0.tim", 10<<20, 10<<20-200<<10, 4096)
	b.Record("_0.fdt", 10<<20, 0, 100<<10)
	if !a.Merge(&b) || a.Merge(&b) {
		t.Error("Merge did not grow once, then not again")
	}
	if e := a.Extents()[".tim"]; e.Head != 300<<10 || e.Tail != 200<<10 {
		t.Errorf("merged .tim %+v", e)
	}
	data, err := MarshalProfile(&a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalProfile(data)
	if err != nil || got.Extents()[".tim"] != a.Extents()[".tim"] || got.Extents()[".fdt"] != a.Extents()[".fdt"] {
		t.Fatalf("round trip: %+v, %v", got.Extents(), err)
	}
	for name, data := range map[string]string{
		"version 1":   `{"source":"s3://b/p","extents":{".tim":{"head":1000}}}`,
		"not JSON":    "{",
		"huge extent": `{"version":2,"extents":{".tim":{"head":99999999999}}}`,
		"bad key":     `{"version":2,"extents":{"tim":{"head":1}}}`,
	} {
		if _, err := UnmarshalProfile([]byte(data)); err == nil || !strings.Contains(err.Error(), "profile") {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
}
