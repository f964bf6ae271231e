package layout

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// PathType is how OpenSearch lays out a shard's blob paths; the values
// are OpenSearch's codes (RemoteStoreEnums.PathType).
type PathType int

const (
	// Fixed is <base>/<indexUUID>/<shard>/<category>/<kind>.
	Fixed PathType = 0
	// HashedPrefix is <hash>/<base>/<indexUUID>/<shard>/<category>/<kind>:
	// the hash first spreads the keys over the bucket's partitions.
	HashedPrefix PathType = 1
	// HashedInfix is <base>/<hash>/<indexUUID>/<shard>/<category>/<kind>.
	HashedInfix PathType = 2
)

var pathTypeNames = []string{Fixed: "fixed", HashedPrefix: "hashed_prefix", HashedInfix: "hashed_infix"}

// ParsePathType parses a path type's name, in any ASCII case: OpenSearch
// writes "HASHED_PREFIX" in index metadata and accepts any case.
func ParsePathType(s string) (PathType, error) {
	for i, name := range pathTypeNames {
		if asciiLower(s) == name {
			return PathType(i), nil
		}
	}
	return 0, fmt.Errorf("layout: unknown path type %q (want fixed, hashed_prefix or hashed_infix)", s)
}

// String returns the lower-case name ParsePathType takes.
func (t PathType) String() string {
	if t >= 0 && int(t) < len(pathTypeNames) {
		return pathTypeNames[t]
	}
	return "PathType(" + strconv.Itoa(int(t)) + ")"
}

// HashAlgorithm is how a hashed path type turns the 64-bit FNV-1a hash
// of a shard's path into a path element; the values are OpenSearch's
// codes (RemoteStoreEnums.PathHashAlgorithm).
type HashAlgorithm int

const (
	// FNV1aBase64 is the hash's 8 big-endian bytes in URL-safe base64
	// without padding: 11 characters.
	FNV1aBase64 HashAlgorithm = 0
	// FNV1aComposite1 is the hash's top 6 bits as one URL-safe base64
	// character, then its next 14 bits as '0' and '1' digits: 15
	// characters. OpenSearch's default.
	FNV1aComposite1 HashAlgorithm = 1
)

var hashAlgorithmNames = []string{FNV1aBase64: "fnv_1a_base64", FNV1aComposite1: "fnv_1a_composite_1"}

// ParseHashAlgorithm parses a hash algorithm's name, in any ASCII case.
func ParseHashAlgorithm(s string) (HashAlgorithm, error) {
	for i, name := range hashAlgorithmNames {
		if asciiLower(s) == name {
			return HashAlgorithm(i), nil
		}
	}
	return 0, fmt.Errorf("layout: unknown path hash algorithm %q (want fnv_1a_base64 or fnv_1a_composite_1)", s)
}

// String returns the lower-case name ParseHashAlgorithm takes.
func (a HashAlgorithm) String() string {
	if a >= 0 && int(a) < len(hashAlgorithmNames) {
		return hashAlgorithmNames[a]
	}
	return "HashAlgorithm(" + strconv.Itoa(int(a)) + ")"
}

// compositeBits is how many of the hash's top bits FNV1aComposite1
// keeps: 6 for the base64 character and 14 written as binary digits.
const compositeBits = 20

// urlBase64 is the alphabet of both algorithms (RemoteStoreUtils).
const urlBase64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// PathHash returns the path element a hashed path type puts in the key
// of one kind of a shard's blobs: the 64-bit FNV-1a hash of the UTF-8
// bytes of indexUUID + decimal shard + category + kind, encoded by alg.
// An alg other than the two defined is a caller's bug and panics.
func PathHash(alg HashAlgorithm, indexUUID string, shard int, category, kind string) string {
	return hashString(alg, indexUUID+strconv.Itoa(shard)+category+kind)
}

// hashString is the 64-bit FNV-1a hash of s's UTF-8 bytes, encoded by
// alg, as RemoteStoreEnums.PathHashAlgorithm writes it.
func hashString(alg HashAlgorithm, s string) string {
	h := fnv.New64a()
	h.Write([]byte(s))
	sum := h.Sum64()
	switch alg {
	case FNV1aBase64:
		return base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, sum))
	case FNV1aComposite1:
		var b strings.Builder
		b.WriteByte(urlBase64[sum>>58])
		for bit := 63 - 6; bit > 63-compositeBits; bit-- {
			b.WriteByte('0' + byte(sum>>bit&1))
		}
		return b.String()
	}
	panic(fmt.Sprintf("layout: hash with unknown %v", alg))
}

// SnapshotShardPath returns the directory, below a snapshot repository's
// bucket root, of one shard of an index: base/indices/<id>/<shard> for
// the fixed path type (every Elasticsearch repository, and OpenSearch's
// default); for the hashed ones (an index snapshotted with the
// repository's shard_path_type set, OpenSearch 2.17 on) the
// FNV1aComposite1 hash of the decimal shard number then the index id
// comes before the base path (hashed_prefix) or after it
// (hashed_infix), as BlobStoreRepository.shardPath builds it. The
// cluster's cluster.snapshot.shard.path.prefix (default none) is not
// applied.
func SnapshotShardPath(pt PathType, base, indexID string, shard int) string {
	sh := strconv.Itoa(shard)
	var elems []string
	switch pt {
	case Fixed:
		elems = []string{base, "indices", indexID, sh}
	case HashedPrefix:
		elems = []string{hashString(FNV1aComposite1, sh+indexID), base, "indices", indexID, sh}
	case HashedInfix:
		elems = []string{base, hashString(FNV1aComposite1, sh+indexID), "indices", indexID, sh}
	default:
		panic(fmt.Sprintf("layout: SnapshotShardPath with unknown %v", pt))
	}
	return joinElems(elems)
}

// ShardPath returns the key prefix, without a leading or trailing "/",
// of one kind of a shard's blobs: category "segments" or "translog", kind
// "data", "metadata" or "lock_files" (segments only). base is the
// repository's base path, "" for none; slashes around it are dropped.
// Fixed does not use alg. A pt other than the three defined is a
// caller's bug and panics.
//
// OpenSearch's cluster.remote_store.segments.path.prefix (a fixed prefix
// for hashed paths) is not applied here: where it is joined to the hash
// is not confirmed.
func ShardPath(pt PathType, alg HashAlgorithm, base, indexUUID string, shard int, category, kind string) string {
	base = strings.Trim(base, "/")
	tail := []string{indexUUID, strconv.Itoa(shard), category, kind}
	var elems []string
	switch pt {
	case Fixed:
		elems = append([]string{base}, tail...)
	case HashedPrefix:
		elems = append([]string{PathHash(alg, indexUUID, shard, category, kind), base}, tail...)
	case HashedInfix:
		elems = append([]string{base, PathHash(alg, indexUUID, shard, category, kind)}, tail...)
	default:
		panic(fmt.Sprintf("layout: ShardPath with unknown %v", pt))
	}
	return joinElems(elems)
}

// joinElems joins path elements with "/", leaving out the empty ones (no
// base path) and the slashes around each.
func joinElems(elems []string) string {
	var b strings.Builder
	for _, e := range elems {
		e = strings.Trim(e, "/")
		if e == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(e)
	}
	return b.String()
}

// asciiLower lower-cases ASCII letters only. Java's
// toUpperCase(Locale.ROOT) would also map a few non-ASCII letters (such
// as dotless ı) onto ASCII ones; no writer produces those, so they are
// refused rather than folded.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
