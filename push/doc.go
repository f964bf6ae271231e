// Package push uploads a local shard directory to a segfs store (an S3
// bucket below a prefix, or a local directory) in the layout the mount
// reads: each regular file under its relative path, and the files chosen
// by Options.Compress stored in the seekable zstd format (package
// compress) under their name plus ".zst", which the mount shows without
// the suffix at the file's logical size.
//
// Objects written to S3 carry the user metadata segfs-source-sha256 (hex
// SHA-256 of the local file) and segfs-source-size. A file whose target
// object already carries its size and digest is skipped, so a second push
// of an unchanged directory uploads nothing. Uploads go through the SDK's
// upload manager: large objects use multipart uploads, which show nothing
// under the key until they complete and are aborted on failure, so the
// mount never sees a partial object. When a file changes form (raw to
// compressed or back), the new object is written first and the other
// form deleted after, so that a mount made later sees one of them only.
//
// A file:// destination is written through a temporary file in the
// target directory and a rename. It keeps no metadata: a raw file is
// skipped when a file of the same size and SHA-256 is already there; a
// compressed file is always rewritten.
//
// push never deletes objects other than the other form of a file it
// writes: files removed locally stay in the store.
package push
