// Package snapshot reads the metadata of Elasticsearch and OpenSearch
// snapshot repositories (issue 36): the checksummed Smile blobs of a
// shard's snapshot (snap-<uuid>.dat, codec "snapshot") and the files they
// name, split into parts as the repository stores them. The repository
// layout that mounts a shard from them is built on it.
package snapshot

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"

	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/smile"
)

// BlobVersion is the version of ChecksumBlobStoreFormat's header.
const BlobVersion = 1

// MaxBlobSize bounds a metadata blob read into memory, and what its
// DEFLATE body may inflate to: a shard's file list, far below this for
// any real shard.
const MaxBlobSize = 64 << 20

// MaxBuilt bounds what decoding one blob's Smile body may build
// (smile.Limits.MaxBuilt, as smile.Decode charges it). Its size, not the
// body's, is what bounds the decode's memory: a body of MaxBlobSize
// one-byte tokens would build gigabytes (issue 42). smile's default
// holds a shard snapshot of some 110,000 files, more than a shard has.
const MaxBuilt = smile.DefaultMaxBuilt

// MaxDecoded bounds the memory one metadata blob's decode holds at its
// peak, for the daemon's memory bound to count once for every decode
// that may run at once. Besides the blob as read (MaxBlobSize), it holds
// first the inflated body (MaxBlobSize) and what decoding it builds
// (MaxBuilt), with the old array of one that grows (half as much again);
// then what was built and the ShardSnapshot made of it, less than as
// much again (each file it takes cost at least 264 bytes to build; its
// FileInfo takes 104, twice while their slice grows, and its name a slot
// of a set). Garbage is not held: the Go memory limit reclaims it.
const MaxDecoded = 2*MaxBlobSize + 2*MaxBuilt

// compressedMarker starts a body the repository compressed (its
// "compress" setting): raw DEFLATE follows.
var compressedMarker = []byte{'D', 'F', 'L', 0}

// ErrBlob is what every error of a metadata blob wraps.
var ErrBlob = errors.New("not a valid snapshot metadata blob")

// ReadBlob checks a ChecksumBlobStoreFormat blob: its Lucene footer's
// CRC32 over every byte before it, its codec header (codec, version 1),
// and returns the Smile body, inflated if the repository compressed it
// (at most MaxBlobSize bytes either way).
func ReadBlob(raw []byte, codec string) ([]byte, error) {
	if len(raw) > MaxBlobSize {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d segfs reads", ErrBlob, len(raw), MaxBlobSize)
	}
	if _, err := lucene.CheckFile(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlob, err)
	}
	h, err := lucene.ParseHeader(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlob, err)
	}
	if h.Codec != codec || h.Version != BlobVersion {
		return nil, fmt.Errorf("%w: codec %q version %d, want %q version %d", ErrBlob, h.Codec, h.Version, codec, BlobVersion)
	}
	if h.Len > len(raw)-lucene.FooterLength {
		return nil, fmt.Errorf("%w: the header runs into the footer", ErrBlob)
	}
	body := raw[h.Len : len(raw)-lucene.FooterLength]
	if !bytes.HasPrefix(body, compressedMarker) {
		return body, nil
	}
	return inflate(body[len(compressedMarker):])
}

// inflate returns the raw DEFLATE stream z inflated, at most MaxBlobSize
// bytes. It inflates twice: once to count the bytes, then into a buffer
// of that size, so that the body costs its size and no more (reading
// into a growing buffer would allocate several times as much).
func inflate(z []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(z))
	defer r.Close()
	n, err := io.Copy(io.Discard, io.LimitReader(r, MaxBlobSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: inflate: %w", ErrBlob, err)
	}
	if n > MaxBlobSize {
		return nil, fmt.Errorf("%w: inflates to more than %d bytes", ErrBlob, MaxBlobSize)
	}
	if err := r.(flate.Resetter).Reset(bytes.NewReader(z), nil); err != nil {
		return nil, fmt.Errorf("%w: inflate: %w", ErrBlob, err)
	}
	out := make([]byte, n)
	if _, err := io.ReadFull(r, out); err != nil {
		return nil, fmt.Errorf("%w: inflate again: %w", ErrBlob, err)
	}
	return out, nil
}

// decodeBlob is ReadBlob and smile.Decode, building at most MaxBuilt.
func decodeBlob(raw []byte, codec string) (any, error) {
	body, err := ReadBlob(raw, codec)
	if err != nil {
		return nil, err
	}
	v, err := smile.Decode(body, smile.Limits{MaxBuilt: MaxBuilt})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlob, err)
	}
	return v, nil
}
