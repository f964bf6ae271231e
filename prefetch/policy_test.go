package prefetch

import (
	"fmt"
	"slices"
	"testing"

	"github.com/segfs/segfs/fetcher"
)

func objs(sizes ...int64) []fetcher.Object {
	out := make([]fetcher.Object, len(sizes))
	for i, s := range sizes {
		out[i] = fetcher.Object{Key: fmt.Sprintf("f%02d", i), Size: s}
	}
	return out
}

func keys(os []fetcher.Object) []string {
	var out []string
	for _, o := range os {
		out = append(out, o.Key)
	}
	return out
}

func TestPoliciesOfEachMode(t *testing.T) {
	for mode, want := range map[Mode][]Policy{
		None: nil,
		Open: {OnOpen{}, SmallAfter{N: SmallAhead}},
		All:  {OnOpen{}, Sweep{}},
	} {
		if got := Policies(mode, false, Kernel{}, nil); !slices.Equal(got, want) {
			t.Errorf("Policies(%q) = %v, want %v", mode, got, want)
		}
		withIndex := []Policy{LuceneOpen{}}
		for _, p := range want {
			if _, ok := p.(OnOpen); ok {
				p = OnOpen{IndexHeads: true}
			}
			withIndex = append(withIndex, p)
		}
		if got := Policies(mode, true, Kernel{}, nil); !slices.Equal(got, withIndex) {
			t.Errorf("Policies(%q, segments) = %v, want LuceneOpen first, then %v", mode, got, want)
		}
	}
}

// OnOpen starts the opened file's first part ahead and fills it once, in
// its own group; an empty file has no first part.
func TestOnOpen(t *testing.T) {
	dir := &Dir{Files: objs(5000, 0)}
	p := OnOpen{}.Opened(dir, 0, 1000)
	if len(p.Parts) != 1 || p.Parts[0] != (Part{Obj: dir.Files[0], Index: 0, Prio: Readahead}) {
		t.Errorf("parts %+v, want the first part at readahead", p.Parts)
	}
	if len(p.Fills) != 1 || p.Fills[0].Group != "f00" || !p.Fills[0].Once || !slices.Equal(keys(p.Fills[0].Objects), []string{"f00"}) {
		t.Errorf("fills %+v, want one fill of f00 in its own group, once", p.Fills)
	}
	if p := (OnOpen{}).Opened(dir, 1, 1000); len(p.Parts) != 0 {
		t.Errorf("an empty file starts %+v", p.Parts)
	}
	if p := (OnOpen{}).Mounted(dir.Files, 1000); len(p.Parts)+len(p.Fills) != 0 {
		t.Errorf("OnOpen plans %+v at mount", p)
	}
}

// SmallAfter fills the first N files of one part or less after the
// opened one, in listing order, each in its own group.
func TestSmallAfter(t *testing.T) {
	dir := &Dir{}
	for _, o := range objs(500, 5000, 1000, 3000, 10, 0, 999, 1001, 7) {
		dir.Add(o.Key, o)
	}
	for _, tc := range []struct {
		i, n int
		want []string
	}{
		{0, 32, []string{"f02", "f04", "f05", "f06", "f08"}},
		{0, 2, []string{"f02", "f04"}},
		{3, 32, []string{"f04", "f05", "f06", "f08"}},
		{8, 32, nil},
	} {
		p := SmallAfter{N: tc.n}.Opened(dir, tc.i, 1000)
		var got []string
		for _, f := range p.Fills {
			if len(f.Objects) != 1 || f.Group != f.Objects[0].Key || !f.Once {
				t.Errorf("fill %+v: want one object in its own group, once", f)
			}
			got = append(got, keys(f.Objects)...)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("after %d, %d at most: %v, want %v", tc.i, tc.n, got, tc.want)
		}
	}
}

// Sweep fills everything once as one group: small files smallest first,
// then the large ones in listing order.
func TestSweep(t *testing.T) {
	files := objs(5000, 700, 2000, 10, 1000, 9000)
	p := Sweep{}.Mounted(files, 1000)
	if len(p.Fills) != 1 || p.Fills[0].Group != SweepGroup || !p.Fills[0].Once {
		t.Fatalf("fills %+v, want one sweep", p.Fills)
	}
	if got, want := keys(p.Fills[0].Objects), []string{"f03", "f01", "f04", "f00", "f02", "f05"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if p := (Sweep{}).Opened(&Dir{Files: files}, 0, 1000); len(p.Fills) != 0 {
		t.Errorf("Sweep plans %+v at an open", p)
	}
}

// A cursor walks every part of each object in turn.
func TestCursor(t *testing.T) {
	c := NewCursor(objs(1, 2), 3)
	var got []string
	for {
		o, ok := c.Object()
		if !ok {
			break
		}
		if c.Part() > 4 {
			c.Skip()
			continue
		}
		got = append(got, fmt.Sprintf("%s/%d", o.Key, c.Take()))
	}
	if want := []string{"f00/3", "f00/4", "f01/0", "f01/1", "f01/2", "f01/3", "f01/4"}; !slices.Equal(got, want) {
		t.Errorf("cursor walked %v, want %v", got, want)
	}
}

// With IndexHeads, a file of an index directory gets its fill but no
// first part ahead: its head is LuceneOpen's.
func TestOnOpenInAnIndexDirectory(t *testing.T) {
	idx := luceneDir()
	if p := (OnOpen{IndexHeads: true}).Opened(idx, 2, 8<<20); len(p.Parts) != 0 || len(p.Fills) != 1 {
		t.Errorf("index directory: %+v, want only the fill", p)
	}
	if p := (OnOpen{}).Opened(idx, 2, 8<<20); len(p.Parts) != 1 {
		t.Errorf("without IndexHeads: %+v, want the first part ahead", p)
	}
	plain := &Dir{}
	plain.Add("data.bin", fetcher.Object{Key: "data.bin", Size: 5 << 20})
	if p := (OnOpen{IndexHeads: true}).Opened(plain, 0, 8<<20); len(p.Parts) != 1 {
		t.Errorf("plain directory: %+v, want the first part ahead", p)
	}
}
