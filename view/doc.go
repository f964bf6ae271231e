// Package view owns what a mount shows of its store and how that
// changes: one View per shape (plain objects, one OpenSearch shard, a
// remote-store repository or one index of it, one snapshot shard, a
// whole snapshot repository), built by Open from a Spec. The commands
// consume a View without knowing its shape: segfs mount maps its tree
// to go-fuse nodes (fs.Lazy) and follows it (Next), restore and verify
// read every file it resolves (All).
//
// The resolvers read the stores through fetcher and the formats through
// layout and snapshot: OpenSearch.Resolve and Newer (one shard and its
// next commit, opensearch.go), RemoteStore (a whole remote-store
// repository, osrepo.go), Snapshot.Resolve (a snapshot's shard,
// snapshot.go, with PartsStore showing a file stored in parts as one
// object, parts.go) and ReadCatalog (what segfs snapshots lists,
// catalog.go). A resolver refuses nothing it can report: a blob that is
// missing or of another length is a Problem of the shard, which a mount
// refuses (Shard.Err) and verify lists.
//
// A flat view lists its store at Open; a tree resolves its directories
// as they are used, each shard once, at most Options.MaxShards of them
// and ResolveSlots at a time, so that a repository of thousands of
// shards opens in the time of one listing and holds only what is looked
// up.
//
// Invariants:
//   - A view never shows a partial shard: a shard whose store lacks a
//     file its metadata names, or holds it at another length, fails to
//     resolve (with Options.Tolerate, verify's, it is returned with its
//     Problems instead).
//   - Next changes nothing when it fails: the view stays the last good
//     one, and a tree's shard whose newer commit cannot be read keeps
//     the commit it shows.
//   - No name of a directory path stands for another: a snapshot is
//     found by its very name, and a name two snapshots share shows
//     neither.
//   - Memory is bounded by the Options and the decoders' bounds
//     (Spec.ResolveMemory), never by what the store claims.
package view
