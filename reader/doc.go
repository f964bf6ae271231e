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
//   - reader.go: a logical read (ReadAt, ReadAtRef): readahead, the
//     parts it spans, borrowing a part's buffer.
//   - decide.go: the decisions, as pure functions: the plan of a
//     logical read and the tier each part read is served from, in the
//     order memory, held, in flight, disk, remote.
//   - calls.go: single-flight part calls, the writers that store fetched
//     parts, and their hand-off to the memory tier or a stream.
//   - ranges.go: range GETs of cold small reads; split.go: one part
//     fetched as several GETs when workers are idle.
//   - stream.go: following a sequential reader; memtier.go: parts the
//     disk refused; buffer.go: part buffers and their owners.
//   - fill.go: the background fills and the prefetch policies' plans.
//   - rangetier.go: the range tier, the heads and tails of an index's
//     files fetched ahead when its directory is first seen.
//   - whole.go: promotion to whole-object files for passthrough opens.
//   - frames.go, framebudget.go: seekable zstd frames, decoded within a
//     memory budget; entry.go: Entry, the file read (package entry).
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
//   - checkInvariantsLocked states the rest; builds with the race
//     detector check it after every change of state.
//
// Lock order: Reader.mu before promoter.mu; Reader.mu, and the range
// GETs' own rangeGets.mu, before the scheduler's lock (the scheduler
// never calls back into the Reader while holding its own). Reader.mu
// and rangeGets.mu are never held together. FrameReader.mu, the decode
// budget's lock and the range tier's rangeTier.mu are never held while
// another is taken. The disk cache is only called without Reader.mu
// held.
package reader
