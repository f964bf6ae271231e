// Package layout turns a store into the files a mount shows when the
// store is not plain objects: one shard of the remote segment store that
// OpenSearch writes to a blob repository (OpenSearch.Resolve, in
// opensearch.go, which lists and reads through fetcher). Its formats are
// pure functions over names and bytes: where a shard's blobs live (ShardPath, PathHash), what the
// metadata files are called and which one is newest (MetadataName,
// NewestMetadata), what a metadata file holds (ParseMetadata,
// EncodeMetadata), and the index-level path file (ParseIndexPath).
//
// The formats follow OpenSearch's sources: RemoteStoreEnums,
// RemoteStorePathStrategy, RemoteStoreUtils and FNV1a for paths;
// RemoteSegmentStoreDirectory.MetadataFilenameUtils for names;
// VersionedCodecStreamWrapper and RemoteSegmentMetadata for bodies;
// RemoteIndexPath for the path file.
//
// Invariants:
//   - The parsers never panic and never trust a count or a length read
//     from their input: each is bounded by the bytes left before it
//     allocates, so a corrupt file costs at most a small multiple of its
//     own size.
//   - Every parser has an encoder it round-trips with (FormatMetadataName,
//     EncodeMetadata), so tests and tools build their inputs with the
//     same code that defines the format.
//   - Errors from ParseMetadata wrap ErrBadMetadata and name the part and
//     the file offset that are wrong; errors from the name functions wrap
//     ErrBadMetadataName, ErrNoMetadata or ErrMultipleWriters.
//
// The functions of paths.go, names.go, metadata.go and indexpath.go do no
// I/O; they are safe for concurrent use. Resolve refuses nothing it can
// report: a blob that is missing or of another length is a Problem of the
// Shard, which a mount refuses (Shard.Err) and verify lists.
package layout
