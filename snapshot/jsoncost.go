package snapshot

import "fmt"

// MaxIndexNBuilt bounds what decoding one index-N may build, as
// indexNCost estimates it before json.Unmarshal runs. Real index-N files
// are large for their indices' lists of snapshot uuids, which cost about
// twice their bytes (a uuid of 22 bytes, its string header and its slot:
// 56 bytes for the 25 of `"uuid",`), so files of up to some 55 MB of
// them decode. Elements that cost far more than their bytes (`{}` as a
// snapshot: 112 bytes for 3) are refused long before: 60 MB of them
// would take 4 GB (issue 42).
const MaxIndexNBuilt = 128 << 20

// MaxIndexNDecoded bounds the memory one index-N's decode holds: the
// file as read (MaxBlobSize) and what decoding it builds
// (MaxIndexNBuilt). The garbage of json's growing slices, up to four
// times as much, is not held: the Go memory limit reclaims it.
const MaxIndexNDecoded = MaxBlobSize + MaxIndexNBuilt

// What indexNCost charges, by where a value sits in the document (its
// depth: the arrays and objects around it) and what holds it. Each is
// what json.Unmarshal into ParseIndexN's types may allocate for it at
// most, measured and rounded up, and twice a slot in a slice, which may
// hold its old array and its new one while it grows.
const (
	// snapshotCost is an element at depth 2 of an array: a SnapshotInfo
	// of the repository's snapshots (56 bytes).
	snapshotCost = 112
	// indexCost is a member at depth 2 of an object: an entry of the
	// indices map, its key and IndexInfo (88 bytes) in a table that may
	// be half empty after it grew.
	indexCost = 224
	// listCost is an element at depth 4 of an array: a uuid of an
	// index's snapshots (a string header in a slice), or a shard
	// generation (a pointer in a slice and the string header it points
	// to).
	listCost = 32
)

// maxJSONDepth is encoding/json's own bound on nesting.
const maxJSONDepth = 10000

// MaxIndexNString bounds the bytes of a string of index-N, escaped as the
// file holds it: names and uuids of a few dozen bytes (an index name has
// at most 255). json decodes a string that is escaped or not ASCII
// through a buffer that grows, twice as large as what it decodes to;
// and a name may reach an error message.
const MaxIndexNString = 64 << 10

// indexNCost estimates what json.Unmarshal of b into ParseIndexN's types
// would build, from b's bytes alone and allocating nothing: each value
// where those types put one (snapshotCost, indexCost, listCost), and the
// bytes of every string, three for each byte not ASCII (an invalid one
// decodes to U+FFFD) and whole words. Values the types do not hold cost
// nothing. It stops once the estimate is above limit and returns it. A
// string longer than MaxIndexNString, or nesting deeper than json takes,
// is an error.
//
// The estimate does not depend on member names: json matches them
// without regard to case, and a value costs as if its name matched. For
// b that is not JSON it returns some estimate or an error; json.Unmarshal
// refuses such b before it allocates anything.
func indexNCost(b []byte, limit int64) (int64, error) {
	var (
		cost  int64
		depth int                         // the arrays and objects open
		array [maxJSONDepth/64 + 1]uint64 // bit d-1: the container at depth d is an array
	)
	inArray := func() bool { return depth > 0 && array[(depth-1)/64]&(1<<((depth-1)%64)) != 0 }
	for i := 0; i < len(b) && cost <= limit; i++ {
		c := b[i]
		switch c {
		case ' ', '\t', '\n', '\r', ',':
			continue
		case ':':
			if depth == 2 && !inArray() {
				cost += indexCost
			}
			continue
		case '}', ']':
			if depth > 0 {
				depth--
			}
			continue
		}
		// c starts a value, or a member's name (a string in an object).
		if inArray() {
			switch depth {
			case 2:
				cost += snapshotCost
			case 4:
				cost += listCost
			}
		}
		switch c {
		case '{', '[':
			if depth == maxJSONDepth {
				return cost, fmt.Errorf("nesting deeper than %d", maxJSONDepth)
			}
			w, bit := depth/64, uint64(1)<<(depth%64)
			array[w] &^= bit
			if c == '[' {
				array[w] |= bit
			}
			depth++
		case '"':
			at, n := i, int64(0)
			for i++; i < len(b) && b[i] != '"'; i++ {
				if i-at > MaxIndexNString {
					return cost, fmt.Errorf("a string at offset %d longer than %d bytes, the most segfs takes (MaxIndexNString)", at, MaxIndexNString)
				}
				switch {
				case b[i] == '\\':
					i++ // the escaped byte: \" does not end the string
					n += 2
				case b[i] >= 0x80:
					n += 3
				default:
					n++
				}
			}
			cost += (n + 7) &^ 7
		default: // a number, true, false or null
			for i+1 < len(b) && !jsonDelim(b[i+1]) {
				i++
			}
		}
	}
	return cost, nil
}

// jsonDelim reports whether c ends a number or literal.
func jsonDelim(c byte) bool {
	switch c {
	case ',', ':', '}', ']', '{', '[', '"', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}
