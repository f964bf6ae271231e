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
	r := flate.NewReader(bytes.NewReader(body[len(compressedMarker):]))
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, MaxBlobSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: inflate: %w", ErrBlob, err)
	}
	if len(out) > MaxBlobSize {
		return nil, fmt.Errorf("%w: inflates to more than %d bytes", ErrBlob, MaxBlobSize)
	}
	return out, nil
}

// decodeBlob is ReadBlob and smile.Decode.
func decodeBlob(raw []byte, codec string) (any, error) {
	body, err := ReadBlob(raw, codec)
	if err != nil {
		return nil, err
	}
	v, err := smile.Decode(body, smile.Limits{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlob, err)
	}
	return v, nil
}
