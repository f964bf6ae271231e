// Package fs serves a fetcher.Store as a read-only FUSE file system with
// the go-fuse v2 node API.
//
// Invariants:
//   - The tree is built once, from the listing taken at mount time, with
//     persistent inodes. Each file node holds the fetcher.Object (key,
//     ETag, size) it was listed with, and every byte it serves comes from
//     that exact object: ranged reads carry its ETag, so an object changed
//     after the mount fails the reads it affects with ESTALE and is never
//     mixed with the old bytes.
//   - Nothing is writable: the mount is read-only and every mutating
//     operation that reaches the file system returns EROFS.
//   - Reads are served by a Reader that maps a logical range onto aligned
//     parts (PartSize bytes; the last part of an object is short), fetches
//     the parts it lacks with at most MaxFetches remote reads in flight,
//     shares one fetch among all readers of a part (single-flight), and
//     keeps the parts the disk cache refused (a full disk) in a memory
//     tier bounded by MemoryLimit bytes.
//   - A handle reading an object sequentially is followed (follow.go):
//     the object's queued background fetches past its readahead's reach
//     are taken back until it ends, and the parts fetched within that
//     reach stay in memory until it reads past them, at most
//     MaxReadahead+1 parts for the Reader.
//   - A fetch runs on the Reader's own context, not the reader's: a reader
//     that is interrupted returns EINTR alone, and the fetch completes for
//     the others. Close cancels every fetch and waits for them.
//   - With ReaderConfig.Passthrough, one promoter goroutine has the cache
//     build a whole-object file of each object whose parts are all cached
//     (whole.go), and an open of such an object hands that file to the
//     kernel as the handle's backing file; its reads never reach segfs.
//     A file node keeps one mode (passthrough or served) while any handle
//     of it is open, as the kernel requires.
//   - Errors become syscall.Errno in one place (errno.go), which logs them.
package fs
