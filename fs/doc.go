// Package fs is the FUSE edge of segfs: it shows the files of a
// listing as a read-only tree with the go-fuse v2 node API and hands
// every read to the read engine (package reader). It is the only
// package that imports go-fuse. What the tree shows and when it lists
// again are decided elsewhere: the listing by package view (a
// directory's resolution policy is view.DirState), the changes by
// package entry (Shown, Diff, Grace); fs turns them into nodes and
// tells the kernel.
//
// Which file owns what:
//   - tree.go: the tree, built once from the listing with persistent
//     inodes; the directories (every mutation is EROFS).
//   - file.go: file nodes and handles: an open becomes a reader.Handle,
//     a read goes to it and its reply is sent from the engine's buffer
//     when it lends one; the passthrough mode of a node.
//   - view.go: a refresh of the tree in one step (entry.Diff and
//     entry.Grace applied: Refresh, RefreshWith); guard.go: the
//     view lock LOOKUP and READDIRPLUS hold for reading, so that a
//     refresh's change excludes them.
//   - lazy.go: a tree resolved as it is used (Lazy, which a view.View
//     of a repository implements): directories listed and shards'
//     files added at first use, within LazyLimits.
//   - errno.go: errors become errnos in one place, which logs them.
//   - mount.go: mounting and the kernel's readahead; probe.go: whether
//     the kernel takes passthrough files; access.go: allow_root, a filter of callers before the tree.
//
// Invariants:
//   - Nothing is writable: the mount is read-only and every mutating
//     operation that reaches the file system returns EROFS.
//   - A file node keeps one mode, passthrough (the kernel reads a
//     whole-object file of the engine's cache) or served (segfs serves
//     the reads), while any handle of it is open, as the kernel requires.
//   - Every open of a node has a reader.Handle, closed when the kernel
//     releases the handle.
//   - Every node has its own non-zero inode number for the mount's life:
//     the root RootIno (1), the others numbered from 2 as OnAdd makes
//     them; stat and readdir show the same one.
//
// Lock order: fileNode.mu is held while reader.Reader.OpenWhole opens a
// whole-object file (which takes the disk cache's lock); it is never
// held while anything else of the engine runs.
package fs
