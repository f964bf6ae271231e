// Package shard generates a deterministic sample shard shaped like a Lucene
// index directory: a few segments of decreasing size, each with the usual
// per-segment files (stored fields, postings, terms, doc values, norms,
// points, segment info, field infos), plus a segments_N file.
//
// Invariants:
//   - The same Spec always yields byte-identical files, whatever the number
//     of CPUs: every file's content depends only on Spec.Seed and its name.
//   - Every file carries a Lucene-style index header (CODEC_MAGIC, codec
//     name, version, segment id, suffix) and a 16-byte footer whose last 8
//     bytes are the CRC32 of every byte before them.
//   - The manifest is written last, so a manifest on disk means a complete
//     generation; Generate reuses it when the Spec matches and every listed
//     file has its listed size.
package shard
