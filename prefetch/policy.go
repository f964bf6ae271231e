package prefetch

import (
	"cmp"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segfs/segfs/fetcher"
)

// Policies decide what to fetch ahead of reads; the read engine carries
// their plans out. A policy sees the events of a mount (it starts
// serving, a file is opened) and returns a Plan: parts to start now and
// fills to queue in the background. It does no I/O and holds no locks
// of the engine, so a new policy is one type with two methods, added to
// the list Policies returns.

// Policy decides what a mount fetches ahead at each event. Its methods
// may be called concurrently.
type Policy interface {
	// Mounted is called once the mount serves files, with every file it
	// shows in listing order.
	Mounted(files []fetcher.Object, partSize int64) Plan
	// Opened is called when a file is opened for reads that segfs
	// serves. dir holds the files of its directory; the file is
	// dir.Files[i].
	Opened(dir *Dir, i int, partSize int64) Plan
	// Seen is called once per directory, the first time it is looked up,
	// listed or one of its files is opened (for a shard layout, at mount).
	Seen(dir *Dir, partSize int64) Plan
}

// Plan is what a policy asks for at one event.
type Plan struct {
	// Parts are started at once at their priority, unless cached, held
	// or in flight.
	Parts []Part
	// Fills are queued at background priority, each a cursor over its
	// objects' parts (the engine's fill).
	Fills []Fill
	// Ranges are fetched at their priority into the engine's range tier,
	// unless the parts or blocks that hold them are cached already: the
	// head and tail of files a reader will open, far smaller than a part.
	Ranges []Range
}

// Range names a byte range of an object to fetch ahead.
type Range struct {
	Obj      fetcher.Object
	Off, Len int64
	Prio     Priority
	Learned  bool // a learned profile widened it (open_profile_ranges)
	// Group is the scheduler group of its fetches; "" is the object's
	// own. The ranges of one open share a group, so that they are
	// fetched in the order the open reads them, not taking turns by
	// object.
	Group string
}

// Part names one part to start.
type Part struct {
	Obj   fetcher.Object
	Index int64
	Prio  Priority
}

// Fill fetches every part of Objects that is not cached, in order, at
// background priority, as fetches of one scheduler group.
type Fill struct {
	// Group is the scheduler group its fetches are queued in: within a
	// priority, groups take turns.
	Group   string
	Objects []fetcher.Object
	// Once: each object is filled at most once in the mount's life, by
	// the first fill whose cursor reaches it; later fills skip it.
	Once bool
}

// Dir is one directory of the mount as policies see it: its files'
// objects in listing order. Build it with Add; it is read-only once the
// mount serves.
type Dir struct {
	Files []fetcher.Object
	Names []string // the files' names in the directory, by index
	// Inline names the directory's files held in memory, with no object
	// to fetch (a snapshot's virtual .si and segments_N): they are not
	// in Files, but they tell that the directory holds an index.
	Inline []string

	seen      atomic.Bool
	seenAt    atomic.Int64 // when FirstSeen was first called, in Unix nanoseconds
	indexOnce sync.Once
	index     bool
	smallOnce sync.Once
	small     []int // indexes in Files of the files of one part or less
	smallPS   int64
}

// Add appends a file, shown as name, and returns its index in the
// directory.
func (d *Dir) Add(name string, obj fetcher.Object) int {
	d.Files = append(d.Files, obj)
	d.Names = append(d.Names, name)
	return len(d.Files) - 1
}

// FirstSeen reports whether this is the first call for d: the engine
// runs the policies' Seen plans once per directory.
func (d *Dir) FirstSeen() bool {
	if !d.seen.CompareAndSwap(false, true) {
		return false
	}
	d.seenAt.Store(time.Now().UnixNano())
	return true
}

// SeenAt returns when d was first seen (FirstSeen), in Unix
// nanoseconds; 0 before.
func (d *Dir) SeenAt() int64 { return d.seenAt.Load() }

// HoldsIndex reports whether d holds a Lucene index: a segments_N file
// or a segment's .si file.
func (d *Dir) HoldsIndex() bool {
	d.indexOnce.Do(func() {
		for _, n := range slices.Concat(d.Names, d.Inline) {
			base := path.Base(n)
			if strings.HasPrefix(base, "segments_") || strings.HasSuffix(base, ".si") {
				d.index = true
				return
			}
		}
	})
	return d.index
}

// smallAfter returns up to n of the files of one part or less after
// Files[i], in listing order.
func (d *Dir) smallAfter(i, n int, partSize int64) []fetcher.Object {
	d.smallOnce.Do(func() {
		d.smallPS = partSize
		for j, o := range d.Files {
			if o.Size <= partSize {
				d.small = append(d.small, j)
			}
		}
	})
	from, _ := slices.BinarySearch(d.small, i+1)
	idx := d.small[from:min(len(d.small), from+n)]
	out := make([]fetcher.Object, len(idx))
	for k, j := range idx {
		out[k] = d.Files[j]
	}
	return out
}

