package entry

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/segfs/segfs/fetcher"
)

func ent(name, etag string, size int64) Entry {
	return Entry{Name: name, Obj: fetcher.Object{Key: name, ETag: etag, Size: size}}
}

func names(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

func TestDiff(t *testing.T) {
	inline := ent("idx/segments_2", "", 3)
	inline.Inline = []byte("abc")
	old := []Entry{ent("a", `"1"`, 10), ent("b", `"1"`, 10), ent("c", `"1"`, 10), ent("d", `"1"`, 10), inline}
	newInline := inline
	newInline.Inline = []byte("abd")
	zst := ent("d", `"1"`, 10)
	zst.Obj.Key = "d.zst"
	now := []Entry{
		ent("a", `"1"`, 10), // kept
		ent("b", `"2"`, 10), // another ETag
		ent("c", `"1"`, 11), // another size
		zst,                 // another key: stored compressed now
		newInline,           // other inline bytes
		ent("e", `"1"`, 1),  // new
	}
	c := Diff(old, now)
	if got, want := names(c.Added), []string{"e"}; !slices.Equal(got, want) {
		t.Errorf("added %q, want %q", got, want)
	}
	if got, want := names(c.Changed), []string{"b", "c", "d", "idx/segments_2"}; !slices.Equal(got, want) {
		t.Errorf("changed %q, want %q", got, want)
	}
	if len(c.Removed) != 0 {
		t.Errorf("removed %q, want none", c.Removed)
	}
	c = Diff(now, old[:2])
	if got, want := c.Removed, []string{"c", "d", "idx/segments_2", "e"}; !slices.Equal(got, want) {
		t.Errorf("removed %q, want %q", got, want)
	}
	if c := Diff(old, old); !c.Empty() {
		t.Errorf("the same listing changes %+v", c)
	}
}

func TestUnusableKeysHideOnlyThemselves(t *testing.T) {
	keys := []string{"a", "a//b", "a/.", "a/./b", "a/../x", "d", "d/x", "ok", "/abs", "e/", "nul\x00"}
	var entries []Entry
	for _, k := range keys {
		entries = append(entries, Entry{Name: k, Obj: fetcher.Object{Key: k, ETag: `"e"`, Size: 1}})
	}
	var names []string
	for _, e := range Shown(entries, slog.New(slog.DiscardHandler)) {
		names = append(names, e.Name)
	}
	// "d" is a real directory's name as well as a file's: that file is
	// left out, as before.
	if want := []string{"a", "d/x", "ok"}; !slices.Equal(names, want) {
		t.Fatalf("shown %q, want %q", names, want)
	}
}
