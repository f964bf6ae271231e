package entry

import (
	"maps"
	"path"
	"slices"
	"time"
)

// Grace holds the names that newer listings dropped, each shown until
// its time is up: readers of an older commit still open its files
// (--keep-removed). Its zero value holds none. It is not safe for
// concurrent use: a tree calls it under its own lock.
type Grace struct {
	kept map[string]graced
}

type graced struct {
	e     Entry
	until time.Time
}

// Len is how many names are kept.
func (g *Grace) Len() int { return len(g.kept) }

// Apply returns what a tree shows once shown (a listing, as Shown
// returns it) replaces old (what it showed): the listing, then the names
// kept. A name of old that shown lacks is kept until keep after now
// (not at all for keep 0); a kept name goes when it is back in the
// listing, due at now, a directory of the listing, or below one of its
// files. next is when the first kept name is due (zero if none).
func (g *Grace) Apply(old, shown []Entry, keep time.Duration, now time.Time) (visible []Entry, next time.Time) {
	listed := make(map[string]bool, len(shown))
	for _, e := range shown {
		listed[e.Name] = true
	}
	if keep > 0 {
		for _, e := range old {
			if _, ok := g.kept[e.Name]; !ok && !listed[e.Name] {
				if g.kept == nil {
					g.kept = make(map[string]graced)
				}
				g.kept[e.Name] = graced{e: e, until: now.Add(keep)}
			}
		}
	}
	dirs := DirSet(shown)
	visible = slices.Clone(shown)
	for _, name := range slices.Sorted(maps.Keys(g.kept)) {
		k := g.kept[name]
		if listed[name] || !now.Before(k.until) || dirs[name] || underFile(name, listed) {
			delete(g.kept, name)
			continue
		}
		visible = append(visible, k.e)
		if next.IsZero() || k.until.Before(next) {
			next = k.until
		}
	}
	return visible, next
}

// underFile reports whether a directory of name is one of files.
func underFile(name string, files map[string]bool) bool {
	for dir := path.Dir(name); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if files[dir] {
			return true
		}
	}
	return false
}
