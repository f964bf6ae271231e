package snapshot

import (
	"fmt"
	"iter"
	"math"
	"path"
	"strconv"
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

// NParts returns how many parts the file is stored in: none for a
// virtual file, else 1 + (Length-1)/PartSize (one for an empty file, or
// for a PartSize not above zero, which a parsed file never has).
func (f FileInfo) NParts() int64 {
	switch {
	case f.Virtual():
		return 0
	case f.Length <= 0 || f.PartSize <= 0:
		return 1
	}
	return 1 + (f.Length-1)/f.PartSize
}

// Part returns part i of the file (0 <= i < NParts): the blob Blob when
// the file is one part, else Blob.part<i>, PartSize bytes but the last,
// as BlobStoreIndexShardSnapshot.FileInfo names them. Only this part's
// name is built. It panics for an i out of range.
func (f FileInfo) Part(i int64) Part {
	n := f.NParts()
	if i < 0 || i >= n {
		panic(fmt.Sprintf("snapshot: part %d of %s, which has %d", i, f.Name, n))
	}
	if n == 1 {
		return Part{Blob: f.Blob, Len: f.Length}
	}
	off := i * f.PartSize
	return Part{Blob: f.Blob + ".part" + strconv.FormatInt(i, 10), Off: off, Len: min(f.PartSize, f.Length-off)}
}

// Parts yields the file's parts in order with their numbers, each named
// as it is reached (Part): a caller that stops early builds no more
// names. A virtual file has none.
func (f FileInfo) Parts() iter.Seq2[int64, Part] {
	return func(yield func(int64, Part) bool) {
		for i := range f.NParts() {
			if !yield(i, f.Part(i)) {
				return
			}
		}
	}
}

// MaxParts bounds the parts one file may claim, and MaxShardParts those
// of all the files of one shard snapshot: what a caller walks is then
// bounded whatever the lengths and part sizes claim (a snapshot of
// 100,000 files of 1 MiB in parts of one byte, 500 KB compressed, claims
// 10^11; issue 42). 2^20 parts in all is a shard of 1 TiB in chunks of
// 1 MiB, far above what a cluster writes.
const (
	MaxParts      = 1 << 20
	MaxShardParts = 1 << 20
)

// ParseShardSnapshot reads a shard's snap-<uuid>.dat: the checksummed
// blob, its Smile body and every file of it, each checked: a blob name
// of the repository's form, a Lucene name that is a plain file name (no
// "/", no ".."), a length not below zero, a part size above zero that
// does not split the file into more than MaxParts, and for a virtual
// file bytes as long as the length says; and the files' parts, summed as
// they are read, not more than MaxShardParts. One bad file fails the
// whole snapshot, naming it: a mount never shows part of a shard.
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
	seen := map[string]bool{} // not sized by len(files): an array of nulls is cheap to claim
	var parts int64           // of the files so far, at most MaxShardParts
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
		n := f.NParts()
		if n > MaxShardParts-parts { // parts <= MaxShardParts: the difference cannot overflow, a sum could
			return nil, fmt.Errorf("%w: file %d (%s) brings the shard's parts to more than %d, the most segfs takes of one shard snapshot (MaxShardParts)", ErrBlob, i, f.Name, MaxShardParts)
		}
		parts += n
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
