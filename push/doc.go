// Package push uploads a local shard directory to a segfs store (an S3
// bucket below a prefix, or a local directory) in the layout the mount
// reads: each regular file under its relative path, and the files chosen
// by the hybrid policy (Options.CompressMatch and CompressMinSize) stored
// in the seekable zstd format (package compress) under their name plus
// ".zst", which the mount shows without the suffix at the file's logical
// size.
//
// Invariants:
//
//   - Objects written to S3 carry the user metadata segfs-source-sha256
//     (hex SHA-256 of the local file) and segfs-source-size. A file whose
//     target object already carries its size and digest is skipped, so a
//     second push of an unchanged directory uploads nothing.
//   - What is stored is what was hashed: the bytes read for the upload
//     (or for compression) are hashed again on the way, and if they
//     differ from the first hash the upload fails with ErrChanged before
//     anything becomes visible under the key.
//   - What is hashed is the file the walk listed. Each file is opened once,
//     without following a symbolic link (O_NOFOLLOW), and is hashed and
//     uploaded from that open file only if it is a regular file with the
//     device and inode the walk saw; a path replaced in between (by a link,
//     another file, a directory on its path) fails with ErrReplaced naming
//     it, and nothing at the new path is read.
//   - Nothing partial is ever visible under a key. Small objects go up in
//     one PutObject; large ones in a multipart upload, which shows nothing
//     until it completes. A failed or interrupted (ctx cancelled) multipart
//     upload is aborted on a context of its own, so its parts are not left
//     stored either.
//   - Objects are deleted only after the upload that makes them redundant
//     succeeded. When a file changes form (raw to compressed or back), the
//     new object is written first and the other form deleted after; a
//     mount listing the store between the two sees both, and shows the
//     newer one under the file's name (see fs.Entries). With
//     Options.Delete, objects no local file accounts for (neither KEY nor
//     KEY.zst) are deleted once every file was pushed; without it, files
//     removed locally stay in the store.
//
// A file:// destination is written through a temporary file in the
// target directory and a rename. It keeps no metadata: a raw file is
// skipped when a file of the same size and SHA-256 is already there; a
// compressed file is always rewritten.
package push
