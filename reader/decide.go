package reader

// The read decisions, as pure functions of what the Reader knows: which
// parts a logical read touches and how it waits for them (planRead), and
// where each part read is served from (choose). They do no I/O and take
// no locks, so the tier order can be read, and tested, in one place.

// readPlan is how a logical read of [off, end) is served.
type readPlan struct {
	end         int64 // the read's end, clamped to the object
	first, last int64 // the parts it spans
	// small: a cold small read that is not part of a stream; each of its
	// parts is served by a GET of its own range unless the part's bytes
	// are already here (choose).
	small bool
	// startFrom..last are the parts started at demand priority before the
	// read waits on its first; none when startFrom > last.
	startFrom int64
	// borrow: the read may be answered from a part's own buffer
	// (ReadAtRef), being within one part and not small.
	borrow bool
	// parallel: a small read across a part border reads its parts at
	// once (readSmallParts).
	parallel bool
}

// planRead plans a read of n bytes at off of an object of size bytes,
// with 0 <= off < size and n > 0. streaming says the read belongs to a
// sequential stream (prefetch.Sequence); byRef that the caller can send
// bytes from a borrowed buffer.
//
// A small read that is not part of a stream is served by a GET of its own
// range, unless its part is no larger than SmallRead (a small file, an
// object's short tail): a GET of the range would cost about as much as
// the part. A read of a stream waits for its part, as the next reads
// will. The further parts a read spans are started at once, before it
// waits on the first, but not for a small read: a part started at demand
// would make it wait for the whole part instead of its range.
func (c Config) planRead(size, off, n int64, streaming, byRef bool) readPlan {
	ps := c.PartSize
	p := readPlan{end: min(off+n, size)}
	p.first, p.last = off/ps, (p.end-1)/ps
	firstLen := min(ps, size-p.first*ps)
	p.small = !streaming && p.end-off <= c.SmallRead && firstLen > c.SmallRead
	p.startFrom = p.first + 1
	if p.small {
		p.startFrom = p.last + 1
	}
	p.borrow = byRef && p.first == p.last && !p.small
	p.parallel = p.small && p.last > p.first
	return p
}

// source is where one part read is served from.
type source int

const (
	fromMemory       source = iota // the memory tier (parts the disk refused)
	fromHeld                       // a part held for a sequential reader
	fromCall                       // the part's fetch in flight, joined
	fromDisk                       // the disk cache
	fromRange                      // a GET of the read's own range
	fromRangeAndPart               // that, and the part queued in the background
	fromFetch                      // a new fetch of the part, waited on
	numSources
)

func (s source) String() string {
	return [...]string{"memory", "held", "call", "disk", "range", "range+part", "fetch"}[s]
}

// partView is what the Reader knows of a part when a read decides where
// to get it. disk is only looked at (outside partTable.mu) once no tier in
// memory has the part.
type partView struct {
	memory bool // in the memory tier
	held   bool // held for a stream
	call   bool // a fetch of it is in flight
	// callReady: that fetch has published its bytes. callWaited: a reader
	// waits on it already, so it runs at demand priority.
	callReady, callWaited bool
	disk                  bool // in the disk cache
}

// choose returns where a read of a part is served from: the first of
// memory, held, in flight, disk and remote that has it. Before all of
// them, the read asks the range tier (rangetier.go), which holds or is
// fetching the heads and tails of an index's files: those bytes come
// sooner from it than from a part fetch of the file. A small read
// does not join a fetch that only readahead or background work wants and
// that has not yet got its bytes: it would wait for a whole part where a
// GET of its range is quicker. retry says the part was fetched for this
// read but was gone by the time it looked (evicted at once, or refused):
// it then takes its own range rather than fetching the part again.
func choose(v partView, small, retry bool) source {
	switch {
	case v.memory:
		return fromMemory
	case v.held:
		return fromHeld
	case v.call && (!small || v.callReady || v.callWaited):
		return fromCall
	case v.disk:
		return fromDisk
	case small && !v.call:
		return fromRangeAndPart
	case small || retry:
		return fromRange
	}
	return fromFetch
}
