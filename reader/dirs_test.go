package reader

import (
	"testing"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// A directory whose segments_N and .si files are held in memory (a
// snapshot's virtual files) still holds an index: the open-time plan
// covers its segment files, and the inline files have no Place.
func TestDirsInlineIndexFiles(t *testing.T) {
	entries := []Entry{
		{Name: "idx/segments_2", Inline: []byte("segments")},
		{Name: "idx/_0.si", Inline: []byte("si")},
		{Name: "idx/_0.cfs", Obj: fetcher.Object{Key: "__a", Size: 10 << 20}},
		{Name: "idx/_0.cfe", Obj: fetcher.Object{Key: "__b", Size: 400}},
	}
	dirs, places := Dirs(entries)
	d := dirs["idx/"].d
	if d == nil || len(d.Files) != 2 || len(d.Inline) != 2 {
		t.Fatalf("dir %+v, want 2 files and 2 inline names", d)
	}
	if places[0] != (Place{}) || places[1] != (Place{}) || places[2].d != d {
		t.Errorf("places %+v: want none for the inline files", places)
	}
	if !d.HoldsIndex() {
		t.Fatal("a directory with an inline segments_N does not hold an index")
	}
	plan := prefetch.LuceneOpen{}.Seen(d, 8<<20)
	keys := map[string]bool{}
	for _, r := range plan.Ranges {
		keys[r.Obj.Key] = true
	}
	if !keys["__a"] || !keys["__b"] {
		t.Errorf("the open's plan reads %v, want both segment files", keys)
	}
}
