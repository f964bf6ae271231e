package snapshot

import (
	"bytes"
	"compress/flate"
	"math"

	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/smile"
)

// EncodeBlob wraps a Smile body as ChecksumBlobStoreFormat writes it: the
// codec header, the body (with compress, "DFL\0" and raw DEFLATE), the
// Lucene footer. For tests and tools: segfs never writes a repository.
func EncodeBlob(codec string, body []byte, compress bool) []byte {
	b := lucene.AppendHeader(nil, codec, BlobVersion)
	if compress {
		var z bytes.Buffer
		w, _ := flate.NewWriter(&z, 3) // the level the repositories use; a valid level never fails
		w.Write(body)
		w.Close()
		b = append(append(b, compressedMarker...), z.Bytes()...)
	} else {
		b = append(b, body...)
	}
	return lucene.AppendFooter(b)
}

// EncodeShardSnapshot writes s as a shard's snap-<uuid>.dat, with the
// fields and the Smile header flags (shared names, raw binary) that
// Elasticsearch 6.8 and 7.10 clusters write. For tests and tools.
func EncodeShardSnapshot(s *ShardSnapshot, compress bool) []byte {
	files := make([]any, 0, len(s.Files))
	var total int64
	for _, f := range s.Files {
		o := &smile.Object{}
		add := func(name string, v any) { o.Members = append(o.Members, smile.Member{Name: name, Value: v}) }
		add("name", f.Blob)
		add("physical_name", f.Name)
		add("length", f.Length)
		add("checksum", f.Checksum)
		ps := f.PartSize
		if ps == 0 {
			ps = math.MaxInt64
		}
		add("part_size", ps)
		add("written_by", f.WrittenBy)
		if f.MetaHash != nil {
			add("meta_hash", f.MetaHash)
		}
		files = append(files, o)
		total += f.Length
	}
	root := &smile.Object{Members: []smile.Member{
		{Name: "name", Value: s.Name},
		{Name: "index_version", Value: s.IndexVersion},
		{Name: "start_time", Value: int64(1_700_000_000_000)},
		{Name: "time", Value: int64(12)},
		{Name: "number_of_files", Value: int64(len(s.Files))},
		{Name: "total_size", Value: total},
		{Name: "files", Value: files},
	}}
	return EncodeBlob(ShardSnapshotCodec, smile.Encode(root, smile.EncodeOptions{SharedNames: true, RawBinary: true}), compress)
}
