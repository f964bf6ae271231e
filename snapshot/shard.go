package snapshot

import (
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/smile"
)

// ShardSnapshotCodec is the codec of a shard's snap-<uuid>.dat.
const ShardSnapshotCodec = "snapshot"

// ShardSnapshot is one shard's snapshot (BlobStoreIndexShardSnapshot):
// the Lucene files it holds.
type ShardSnapshot struct {
	Name         string // the snapshot's name
	IndexVersion int64
	Files        []FileInfo
}

// FileInfo is one file of a shard snapshot.
type FileInfo struct {
	Blob     string // "__<uuid>" (a data blob, maybe in parts), or "v__<uuid>" (virtual: its bytes are MetaHash)
	Name     string // the Lucene file name (physical_name)
	Length   int64
	Checksum string // base 36, as Store.digestToString writes it
	// PartSize is the repository's chunk size when the file was written
	// (math.MaxInt64 when it has none).
	PartSize  int64
	WrittenBy string
	MetaHash  []byte
}

// Virtual reports whether the file has no blob: its bytes are MetaHash.
func (f FileInfo) Virtual() bool { return strings.HasPrefix(f.Blob, "v__") }

// Part is one stored piece of a file: the blob holding its bytes
// [Off, Off+Len).
type Part struct {
	Blob     string
	Off, Len int64
}

// Parts returns where the file's bytes are stored: one blob named Blob
// when it fits one part, else Blob.part0 ... Blob.partN, each PartSize
// bytes but the last, as BlobStoreIndexShardSnapshot.FileInfo names them.
// A virtual file has none.
func (f FileInfo) Parts() []Part {
	if f.Virtual() {
		return nil
	}
	n := int64(1)
	if f.Length > 0 {
		n = 1 + (f.Length-1)/f.PartSize
	}
	if n == 1 {
		return []Part{{Blob: f.Blob, Len: f.Length}}
	}
	parts := make([]Part, n)
	for i := range n {
		off := i * f.PartSize
		parts[i] = Part{Blob: fmt.Sprintf("%s.part%d", f.Blob, i), Off: off, Len: min(f.PartSize, f.Length-off)}
	}
	return parts
}

// MaxParts bounds the parts a file may claim: a lying length over a tiny
// part size must not make a slice of billions.
const MaxParts = 1 << 20

// ParseShardSnapshot reads a shard's snap-<uuid>.dat: the checksummed
// blob, its Smile body and every file of it, each checked: a blob name
// of the repository's form, a Lucene name that is a plain file name (no
// "/", no ".."), a length not below zero, a part size above zero that
// does not split the file into more than MaxParts, and for a virtual
// file bytes as long as the length says. One bad file fails the whole
// snapshot, naming it: a mount never shows part of a shard.
func ParseShardSnapshot(raw []byte) (*ShardSnapshot, error) {
	v, err := decodeBlob(raw, ShardSnapshotCodec)
	if err != nil {
		return nil, err
	}
	root, ok := v.(*smile.Object)
	if !ok {
		return nil, fmt.Errorf("%w: the body is %T, not an object", ErrBlob, v)
	}
	s := &ShardSnapshot{}
	if s.Name, err = str(root, "name", true); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlob, err)
	}
	if s.IndexVersion, err = num(root, "index_version", false); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlob, err)
	}
	fv, ok := root.Get("files")
	if !ok {
		return nil, fmt.Errorf("%w: no files", ErrBlob)
	}
	files, ok := fv.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: files is %T, not an array", ErrBlob, fv)
	}
	seen := make(map[string]bool, len(files))
	for i, x := range files {
		o, ok := x.(*smile.Object)
		if !ok {
			return nil, fmt.Errorf("%w: file %d is %T, not an object", ErrBlob, i, x)
		}
		f, err := fileInfo(o)
		if err != nil {
			return nil, fmt.Errorf("%w: file %d: %w", ErrBlob, i, err)
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("%w: file %s named twice", ErrBlob, f.Name)
		}
		seen[f.Name] = true
		s.Files = append(s.Files, f)
	}
	return s, nil
}

func fileInfo(o *smile.Object) (FileInfo, error) {
	var f FileInfo
	var err error
	if f.Blob, err = str(o, "name", true); err != nil {
		return f, err
	}
	if f.Name, err = str(o, "physical_name", true); err != nil {
		return f, err
	}
	if f.Length, err = num(o, "length", true); err != nil {
		return f, err
	}
	if f.Checksum, err = str(o, "checksum", false); err != nil {
		return f, err
	}
	if f.WrittenBy, err = str(o, "written_by", false); err != nil {
		return f, err
	}
	f.PartSize = math.MaxInt64
	if _, ok := o.Get("part_size"); ok {
		if f.PartSize, err = num(o, "part_size", true); err != nil {
			return f, err
		}
	}
	if mh, ok := o.Get("meta_hash"); ok {
		b, ok := mh.([]byte)
		if !ok {
			return f, fmt.Errorf("%s: meta_hash is %T, not binary", f.Name, mh)
		}
		f.MetaHash = b
	}
	switch {
	case f.Name != path.Clean(f.Name) || strings.Contains(f.Name, "/") || !entry.ValidName(f.Name):
		return f, fmt.Errorf("physical_name %q is not a file name", f.Name)
	case !strings.HasPrefix(f.Blob, "__") && !strings.HasPrefix(f.Blob, "v__") || strings.ContainsAny(f.Blob, "/\\") || strings.Contains(f.Blob, ".."):
		return f, fmt.Errorf("%s: blob name %q is not a repository's", f.Name, f.Blob)
	case f.Length < 0:
		return f, fmt.Errorf("%s: length %d", f.Name, f.Length)
	case f.PartSize <= 0:
		return f, fmt.Errorf("%s: part_size %d", f.Name, f.PartSize)
	case f.Length > 0 && (f.Length-1)/f.PartSize >= MaxParts:
		return f, fmt.Errorf("%s: %d bytes in parts of %d: more than %d parts", f.Name, f.Length, f.PartSize, MaxParts)
	case f.Virtual() && int64(len(f.MetaHash)) != f.Length:
		return f, fmt.Errorf("%s: a virtual file of %d bytes whose meta_hash holds %d", f.Name, f.Length, len(f.MetaHash))
	}
	return f, nil
}

// str returns the string member name of o; with need, an absent one is
// an error.
func str(o *smile.Object, name string, need bool) (string, error) {
	v, ok := o.Get(name)
	if !ok {
		if need {
			return "", fmt.Errorf("no %s", name)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s is %T, not a string", name, v)
	}
	return s, nil
}

// num returns the integer member name of o; with need, an absent one is
// an error.
func num(o *smile.Object, name string, need bool) (int64, error) {
	v, ok := o.Get(name)
	if !ok {
		if need {
			return 0, fmt.Errorf("no %s", name)
		}
		return 0, nil
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%s is %T, not an integer", name, v)
	}
	return n, nil
}
