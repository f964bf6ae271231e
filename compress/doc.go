// Package compress reads and writes objects in the public seekable zstd
// format (facebook/zstd contrib/seekable_format, v0.1.0): independent zstd
// frames followed by one skippable frame holding a seek table.
//
// # Object layout (all integers little-endian)
//
//	frame 0 | frame 1 | ... | frame N-1 | seek table frame
//
//	seek table frame:
//	  u32 0x184D2A5E            skippable frame magic
//	  u32 Frame_Size            = N*E + 9 (excludes these 8 bytes)
//	  N × { u32 Compressed_Size; u32 Decompressed_Size; [u32 Checksum] }
//	  u32 N; u8 Descriptor; u32 0x8F92EAB1
//
// E is 12 when Descriptor bit 7 (Checksum_Flag) is set and 8 otherwise;
// Checksum is the low 32 bits of XXH64 (seed 0) of the frame's
// decompressed bytes. Descriptor bits 6-2 are reserved and must be zero;
// bits 1-0 are ignored.
//
// # Division of work
//
// The package does no I/O for reads. The caller (segfs's fs package)
// fetches the last TailSize bytes of an object from the store when it
// lists the tree and hands them to ParseSeekTable; for a read of logical
// bytes [off, off+n) it asks FramesFor which frames to fetch, fetches
// exactly the compressed bytes [CompOff, CompOff+CompSize) of each
// through its part cache and fetch pool, and decodes them with a shared
// Decoder. Encode, used by `segfs push`,
// writes a whole object to an io.Writer.
//
// # Invariants
//
//   - Untrusted input. Objects may be corrupt or hostile. No function of
//     this package panics, hangs or allocates without bound on any input;
//     every inconsistency is an error wrapping ErrCorrupt (or, for a tail
//     that is too short, ErrNeedMore) that names where it was found.
//   - A parsed SeekTable is consistent: frames tile the compressed bytes
//     [0, CompressedSize) exactly, with no gap and no overlap, and
//     CompressedSize plus the table frame is the object size; logical
//     offsets are the running sum of frame sizes; every frame has
//     CompSize >= 1, Size <= MaxFrameSize and Size <= CompSize*MaxRatio (a
//     bound of the zstd format itself, so no valid frame is rejected);
//     there are at most MaxFrames frames and Size <= MaxSize. All
//     arithmetic on these fields is done in int64 on values small enough
//     that it cannot overflow. LargestSize and LargestCompSize are the
//     maxima of the frames' fields.
//   - Bounded tails. TailSize and every NeedMoreError ask for at most
//     MaxTableSize bytes, whatever object size a listing claims.
//   - A reader's frame limit. The format allows frames of up to
//     MaxFrameSize (1 GiB), far more than a reader should decode on a
//     request; CheckFrameLimit refuses a table with a frame past a
//     smaller limit (DefaultFrameLimit for segfs), in decoded or in
//     compressed bytes (CompressBound), and DecodeCost gives the memory a
//     decode takes, so that a caller can reserve it before allocating.
//   - Bounded decoding. DecodeFrame never returns bytes that were not
//     verified: the output has exactly Frame.Size bytes and, when the
//     table carries checksums, their XXH64 matches. A frame that decodes
//     to more bytes than the table says stops being decoded at the first
//     zstd block past the limit (or before decoding, if its header
//     declares a larger size), so a decompression bomb costs memory in
//     proportion to Frame.Size (at most about 2.25*Frame.Size + 256 KiB
//     including the output buffer), not to what it would expand to.
//   - Objects written by Encode always have checksums on and always parse
//     with ParseSeekTable; they are readable by any reader of the public
//     format, and plain zstd decoders read them as a concatenation of
//     frames.
//
// SeekTable values are immutable after ParseSeekTable returns and may be
// shared between goroutines. A Decoder may be used by many goroutines at
// once.
package compress
