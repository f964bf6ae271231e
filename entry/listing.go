package entry

import (
	"bytes"
	"log/slog"
	"path"
)

// Shown returns the entries a tree of entries shows, in their order:
// those whose name is usable (ValidName) and not also a
// directory's. Each one left out is logged once. Only usable names imply
// directories, so a key such as "a//b" or "a/.." hides nothing but
// itself. A mount shows these; a command that writes the files out
// (segfs restore) writes these, so it never writes what a mount would
// not show.
func Shown(entries []Entry, log *slog.Logger) []Entry {
	out := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if !ValidName(e.Name) {
			log.Warn("skipping object with an unusable name", "key", e.Obj.Key)
			continue
		}
		out = append(out, e)
	}
	dirs := DirSet(out)
	kept := out[:0]
	for _, e := range out {
		if dirs[e.Name] {
			log.Warn("skipping object whose name is also a directory", "key", e.Obj.Key)
			continue
		}
		kept = append(kept, e)
	}
	return kept
}

// DirSet returns the set of every directory path implied by the names.
func DirSet(entries []Entry) map[string]bool {
	dirs := make(map[string]bool)
	for _, e := range entries {
		for dir := path.Dir(e.Name); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if dirs[dir] {
				break
			}
			dirs[dir] = true
		}
	}
	return dirs
}

// Change is what a new listing does to a mount's files: the names it
// adds, the names whose object it replaces by another version, and the
// names it removes. Added and Changed are in the new listing's order,
// Removed in the old one's.
type Change struct {
	Added   []Entry
	Changed []Entry
	Removed []string
}

// Empty reports whether the change leaves the tree as it is.
func (c Change) Empty() bool { return len(c.Added)+len(c.Changed)+len(c.Removed) == 0 }

// Diff returns the change from the files old to the files now, both as
// Shown returns them (unique names). A name is changed when its object
// is another version: another key, ETag or size, another form (raw,
// seekable zstd or inline), or other inline bytes. A version is
// immutable, so a name whose version is the same is kept as it is: its
// node, inode number, cached pages and open handles.
func Diff(old, now []Entry) Change {
	before := make(map[string]*Entry, len(old))
	for i := range old {
		before[old[i].Name] = &old[i]
	}
	var c Change
	seen := make(map[string]bool, len(now))
	for _, e := range now {
		seen[e.Name] = true
		o, ok := before[e.Name]
		switch {
		case !ok:
			c.Added = append(c.Added, e)
		case !sameVersion(*o, e):
			c.Changed = append(c.Changed, e)
		}
	}
	for _, e := range old {
		if !seen[e.Name] {
			c.Removed = append(c.Removed, e.Name)
		}
	}
	return c
}

// sameVersion reports whether a and b show the same bytes for good.
func sameVersion(a, b Entry) bool {
	return a.Obj.Key == b.Obj.Key && a.Obj.ETag == b.Obj.ETag && a.Obj.Size == b.Obj.Size &&
		(a.Table == nil) == (b.Table == nil) && (a.Inline == nil) == (b.Inline == nil) && bytes.Equal(a.Inline, b.Inline)
}
