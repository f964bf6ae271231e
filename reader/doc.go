// Package reader is segfs's read engine: it serves logical byte ranges
// of remote objects from aligned parts, through memory, the disk cache
// and the remote, and knows nothing of FUSE. The edge (package fs) opens
// a Handle per open file and reads through it.
//
// Words: an object is one version (key, ETag) of a remote object; a part
// is an aligned PartSize range of it (the last one short); a call is the
// single fetch of a part that every reader of it shares; a range GET
// fetches just a small read's own bytes; a stream is the sequential
// reader of an object that the Reader follows, holding the parts it is
// about to read; a fill is a background cursor over the parts of a run
// of objects, queued by a prefetch policy.
//
// Which file owns each step of a read:
//   - handle.go: the edge's interface (Serve, Open, Handle.Read, Close,
//     OpenWhole).
//   - reader.go: the Reader and a logical read (ReadAt, ReadAtRef):
//     readahead, the parts it spans, borrowing a part's buffer.
//   - decide.go: the decisions, as pure functions: the plan of a
//     logical read and the tier each part read is served from, in the
//     order memory, held, in flight, disk, remote.
//   - parttable.go: the part table, the one owner of the parts' shared
//     state (calls in flight, buffer refs, held parts, the memory tier)
//     under its own lock, with a small API: start or join a call,
//     publish, finish, release, hold; it serves the tiers in memory.
//     buffer.go: part buffers, their refs and pool; memtier.go: parts
//     the disk refused; held.go: the streams' windows and held parts.
//   - parttiers.go: the tiers below the part table (disk, range GET,
//     fetch), one small type each, that a part read falls through in
//     the order choose gives.
//   - calls.go: the part fetches (partFetches): single-flight calls run
//     on the scheduler, the writers that store fetched parts, and their
//     hand-off to the memory tier or a stream; split.go: one part
//     fetched as several GETs when workers are idle.
//   - ranges.go: range GETs of cold small reads, under their own lock.
//   - cursors.go: the cursors over objects, under their own lock:
//     stream.go follows a sequential reader, fill.go runs the
//     background fills and the prefetch policies' plans.
//   - rangetier.go: the range tier, the heads and tails of an index's
//     files fetched ahead when its directory is first seen, as wide as
//     the kernel reads them; a read it covers is answered from it, or
//     waits for its fetch in flight, before any part tier: until its
//     bytes are in (arrival.go), not until the fetch ends.
//   - warm.go: segfs warm; whole.go: promotion to whole-object files for
//     passthrough opens (promoter); profile.go: the learned open profile
//     (learner); keys.go: the disk cache's keys.
//   - frames.go, framebudget.go: seekable zstd frames, decoded within a
//     memory budget; entry.go: Entry, the file read (package entry);
//     bound.go: the engine's memory bound (MemoryBound).
//   - invariants.go: the race builds' checks of the part table and of
//     the cursors; hooks.go: the points tests stop the engine at (nil in
//     production).
//
// Invariants:
//   - Every byte served for an object comes from that exact version:
//     ranged reads carry its ETag, so an object changed after the mount
//     fails the reads it affects (fetcher.ErrChanged) and is never mixed
//     with the old bytes.
//   - One fetch per part at a time (single-flight); at most the
//     scheduler's workers run, whatever the number of readers or files.
//   - A fetch runs on the scheduler's context, not the reader's: a
//     reader that is interrupted returns alone, and the fetch completes
//     for the others. Close cancels every fetch and waits for them.
//   - A part buffer has refs from each of its owners (buffer.go) and goes
//     back to the pool only after the last lets go.
//   - The memory tier holds at most MemoryLimit bytes; streams hold at
//     most MaxReadahead+1 parts together with the fetches receiving.
//   - A fill keeps at most fillWindow of its parts queued or in flight.
//   - The part table states its own invariants (partTable), the
//     streams and fills theirs (cursors, stream, fill); builds with the
//     race detector check them after every change of state
//     (invariants.go).
//
// Lock order, each lock taken only after those above it:
//
//	cursors.mu    (streams, fills, the Once set; cursors.go)
//	partTable.mu  (calls, buffer refs, held parts, memory tier; parttable.go)
//	the scheduler's lock
//
// promoter.mu is taken under cursors.mu (a fill reaching an object asks
// for its promotion) and never with partTable.mu; rangeGets.mu is taken
// before the scheduler's lock (a reader giving up cancels its GET) and
// never with cursors.mu or partTable.mu. The scheduler never calls back
// into the engine while holding its own lock. FrameReader.mu, the
// decode budget's lock and rangeTier.mu take no other lock of the
// engine (the tier's deferred fills start after rangeTier.mu is
// released). arrival.mu (one per range fetch in flight) is a leaf: it
// is taken under no other lock and takes none. The disk cache is only called with neither cursors.mu
// nor partTable.mu held. The Reader itself has no lock: it is the
// façade over these parts.
package reader
