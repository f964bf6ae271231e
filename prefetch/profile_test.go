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
	if e := p.Extents[".tim"]; e.Head != 200<<10+4096 || e.Tail != 300<<10 {
		t.Errorf(".tim %+v", e)
	}
	if e := p.Extents[".fdt"]; e.Head != ProfileMax {
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
	}
	if got := lens["_0.tim"]; len(got) != 2 || got[0] != 200<<10+4096 || got[1] != 300<<10 {
		t.Errorf("_0.tim ranges %v, want the learned head and tail", got)
	}
	if got := lens["_0.doc"]; len(got) != 2 || got[0] != LuceneHead || got[1] != LuceneTail {
		t.Errorf("_0.doc ranges %v, want the built-in ones", got)
	}
}

func TestProfileEncoding(t *testing.T) {
	p := &Profile{Source: "s3://b/p", Extents: map[string]Extent{".tim": {Head: 1000, Tail: 2000}}}
	data, err := MarshalProfile(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalProfile(data, "s3://b/p")
	if err != nil || got.Extents[".tim"] != p.Extents[".tim"] {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for name, tc := range map[string]struct {
		data, source string
	}{
		"other source": {string(data), "s3://other"},
		"not JSON":     {"{", "s3://b/p"},
		"huge extent":  {`{"source":"s3://b/p","extents":{".tim":{"head":99999999999}}}`, "s3://b/p"},
		"bad key":      {`{"source":"s3://b/p","extents":{"tim":{"head":1}}}`, "s3://b/p"},
	} {
		if _, err := UnmarshalProfile([]byte(tc.data), tc.source); err == nil || !strings.Contains(err.Error(), "profile") {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
}
