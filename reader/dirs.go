package reader

import (
	"path"

	"github.com/segfs/segfs/prefetch"
)

// Dir is a directory of the mount as the engine knows it: the files in
// it, in the order the prefetch policies plan over. The edge holds one
// per directory node and gives it back when the directory is seen. The
// zero Dir is a directory of no files.
type Dir struct{ d *prefetch.Dir }

// Place is where a file stands: its directory and its index there. The
// edge holds one per file node and gives it back at each Open. The zero
// Place is a file the prefetch policies know nothing of (a command's
// read of one file, an inline file).
type Place struct {
	d *prefetch.Dir
	i int
}

// Dirs builds the engine's model of the directories of entries: each
// directory's Dir by its path (as path.Split gives it: "" for the root,
// else "a/b/"), and each entry's Place, at the same index. An inline
// entry has nothing to prefetch: its Place is the zero one, and it is
// among its Dir's Inline names alone (a snapshot's virtual segments_N
// still tells that its directory holds an index).
func Dirs(entries []Entry) (map[string]Dir, []Place) {
	dirs := make(map[string]Dir)
	places := make([]Place, len(entries))
	for i, e := range entries {
		dir, base := path.Split(e.Name)
		d, ok := dirs[dir]
		if !ok {
			d = Dir{&prefetch.Dir{}}
			dirs[dir] = d
		}
		if e.Inline != nil {
			d.d.Inline = append(d.d.Inline, base)
			continue
		}
		places[i] = Place{d.d, d.d.Add(base, e.Obj)}
	}
	return dirs, places
}
