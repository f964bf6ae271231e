package prefetch

import (
	"cmp"
	"path"
	"slices"
	"strings"

	"github.com/segfs/segfs/fetcher"
)

// LuceneOpen is the segment-aware policy: when a directory that holds a
// Lucene index is first seen, it fetches what opening the index reads,
// all at once and above background work, instead of the open paying one
// round trip per file in series. An open reads every small metadata file
// whole and, of every larger file, its codec header at the start and its
// footer at the end (with the kernel's readahead around each); nothing
// else until a search reads at random. So: small files whole, as parts;
// the head and tail of every larger file;
// in the order of an open, segments_N first, then segment by segment
// with .si and .fnm first. All of it goes to the range tier (a small file
// is one range of its whole length), so the engine knows when the open's
// bytes are in: the other policies' fills of the directory's files wait
// until then. The bodies are left to reads and those fills.
type LuceneOpen struct {
	// Profile, if not nil, widens the heads and tails by what earlier
	// opens of the source read (profile.go). Read-only.
	Profile *Profile
}

// Range sizes of LuceneOpen. A file of at most LuceneWhole bytes is
// fetched whole; of a larger file, the first LuceneHead and the last
// LuceneTail bytes. They hold a codec header and footer with room for
// the kernel's readahead around the reads that check them (docs/BENCH.md
// has the measured reads).
const (
	LuceneWhole = 1 << 20
	LuceneHead  = 128 << 10
	LuceneTail  = 128 << 10
)

func (LuceneOpen) Mounted([]fetcher.Object, int64) Plan { return Plan{} }
func (LuceneOpen) Opened(*Dir, int, int64) Plan         { return Plan{} }

// Seen plans the open of dir's index, if it holds one: a segments_N file
// or a segment's .si file.
func (l LuceneOpen) Seen(dir *Dir, partSize int64) Plan {
	if !dir.HoldsIndex() {
		return Plan{}
	}
	order := make([]int, 0, len(dir.Files))
	for i, name := range dir.Names {
		if isLuceneFile(path.Base(name)) {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return compareOpenOrder(path.Base(dir.Names[a]), path.Base(dir.Names[b]))
	})
	var p Plan
	for _, i := range order {
		obj := dir.Files[i]
		switch {
		case obj.Size <= 0:
		case obj.Size <= min(LuceneWhole, partSize):
			p.Ranges = append(p.Ranges, Range{Obj: obj, Off: 0, Len: obj.Size, Prio: Readahead})
		default:
			head, tail := l.Profile.extent(dir.Names[i])
			p.Ranges = append(p.Ranges,
				Range{Obj: obj, Off: 0, Len: min(head, obj.Size), Prio: Readahead},
				Range{Obj: obj, Off: max(0, obj.Size-tail), Len: min(tail, obj.Size), Prio: Readahead})
		}
	}
	return p
}

// isLuceneFile reports whether name is a file of a Lucene index: a
// segments_N file or a segment's file (_<segment>...).
func isLuceneFile(name string) bool {
	return strings.HasPrefix(name, "segments_") || (strings.HasPrefix(name, "_") && strings.Contains(name, "."))
}

// openRank orders a segment's files as an open reads them: its .si, its
// field infos, the metadata files, then the data files.
func openRank(ext string) int {
	switch ext {
	case ".si":
		return 0
	case ".fnm":
		return 1
	case ".cfe", ".liv", ".tmd", ".dvm", ".nvm", ".kdm", ".fdm", ".tvm", ".vem", ".vemq", ".vemf":
		return 2
	}
	return 3
}

// compareOpenOrder orders two file names as an open of the index reads
// them: segments_N first, then by segment, then by openRank.
func compareOpenOrder(a, b string) int {
	sa, sb := strings.HasPrefix(a, "segments_"), strings.HasPrefix(b, "segments_")
	switch {
	case sa != sb:
		if sa {
			return -1
		}
		return 1
	case sa:
		return cmp.Compare(a, b)
	}
	segA, segB := segmentOf(a), segmentOf(b)
	if c := cmp.Compare(len(segA), len(segB)); c != 0 { // _9 before _10, as base 36 numbers
		return c
	}
	if c := cmp.Compare(segA, segB); c != 0 {
		return c
	}
	if c := cmp.Compare(openRank(path.Ext(a)), openRank(path.Ext(b))); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// segmentOf returns a segment file's segment name: "_3" of "_3.si" and
// of "_3_Lucene90_0.dvd".
func segmentOf(name string) string {
	if i := strings.IndexAny(name[1:], "._"); i >= 0 {
		return name[:i+1]
	}
	return name
}
