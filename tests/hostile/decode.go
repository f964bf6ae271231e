package hostile

import (
	"bytes"
	"compress/flate"
	"fmt"
	"strings"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/smile"
	"github.com/segfs/segfs/snapshot"
)

// Metadata that is small, or no larger than segfs reads, and decodes to
// what would take gigabytes if decoding were bounded by its bytes alone
// (issue 42).

// SharedReferenceShardSnapshot returns a shard's snap-<uuid>.dat, its
// body compressed as a repository with compress on writes it (raw
// DEFLATE, here at the best ratio), whose Smile body inflates to about
// size bytes: a shard snapshot whose files array holds one-byte
// references to one shared value string. Of 60 MB, the blob is about
// 60 KB; decoded, each reference is an array slot of 16 bytes and a
// string header of 16.
func SharedReferenceShardSnapshot(size int) []byte {
	root := &smile.Object{Members: []smile.Member{
		{Name: "name", Value: "s"}, // the shared value 0, which the references name
		{Name: "index_version", Value: int64(1)},
		{Name: "files", Value: []any{}},
	}}
	body := smile.Encode(root, smile.EncodeOptions{SharedNames: true, SharedValues: true, RawBinary: true})
	if !bytes.HasSuffix(body, []byte{0xF8, 0xF9, 0xFB}) { // files: [], and the object's end
		panic("hostile: smile.Encode wrote an empty array otherwise")
	}
	tail := len(body) - 2
	out := make([]byte, 0, size+len(body))
	out = append(out, body[:tail]...)
	out = append(out, bytes.Repeat([]byte{0x01}, max(size-len(body), 1))...)
	out = append(out, body[tail:]...)
	blob := lucene.AppendHeader(nil, snapshot.ShardSnapshotCodec, snapshot.BlobVersion)
	blob = append(blob, "DFL\x00"...)
	var z bytes.Buffer
	w, _ := flate.NewWriter(&z, flate.BestCompression) // a valid level never fails
	w.Write(out)
	w.Close()
	return lucene.AppendFooter(append(blob, z.Bytes()...))
}

// EmptySnapshotsIndexN returns a repository's root index-N of about
// size bytes: {"snapshots":[{},{},...]}, each element of 3 bytes a
// SnapshotInfo of 56 bytes decoded, and more for the slice that grows.
func EmptySnapshotsIndexN(size int) []byte {
	const open, close = `{"snapshots":[`, `{}]}`
	n := max((size-len(open)-len(close))/3, 0)
	return []byte(open + strings.Repeat(`{},`, n) + close)
}

// TinyEntriesMetadata returns md, which must list no files, encoded as a
// remote-store metadata file whose file map holds n entries of 13 bytes
// each ("abcd" to "a::b::0"), every key another: some 4.8 million fill
// 62 MB. Each is a FileEntry of 72 bytes and its strings if parsed.
func TinyEntriesMetadata(md *layout.Metadata, n int) ([]byte, error) {
	if len(md.Files) != 0 {
		return nil, fmt.Errorf("hostile: TinyEntriesMetadata of a Metadata that lists %d files", len(md.Files))
	}
	enc, err := layout.EncodeMetadata(md)
	if err != nil {
		return nil, err
	}
	h, err := lucene.ParseHeader(enc)
	if err != nil {
		return nil, err
	}
	if enc[h.Len] != 0 { // the map's count: none
		return nil, fmt.Errorf("hostile: the encoded file map does not start with a count of 0")
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	o := &lucene.Output{B: make([]byte, 0, len(enc)+13*n+16)}
	o.B = append(o.B, enc[:h.Len]...)
	o.VInt(int32(n))
	key := make([]byte, 4)
	for i := range n {
		for j, v := 0, i; j < len(key); j, v = j+1, v/len(alphabet) {
			key[j] = alphabet[v%len(alphabet)]
		}
		o.String(string(key))
		o.String("a::b::0")
	}
	o.B = append(o.B, enc[h.Len+1:len(enc)-lucene.FooterLength]...)
	return lucene.AppendFooter(o.B), nil
}
