package prefetch

import (
	"fmt"
	"slices"
	"strings"
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
// reads them, at readahead priority, in one scheduler group; nothing
// for another directory.
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
		if rg.Group != p.Ranges[0].Group || !strings.HasPrefix(rg.Group, OpenGroup) {
			t.Errorf("range %+v: want the open's one group %q", rg, p.Ranges[0].Group)
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
	// segments_N, every .si, then the segments newest first, each by
	// the order its SegmentReader opens its files in.
	want := []string{
		"whole segments_4", "whole _0.si", "whole _1.si", "whole _a.si",
		"whole _1.fnm", "head _1.tim", "tail _1.tim",
		"whole _0.fnm", "head _0.tip", "tail _0.tip", "head _0.fdt", "tail _0.fdt", "whole _0.dvm",
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

// SegmentInfos reads the .si files from _9 to _10 (base 36 names,
// shorter first), and the segments' other files come after all of them.
func TestLuceneOpenOrderOfSegments(t *testing.T) {
	names := []string{"_10.si", "_9.si", "_a.si", "_1_Lucene90_0.dvd", "_1.si", "segments_a"}
	slices.SortFunc(names, compareOpenOrder)
	if want := []string{"segments_a", "_1.si", "_9.si", "_a.si", "_10.si", "_1_Lucene90_0.dvd"}; !slices.Equal(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
	if d := luceneDir(); !d.FirstSeen() || d.FirstSeen() {
		t.Error(fmt.Sprint("FirstSeen is not true once, then false"))
	}
}

// With the kernel's reads of a mount of 1 MiB readahead in 1 MiB
// requests, a large file's head is the first MiB, its tail the window
// a fault of its last page waits for (from 512 KiB before that page,
// page aligned), and a file whose head and tail meet is fetched whole.
func TestLuceneOpenFollowsTheKernel(t *testing.T) {
	k := Kernel{Readahead: 1 << 20, MaxRead: 1 << 20}
	d := &Dir{}
	const big = 10<<20 + 12345
	d.Add("_0.si", fetcher.Object{Key: "_0.si", Size: 400})
	d.Add("_0.fdt", fetcher.Object{Key: "_0.fdt", Size: big})
	d.Add("_0.doc", fetcher.Object{Key: "_0.doc", Size: 1<<20 + 500<<10})
	p := LuceneOpen{Kernel: k}.Seen(d, 8<<20)
	got := map[string][][2]int64{}
	for _, rg := range p.Ranges {
		got[rg.Obj.Key] = append(got[rg.Obj.Key], [2]int64{rg.Off, rg.Len})
	}
	lastPage := int64(big-1) / Page * Page
	tail := lastPage - 512<<10
	if want := [][2]int64{{0, 1 << 20}, {tail, big - tail}}; !slices.Equal(got["_0.fdt"], want) {
		t.Errorf("_0.fdt ranges %v, want %v", got["_0.fdt"], want)
	}
	if tail%Page != 0 || big-tail < 512<<10+1 {
		t.Errorf("tail at %d: not page aligned, or short of the read-around", tail)
	}
	if want := [][2]int64{{0, 1<<20 + 500<<10}}; !slices.Equal(got["_0.doc"], want) {
		t.Errorf("_0.doc ranges %v, want it whole: its head and tail meet", got["_0.doc"])
	}
	// Requests smaller than the readahead: the fault waits for the
	// first request at the head, the last one at the tail.
	small := Kernel{Readahead: 4 << 20, MaxRead: 256 << 10}
	if h := small.head(); h != 256<<10 {
		t.Errorf("head %d with 256 KiB requests, want 256 KiB", h)
	}
	if off := small.tailOff(big); off != lastPage-(256<<10-Page) {
		t.Errorf("tail at %d, want the last request's reach %d", off, lastPage-(256<<10-Page))
	}
}
