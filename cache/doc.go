// Package cache keeps the parts of immutable objects on local disk, across
// closes, unmounts and crashes.
//
// A part is named by a Key: source, object key, ETag, part size and part
// index. Objects are immutable for a given ETag, so a cached part never
// goes stale; a changed object has a new ETag and so new Keys.
//
// # Directory layout
//
//	DIR/              0700, owned by the user; see "The directory is segfs's"
//	DIR/lock          segfs's marker (one line of text), and the flock held
//	                  while a Cache has DIR open (ErrInUse otherwise)
//	DIR/tmp/          temporary files of Puts in progress, <16 hex>.<n>.tmp
//	                  (and .tmp.seal); Open removes those, and nothing else
//	DIR/ab/<id>.part  part files, 0600; <id> is the hex SHA-256 of the
//	                  length-prefixed Key, ab its first two digits
//	DIR/ab/<id>.obj   whole-object files (Promote), 0600: the object's bytes
//	                  at their own offsets; <id> is the hex SHA-256 of the
//	                  length-prefixed source, object key and ETag
//	DIR/ab/<id>.seal  the seal of the .obj beside it (see object.go)
//
// No byte of an object key, source or ETag ever appears in a path, so a
// key such as "../../x" names a file like any other.
//
// # The directory is segfs's
//
// Open takes a directory only if it is a real directory (not a symlink),
// owned by the user and not writable by group or others, and either
// empty (lost+found aside) or segfs's: DIR/lock holds the marker, or it
// is empty and DIR holds nothing but tmp/ and fan-out directories (a
// directory made by a segfs from before the marker, which Open then
// marks). Anything else is refused with a *DirError (ErrUnsafeDir,
// ErrNotCacheDir) before anything in it is touched: a --cache-dir naming
// a home directory, or a symlink someone planted at the path, costs no
// file. After that every file is named relative to a held descriptor of
// a checked directory and opened, created, renamed or removed without
// following a symlink (see dir.go), and only names segfs makes are ever
// removed; a directory in a part's place only if it is empty. Entries
// segfs did not make are left, and logged.
//
// # Part file format (version 2, little-endian; see format.go)
//
//	magic "segfsprt" | version u16 | 0 u16 | header length H u32 |
//	offset u64 | length L u64 | part size u64 | index u64 |
//	block size B u32 | block count N u32 | len(source) u16 | len(object) u16 |
//	len(etag) u16 | 0 u16 | source | object | etag |
//	N × CRC32C(block) u32 | zeros to a multiple of 4096 |
//	CRC32C(bytes [0, H-4)) u32 | L data bytes
//
// Version 1 (earlier releases) has no padding and is still read.
// Blocks are B bytes (16 KiB) of the data, the last one short. An 8 MiB
// part has about 2.2 KiB of header fields (a 512-entry checksum table),
// padded to 4 KiB so that the data starts on a 4096-byte boundary.
//
// # Invariants
//
//   - Integrity: ReadAt returns a byte only after checking the header's
//     CRC32C, every header field against the Key it was asked for (source,
//     object, ETag, part size, index, offset), the file's size against H+L,
//     and the CRC32C of each block holding the returned bytes. A file that
//     fails any check (flipped byte, truncated, extended, another key's
//     file, an older or unknown format version) is a miss: it is removed,
//     counted (Stats.CorruptRemoved) and logged, and the caller fetches the
//     part again.
//   - Cheap random reads: a warm 4 KiB read costs open, fstat, one 4 KiB
//     pread for the header (enough for parts up to about 14 MiB) and one
//     16 KiB pread for its block, and checksums about 18 KiB; never the
//     whole part. Headers are re-read and re-checked on every read rather
//     than cached with open descriptors: such a cache would save the open
//     and one pread (docs/BENCH.md has what they cost) but would
//     have to close descriptors on eviction without racing the readers
//     using them, and would keep evicted files' space allocated.
//   - Transactional writes: Put writes DIR/tmp/<name>.tmp (O_CREAT|O_EXCL,
//     0600), closes it and renames it into place. A part is visible only
//     after the rename; a crash leaves at most a temporary file, removed by
//     the next Open. No fsync: a part torn by a power loss (zero-length,
//     short, zeroed or stale blocks) fails its length or checksum checks
//     (up to CRC32C's 2^-32 chance per block) and is refetched, so fsync
//     would buy little but latency and threads blocked in the disk.
//   - Direct I/O (Config.IO, default IODirect): the header is written
//     through the page cache (it is read on every read of the part), the
//     data's whole 4096-byte blocks with O_DIRECT from the caller's
//     buffer when it is 4096-aligned (Go's large allocations are), and a
//     short tail through the page cache. Whole-object files (Promote) are
//     written the same way, from an aligned buffer. Reads of at least
//     128 KiB of whole blocks into an aligned buffer (a sequential
//     reader's) use O_DIRECT too, and are checked block by block like any
//     other; smaller reads, and WillNeed, use the page cache. The bytes
//     move without copies in new page-cache pages: the mounted file's own
//     page cache holds the ones a reader read, and filling a second copy
//     cost about half of segfs's CPU on a cold read on the benchmark
//     machine. If the file system refuses O_DIRECT (EINVAL), the Cache
//     logs it once and uses the page cache from then on.
//     Stats.DirectBytes and DirectReadBytes count the bytes moved
//     directly.
//   - Checksums as bytes arrive: PutSummed takes the blocks' CRC32C
//     from a Sums that the fetch filled block by block while the network
//     copied the bytes in (fetcher.ReadRangeProgress), so the part is
//     not read again, out of the CPU's cache, to sum it. Sums that do
//     not cover the whole buffer are ignored and Put's own pass runs; a
//     byte changed after it was summed makes its block fail on read.
//   - Index: an in-memory map of part id to file size and recency (an LRU
//     list), with the sum of sizes. Open starts loading it in a background
//     goroutine that stats the part files (fstatat only; headers are checked
//     lazily, on read) and returns at once. Meanwhile ReadAt opens a part's
//     file by name and Put looks for an unindexed file before writing; parts
//     read, written or removed during the load are indexed or tombstoned
//     under the same lock the load inserts under, so no part is counted
//     twice and no removed part is counted at all. Parts found on disk enter
//     the LRU behind those used since Open, ordered by max(atime, mtime).
//   - Bounds: before writing, Put reserves the part's file size and evicts
//     least recently used parts until the indexed bytes plus the bytes
//     reserved by Puts in progress fit within MaxBytes. So the part files
//     and temporary files on disk stay within MaxBytes, with two
//     exceptions: while the index loads, parts not yet indexed are not
//     counted (the load trims to the bound when it ends); and an evicted
//     file is unlinked just after it leaves the index, so a concurrent
//     Put may briefly write beside it. A part that does not fit beside
//     the Puts in progress is not cached (ErrNoSpace, Stats.BoundSkips). Then Put asks
//     statfs and evicts until the free space after the write, less the
//     bytes other Puts reserved, stays at or above the floor (MinFree, or
//     MinFreeFraction of the file system); if it cannot, the part is not
//     cached (ErrNoSpace, Stats.NoSpace).
//   - Pins: parts of pinned objects (open files) are evicted only when no
//     unpinned part is left to evict; within each group, least recently
//     used first.
//   - A full disk never fails a read: ENOSPC or EDQUOT during a Put removes
//     the temporary file, counts Stats.NoSpace, evicts about one part's
//     worth of old parts (for the next Put; a quota is invisible to
//     statfs) and returns ErrNoSpace; the caller serves the bytes it holds.
//   - Concurrency: every method may be called concurrently. One mutex
//     guards the index; no file I/O happens under it except on rare paths
//     (removing a bad part or a vanished entry, indexing a part read before
//     the load found it). A part being
//     written or removed is marked busy, so that nobody else writes,
//     indexes or removes it meanwhile. A part evicted while a ReadAt has it
//     open is read to the end through the open descriptor. At most
//     MaxWriters Puts write at once (a semaphore; ctx bounds the wait), so
//     disk writes block a bounded number of OS threads. ReadAt is not
//     bounded here: its callers (FUSE request threads) are.
//   - Whole-object files: Promote copies an object whose parts are all
//     cached, each read through ReadAt and so checked, into one file,
//     syncs it, renames it into place and writes its seal; then it removes
//     the parts, whose reads the file serves from then on. The file has
//     no room for block checksums, so it is trusted by its seal instead:
//     the seal records the object and the file's device, inode, size,
//     change and modification time, and every OpenObject and every ReadAt
//     it serves compares them with the file (one fstat). A write, a
//     truncation or a file put in its place breaks the seal: both files
//     are removed, counted (Stats.BadObjects) and the read misses. A disk
//     that silently returns other bytes than it stored is not caught, as
//     the parts' checksums would catch it; that is the price of letting
//     the kernel serve the file (FUSE passthrough), and why whole-object
//     files are an option of the caller. They count toward MaxBytes and
//     are evicted like parts; an object larger than a quarter of MaxBytes
//     is not promoted. A crash between the file's rename and its seal's
//     leaves a file without a seal, removed by the next load.
//   - Unusable entries: an entry under a part's or whole-object file's
//     name that cannot be used as that file (a symlink, a directory, a
//     FIFO, one the user may not read) is removed when a read opens it or
//     the index load finds it, counted (Stats.BadFilesRemoved) and
//     logged, and the next Put writes the part; it never turns every
//     read of the part into a fetch. A Put finding such an entry while
//     the index loads does not take it for the part.
//   - Exclusivity: one Cache per directory at a time (flock on DIR/lock).
//     The kernel drops the lock when the process dies.
//   - Descriptors: a Cache holds DIR's, the lock's, tmp/'s and one per
//     fan-out directory it has used (at most 256), so that opening a part
//     resolves one path component. A subdirectory removed by hand under
//     a running Cache is made anew by the next Put that needs it; the old
//     descriptor stays open until Close, as a call may still be using it.
//   - Close stops the load, waits for every ReadAt and Put in progress,
//     closes every descriptor and leaves no goroutine behind.
//
// # How ristretto is used, and where it is not
//
// The disk tier does not use ristretto. A disk bound needs exact
// accounting of the files that exist: ristretto applies Sets and their
// costs asynchronously, may drop a Set under contention, and evicts from
// its own goroutine, so its idea of the bytes on disk would drift from the
// files, and its callbacks would run blocking unlinks on its goroutine.
// Its TinyLFU admission would also refuse parts that are already fetched
// and written, and it cannot be seeded with the recency of parts found at
// start or honour pins. The disk tier uses a plain LRU with exact sizes.
//
// Nor does the memory the reader keeps for parts the disk refused (a full
// disk): there ristretto's dropped Sets and refused admissions would mean
// fetching the same part again for every read of it, so fs keeps those in
// an exact LRU. Ristretto's TinyLFU admission serves where hot entries must
// survive a scan and a miss costs only CPU: the in-memory tier of
// decompressed seekable-zstd frames.
package cache
