// Package layout holds the formats of the stores a mount shows when they
// are not plain objects: pure functions over names and bytes, with no
// store and no I/O (package view resolves a shard through them). Where
// an OpenSearch shard's blobs live (ShardPath, PathHash), what its
// metadata files are called and which one is newest (MetadataName,
// NewestMetadata, MetadataNewer), what a metadata file holds
// (ParseMetadata, EncodeMetadata), the index-level path file
// (ParseIndexPath), and where a snapshot repository keeps a shard
// (SnapshotShardPath).
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
// The package does no I/O and imports no store; its functions are safe
// for concurrent use.
package layout
