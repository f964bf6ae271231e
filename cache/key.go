package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"path/filepath"
)

// Key names one part of one version of one object. Two equal Keys name
// the same bytes: objects are immutable for a given ETag.
type Key struct {
	Source   string // the store and the service it is on, e.g. "s3://bucket/prefix at https://host" (fetcher.CacheSource)
	Object   string // the object's key in the store
	ETag     string // the object version's identity, as the store gives it
	PartSize int64  // the part size the object is cut into; > 0
	Index    int64  // the part's index; it covers [Index*PartSize, min((Index+1)*PartSize, size))
}

// maxField bounds the length of Source, Object and ETag (16-bit lengths in
// the part header). S3 keys are at most 1,024 bytes.
const maxField = 1<<16 - 1

// errBadKey marks a Key that cannot name a part.
var errBadKey = errors.New("invalid part key")

// String formats the key for logs and errors.
func (k Key) String() string {
	return fmt.Sprintf("%s %q etag %s part %d (part size %d)", k.Source, k.Object, k.ETag, k.Index, k.PartSize)
}

// Offset returns the part's offset in the object.
func (k Key) Offset() int64 { return k.Index * k.PartSize }

func (k Key) validate() error {
	switch {
	case k.PartSize <= 0:
		return fmt.Errorf("%s: part size must be positive: %w", k, errBadKey)
	case k.Index < 0:
		return fmt.Errorf("%s: negative part index: %w", k, errBadKey)
	case k.Index >= math.MaxInt64/k.PartSize:
		return fmt.Errorf("%s: part offset overflows: %w", k, errBadKey)
	case len(k.Source) > maxField || len(k.Object) > maxField || len(k.ETag) > maxField:
		return fmt.Errorf("%s: source, object or etag longer than %d bytes: %w", k, maxField, errBadKey)
	}
	return nil
}

// partID is the SHA-256 of a Key's encoding. It names the part's file, so
// no byte of an object key ever becomes part of a path.
type partID [sha256.Size]byte

// id returns k's partID. The encoding is length-prefixed, so distinct
// Keys cannot encode alike; the format version is not part of it, so a
// part written by an older format is found, and removed, on read.
func (k Key) id() partID {
	var stack [512]byte
	b := appendObject(append(stack[:0], "segfs part\x00"...), k.Source, k.Object, k.ETag)
	b = binary.LittleEndian.AppendUint64(b, uint64(k.PartSize))
	b = binary.LittleEndian.AppendUint64(b, uint64(k.Index))
	return sha256.Sum256(b)
}

// appendObject appends the length-prefixed source, object key and ETag
// that part and whole-object ids are hashed from.
func appendObject(b []byte, source, object, etag string) []byte {
	for _, s := range []string{source, object, etag} {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

func (id partID) String() string { return hex.EncodeToString(id[:]) }

// partSuffix ends every part file name.
const partSuffix = ".part"

// path returns the part's file: dir/ab/abcdef….part, for messages. The
// cache itself names it relative to its fan-out directory (slot, name).
func (id partID) path(dir string) string {
	return filepath.Join(dir, id.String()[:2], id.name(partSuffix))
}

// slot is the fan-out directory of id's files: DIR/ab, ab being id[0] in hex.
func (id partID) slot() int { return int(id[0]) }

// name is the name of id's file with suffix in its fan-out directory.
func (id partID) name(suffix string) string { return id.String() + suffix }

// parsePartName returns the partID named by a file name in subdirectory
// sub, or false if the name is not a part file's name for that directory.
func parsePartName(sub, name string) (partID, bool) { return parseName(sub, name, partSuffix) }

// parseName parses <hex id><suffix> in subdirectory sub.
func parseName(sub, name, suffix string) (partID, bool) {
	var id partID
	if len(name) != 2*len(id)+len(suffix) || name[2*len(id):] != suffix || name[:2] != sub {
		return id, false
	}
	if _, err := hex.Decode(id[:], []byte(name[:2*len(id)])); err != nil {
		return id, false
	}
	if id.String() != name[:2*len(id)] { // upper-case hex is not ours
		return id, false
	}
	return id, true
}
