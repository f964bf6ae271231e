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
// footer at the end; nothing else until a search reads at random. The
// kernel turns each of those reads into a read of its own size: a page
// fault of a mapped file reads the mount's readahead around the page
// (Kernel), a buffered read its first readahead window. So: of every
// file, the head and the tail the kernel will ask for (the whole file
// when they meet), in the order of an open (openOrder). All of it goes
// to the range tier, so the engine knows when the open's bytes are in:
// the other policies' fills of the directory's files wait until then.
// The bodies are left to reads and those fills.
type LuceneOpen struct {
	// Kernel is what the kernel reads around an open's reads.
	Kernel Kernel
	// Profile, if not nil, widens the heads and tails by what earlier
	// opens read (profile.go). Its methods are safe to call while the
	// engine learns into it.
	Profile *Profile
}

// Range sizes of LuceneOpen, whatever the kernel reads: at least
// LuceneHead and LuceneTail bytes of every file, which hold a codec
// header and footer with the reads a buffered open makes around them
// (docs/BENCH.md has the measured reads). LuceneWhole is the size up to
// which a file is small: its learned extents are not kept (profile.go).
const (
	LuceneWhole = 1 << 20
	LuceneHead  = 128 << 10
	LuceneTail  = 128 << 10
)

// Kernel is what the kernel reads of a FUSE mount's file for one read
// of a mapped page (the read-around of do_sync_mmap_readahead): the
// Readahead bytes around the page, from Readahead/2 before it, page
// aligned and cut at the end of the file, sent as requests of at most
// MaxRead bytes, of which the fault waits for the one that holds its
// page. A fault at the head of a file so waits for [0, min(Readahead,
// MaxRead)); one at its last page for the last request of the window
// that starts Readahead/2 before that page, at most MaxRead long.
// Buffered reads of an open (a first read of a few KiB, the footer's
// last page) ask for less than that.
type Kernel struct {
	Readahead int64 // the mount's read_ahead_kb, in bytes
	MaxRead   int64 // max_read
}

// Page is the kernel's page size as the read-around aligns to it.
const Page = 4096

// DefaultKernel is a FUSE mount's kernel before segfs sets its
// readahead: 128 KiB, in requests of up to 128 KiB.
var DefaultKernel = Kernel{Readahead: 128 << 10, MaxRead: 128 << 10}

// head returns how much of a file's start a fault of its first page
// waits for.
func (k Kernel) head() int64 {
	if k.Readahead <= 0 || k.MaxRead <= 0 {
		k = DefaultKernel
	}
	return min(k.Readahead, k.MaxRead)
}

// tailOff returns where the read a fault of the last page of a file of
// size bytes waits for begins: at most MaxRead-Page before that page,
// as far back as Readahead/2.
func (k Kernel) tailOff(size int64) int64 {
	if k.Readahead <= 0 || k.MaxRead <= 0 {
		k = DefaultKernel
	}
	last := (size - 1) / Page * Page
	back := min(k.Readahead/2/Page*Page, k.MaxRead/Page*Page-Page)
	return max(0, last-back)
}

// window returns the head LuceneOpen fetches of a file of size bytes
// named name, and where its tail begins: the kernel's reads, at least
// the built-in sizes, widened by the profile; and whether the profile
// widened them.
func (l LuceneOpen) window(name string, size int64) (head, tailOff int64, widened bool) {
	learned := l.Profile.extent(name)
	builtHead := max(l.Kernel.head(), LuceneHead)
	builtOff := min(l.Kernel.tailOff(size), size-LuceneTail)
	head = max(builtHead, learned.Head)
	tailOff = min(builtOff, size-learned.Tail)
	widened = head > builtHead || tailOff < builtOff
	return min(head, size), max(0, tailOff), widened
}

// OpenGroup prefixes the scheduler group of one open's ranges, named by
// the first file the open reads. Object keys cannot hold a NUL, so no
// file's own group has such a name.
const OpenGroup = "\x00open "

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
	if len(order) == 0 {
		return p
	}
	group := OpenGroup + dir.Files[order[0]].Key
	for _, i := range order {
		obj := dir.Files[i]
		if obj.Size <= 0 {
			continue
		}
		head, tailOff, learned := l.window(dir.Names[i], obj.Size)
		if head >= tailOff {
			p.Ranges = append(p.Ranges, Range{Obj: obj, Off: 0, Len: obj.Size, Prio: Readahead, Learned: learned, Group: group})
			continue
		}
		p.Ranges = append(p.Ranges,
			Range{Obj: obj, Off: 0, Len: head, Prio: Readahead, Learned: learned, Group: group},
			Range{Obj: obj, Off: tailOff, Len: obj.Size - tailOff, Prio: Readahead, Learned: learned, Group: group})
	}
	return p
}

// isLuceneFile reports whether name is a file of a Lucene index: a
// segments_N file or a segment's file (_<segment>...).
func isLuceneFile(name string) bool {
	return strings.HasPrefix(name, "segments_") || (strings.HasPrefix(name, "_") && strings.Contains(name, "."))
}

// openRank orders a segment's files as an open reads them (Lucene's
// SegmentReader): its field infos, then, codec by codec, postings,
// norms, stored fields, term vectors, points, vectors, doc values and
// live docs; a compound file's entries before its data.
func openRank(ext string) int {
	switch ext {
	case ".si":
		return 0
	case ".fnm":
		return 1
	case ".cfe":
		return 2
	case ".cfs":
		return 3
	case ".doc", ".pos", ".pay", ".tim", ".tip", ".tmd", ".psm":
		return 4
	case ".nvm", ".nvd":
		return 5
	case ".fdt", ".fdm", ".fdx":
		return 6
	case ".tvd", ".tvm", ".tvx":
		return 7
	case ".kdi", ".kdd", ".kdm", ".dii", ".dim":
		return 8
	case ".vem", ".vec", ".vex", ".vemf", ".vemq", ".veq":
		return 9
	case ".dvm", ".dvd":
		return 10
	case ".liv":
		return 11
	}
	return 12
}

// compareOpenOrder orders two file names as an open of the index reads
// them: segments_N first, then every segment's .si (SegmentInfos reads
// them all), then the segments from the newest to the oldest (a
// DirectoryReader opens its SegmentReaders from the last one back),
// each by openRank.
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
	ia, ib := path.Ext(a) == ".si", path.Ext(b) == ".si"
	if ia != ib {
		if ia {
			return -1
		}
		return 1
	}
	c := compareSegments(segmentOf(a), segmentOf(b))
	switch {
	case ia: // the .si files, oldest first
		return c
	case c != 0:
		return -c
	}
	if c := cmp.Compare(openRank(path.Ext(a)), openRank(path.Ext(b))); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// compareSegments orders segment names as base 36 numbers: _9 before
// _10.
func compareSegments(a, b string) int {
	if c := cmp.Compare(len(a), len(b)); c != 0 {
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