// Mode says which policies a mount runs (--prefetch).
type Mode string

// Prefetch modes.
const (
	None Mode = "none" // fetch only what reads and their readahead need
	Open Mode = "open" // also the rest of each opened file and the small files after it
	All  Mode = "all"  // also every file, from the mount's start
)

// Policies returns the policies of mode, in the order they run; with
// segments, the segment-aware LuceneOpen first (for the mount's kernel
// reads, widened by profile if not nil), in every mode: it fetches only
// what an open of a Lucene directory reads.
func Policies(mode Mode, segments bool, kernel Kernel, profile *Profile) []Policy {
	var ps []Policy
	if segments {
		ps = append(ps, LuceneOpen{Kernel: kernel, Profile: profile})
	}
	switch mode {
	case Open:
		ps = append(ps, OnOpen{IndexHeads: segments}, SmallAfter{N: SmallAhead})
	case All:
		ps = append(ps, OnOpen{IndexHeads: segments}, Sweep{})
	}
	return ps
}

// OnOpen fills the rest of an opened file in the background, once per
// object version, as the object's own group, so the fills of several
// opened files take turns. Its first part starts at readahead priority
// instead: an opened file is most often read from its start (a copy,
// any whole read), and as readahead that part may split across the
// workers the fill leaves free, where queued first in the fill it would
// be one whole-part GET. With IndexHeads, a file of a Lucene index
// directory gets no first part ahead: LuceneOpen fetched what its open
// reads into the range tier, and the open's other files come first.
type OnOpen struct {
	IndexHeads bool
}

func (OnOpen) Mounted([]fetcher.Object, int64) Plan { return Plan{} }
func (OnOpen) Seen(*Dir, int64) Plan                { return Plan{} }

func (o OnOpen) Opened(dir *Dir, i int, partSize int64) Plan {
	obj := dir.Files[i]
	var p Plan
	if obj.Size > 0 && !(o.IndexHeads && dir.HoldsIndex()) {
		p.Parts = []Part{{Obj: obj, Index: 0, Prio: Readahead}}
	}
	p.Fills = []Fill{{Group: obj.Key, Objects: []fetcher.Object{obj}, Once: true}}
	return p
}

// SmallAhead is how many of the small files after an opened one
// SmallAfter fills by default.
const SmallAhead = 32

// SmallAfter fills, once each, the first N files of one part or less
// that follow an opened file in its directory, in listing order. A copy
// of a directory opens its files one after another in that order, and
// each small file is one GET it would otherwise wait for in turn, with
// the pool idle around it; a search engine opening a segment reads its
// small files too. Larger files are left to their own open.
type SmallAfter struct{ N int }

func (SmallAfter) Mounted([]fetcher.Object, int64) Plan { return Plan{} }
func (SmallAfter) Seen(*Dir, int64) Plan                { return Plan{} }

func (s SmallAfter) Opened(dir *Dir, i int, partSize int64) Plan {
	var p Plan
	for _, obj := range dir.smallAfter(i, s.N, partSize) {
		p.Fills = append(p.Fills, Fill{Group: obj.Key, Objects: []fetcher.Object{obj}, Once: true})
	}
	return p
}

// SweepGroup is the scheduler group of Sweep's fetches. Object keys
// cannot hold a NUL, so no file's own group has this name.
const SweepGroup = "\x00prefetch-all"

// Sweep fills every file of the mount from its start, as one fill that
// runs in one order: first the files of one part, smallest first, so
// that a copy of the whole tree never waits on a small file's first
// byte; then the larger files in listing order (the order of the tree's
// inodes and directory entries, the order a copy reads them in). One
// order, not files taking turns: a copy reads one file after another,
// so the file it reads next is the one to finish first. The sweep is one
// scheduler group, so an opened file's own fill or a reader's readahead
// still takes its turns beside it.
type Sweep struct{}

func (Sweep) Opened(*Dir, int, int64) Plan { return Plan{} }
func (Sweep) Seen(*Dir, int64) Plan        { return Plan{} }

func (Sweep) Mounted(files []fetcher.Object, partSize int64) Plan {
	var small, large []fetcher.Object
	for _, obj := range files {
		if obj.Size <= partSize {
			small = append(small, obj)
		} else {
			large = append(large, obj)
		}
	}
	slices.SortStableFunc(small, func(a, b fetcher.Object) int { return cmp.Compare(a.Size, b.Size) })
	return Plan{Fills: []Fill{{Group: SweepGroup, Objects: append(small, large...), Once: true}}}
}
