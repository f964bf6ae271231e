package prefetch

import (
	"fmt"
	"slices"
	"testing"

	"github.com/segfs/segfs/fetcher"
)

// luceneDir is a two-segment index directory with a stray file.
func luceneDir() *Dir {
	d := &Dir{}
	for _, f := range []struct {
		name string
		size int64
	}{
		{"_1.tim", 50 << 20}, {"_1.si", 400}, {"_0.fdt", 300 << 20}, {"_0.fnm", 2000}, {"_0.si", 400},
		{"_1.fnm", 2000}, {"segments_4", 900}, {"_0.tip", 2 << 20}, {"_0.dvm", 700}, {"README", 100}, {"_a.si", 400},
	} {
		d.Add(f.name, fetcher.Object{Key: "blob/" + f.name, Size: f.size})
	}
	return d
}

// LuceneOpen queues, for a directory holding an index, every small file
// whole and the head and tail of every larger one, in the order an open
// reads them, at readahead priority; nothing for another directory.
func TestLuceneOpenPlan(t *testing.T) {
	p := LuceneOpen{}.Seen(luceneDir(), 8<<20)
	var got []string
	if len(p.Parts) != 0 {
		t.Errorf("parts %+v: everything goes to the range tier", p.Parts)
	}
	for _, rg := range p.Ranges {
		if rg.Prio != Readahead {
			t.Errorf("range %+v: want readahead", rg)
		}
		switch {
		case rg.Off == 0 && rg.Len == rg.Obj.Size:
			got = append(got, "whole "+rg.Obj.Key[5:])
		case rg.Off == 0 && rg.Len == LuceneHead:
			got = append(got, "head "+rg.Obj.Key[5:])
		case rg.Off == rg.Obj.Size-LuceneTail && rg.Len == LuceneTail:
			got = append(got, "tail "+rg.Obj.Key[5:])
		default:
			t.Errorf("range %+v is neither a head nor a tail", rg)
		}
	}
	want := []string{
		"whole segments_4", "whole _0.si", "whole _0.fnm", "whole _0.dvm", "head _0.fdt", "tail _0.fdt", "head _0.tip", "tail _0.tip",
		"whole _1.si", "whole _1.fnm", "head _1.tim", "tail _1.tim", "whole _a.si",
	}
	if !slices.Equal(got, want) {
		t.Errorf("plan\n%q\nwant\n%q", got, want)
	}
	if len(p.Fills) != 0 {
		t.Errorf("fills %+v: the bodies are left to reads and the other policies", p.Fills)
	}
	plain := &Dir{}
	plain.Add("notes.txt", fetcher.Object{Key: "notes.txt", Size: 5 << 20})
	if p := (LuceneOpen{}).Seen(plain, 8<<20); len(p.Parts)+len(p.Ranges) != 0 {
		t.Errorf("a directory with no index planned %+v", p)
	}
}

// An open reads segment _9 before _10 (base 36 names, shorter first).
func TestLuceneOpenOrderOfSegments(t *testing.T) {
	names := []string{"_10.si", "_9.si", "_a.si", "_1_Lucene90_0.dvd", "_1.si", "segments_a"}
	slices.SortFunc(names, compareOpenOrder)
	if want := []string{"segments_a", "_1.si", "_1_Lucene90_0.dvd", "_9.si", "_a.si", "_10.si"}; !slices.Equal(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
	if d := luceneDir(); !d.FirstSeen() || d.FirstSeen() {
		t.Error(fmt.Sprint("FirstSeen is not true once, then false"))
	}
}
