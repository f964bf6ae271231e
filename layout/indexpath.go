package layout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// IndexPathDir is the directory below a repository's base path that
// holds the index path files, each named "remote_path_" followed by
// <indexUUID>#<index metadata version>#<file version>#<random UUID>.
const IndexPathDir = "remote-index-path"

// MaxIndexShards bounds the shards an index may claim (OpenSearch's own
// limit is 1024 by default): a repository mount lists that many
// directories for it.
const MaxIndexShards = 1 << 16

// IndexPath is an index path file (RemoteIndexPath), the plain JSON that
// OpenSearch uploads for each index with a hashed path type, listing
// every shard path the index can have.
type IndexPath struct {
	Version    int // the file's format version; OpenSearch writes "1"
	IndexUUID  string
	ShardCount int
	PathType   PathType
	// HashAlgorithm is meaningful only when HasHashAlgorithm: a Fixed
	// index has none.
	HashAlgorithm    HashAlgorithm
	HasHashAlgorithm bool
	// Categories maps a data category ("segments", "translog") to the
	// kinds the file lists paths of ("data", "metadata", "lock_files").
	Categories map[string][]string
	// Paths are the listed paths as written: each a ShardPath with a
	// trailing "/", in the file's order.
	Paths []string
}

// indexPathJSON is the file's shape. The version is a JSON string in
// OpenSearch's writer; a number is taken too.
type indexPathJSON struct {
	Version         json.RawMessage     `json:"version"`
	IndexUUID       *string             `json:"index_uuid"`
	ShardCount      *int                `json:"shard_count"`
	PathType        *string             `json:"path_type"`
	HashAlgorithm   *string             `json:"path_hash_algorithm"`
	PathCreationMap map[string][]string `json:"path_creation_map"`
	Paths           []string            `json:"paths"`
}

// kindsOf is which kinds each category has (RemoteStoreEnums.DataCategory).
var kindsOf = map[string][]string{
	"segments": {"data", "metadata", "lock_files"},
	"translog": {"data", "metadata"},
}

// MaxIndexPathSize bounds an index path file: OpenSearch writes a few
// hundred bytes (an index's path type, its shard count and the kinds of
// its paths), and what JSON decoding builds of it is bounded by its
// size, so a hostile file of tiny strings cannot make gigabytes.
const MaxIndexPathSize = 1 << 20

// ParseIndexPath parses an index path file and checks it as
// RemoteIndexPath's constructor does: an index UUID, at least one shard,
// a hash algorithm exactly when the path type is hashed, and a non-empty
// map of categories to kinds each category has. Unknown fields are
// ignored, so later additions do not break reading.
func ParseIndexPath(data []byte) (*IndexPath, error) {
	if len(data) > MaxIndexPathSize {
		return nil, fmt.Errorf("layout: index path file of %d bytes, more than the %d segfs reads", len(data), MaxIndexPathSize)
	}
	var j indexPathJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("layout: index path file: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("layout: index path file: data after the JSON object")
	}
	bad := func(format string, args ...any) (*IndexPath, error) {
		return nil, fmt.Errorf("layout: index path file: %s", fmt.Sprintf(format, args...))
	}
	ip := &IndexPath{Categories: j.PathCreationMap, Paths: j.Paths}
	v, err := parseVersion(j.Version)
	if err != nil {
		return bad("version: %v", err)
	}
	ip.Version = v
	switch {
	case j.IndexUUID == nil || *j.IndexUUID == "":
		return bad("no index_uuid")
	case strings.Contains(*j.IndexUUID, "/"):
		return bad("index_uuid %q holds a /", *j.IndexUUID)
	case j.ShardCount == nil || *j.ShardCount < 1:
		return bad("shard_count missing or below 1")
	case *j.ShardCount > MaxIndexShards:
		return bad("shard_count %d, more than the %d segfs takes", *j.ShardCount, MaxIndexShards)
	case j.PathType == nil:
		return bad("no path_type")
	}
	ip.IndexUUID, ip.ShardCount = *j.IndexUUID, *j.ShardCount
	if ip.PathType, err = ParsePathType(*j.PathType); err != nil {
		return bad("%v", err)
	}
	if j.HashAlgorithm != nil {
		if ip.HashAlgorithm, err = ParseHashAlgorithm(*j.HashAlgorithm); err != nil {
			return bad("%v", err)
		}
		ip.HasHashAlgorithm = true
	}
	if ip.HasHashAlgorithm != (ip.PathType != Fixed) {
		return bad("path type %s with hash algorithm %v: a hash algorithm goes with the hashed types only", ip.PathType, j.HashAlgorithm != nil)
	}
	if len(ip.Categories) == 0 {
		return bad("empty path_creation_map")
	}
	for cat, kinds := range ip.Categories {
		known, ok := kindsOf[cat]
		if !ok || len(kinds) == 0 {
			return bad("path_creation_map: unknown category %q or no kinds", cat)
		}
		for _, k := range kinds {
			if !slices.Contains(known, k) {
				return bad("path_creation_map: category %q has no kind %q", cat, k)
			}
		}
	}
	return ip, nil
}

// parseVersion takes a JSON string of decimal digits, or a JSON number.
func parseVersion(raw json.RawMessage) (int, error) {
	if raw == nil {
		return 0, fmt.Errorf("missing")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return 0, fmt.Errorf("%s is neither a string nor a number", raw)
		}
		s = n.String()
	}
	v, err := strconv.Atoi(s)
	if err != nil || !isDecimal(s) {
		return 0, fmt.Errorf("%q is not a decimal", s)
	}
	return v, nil
}

// Base returns the repository base path the listed paths were made
// with, and checks that every listed path is the ShardPath of that base
// for its shard, category and kind (with a trailing "/"), so a file that
// disagrees with this package's hashing is found out. The base is
// derived from the path of shard 0 of the first category's first kind,
// which every file lists.
func (ip *IndexPath) Base() (string, error) {
	want := make(map[string]bool, len(ip.Paths))
	for _, p := range ip.Paths {
		want[p] = true
	}
	cats := make([]string, 0, len(ip.Categories))
	for c := range ip.Categories {
		cats = append(cats, c)
	}
	slices.Sort(cats)
	if len(cats) == 0 || len(ip.Categories[cats[0]]) == 0 {
		return "", fmt.Errorf("layout: index path file of %s lists no categories", ip.IndexUUID)
	}
	cat, kind := cats[0], ip.Categories[cats[0]][0]
	tail := strings.Join([]string{ip.IndexUUID, "0", cat, kind}, "/") + "/"
	var base string
	found := false
	for _, p := range ip.Paths {
		head, ok := strings.CutSuffix(p, tail)
		if !ok {
			continue
		}
		head = strings.TrimSuffix(head, "/")
		hash := PathHash(ip.HashAlgorithm, ip.IndexUUID, 0, cat, kind)
		switch ip.PathType {
		case Fixed:
			base, found = head, true
		case HashedPrefix:
			if head == hash {
				base, found = "", true
			} else if b, ok := strings.CutPrefix(head, hash+"/"); ok {
				base, found = b, true
			}
		case HashedInfix:
			if head == hash {
				base, found = "", true
			} else if b, ok := strings.CutSuffix(head, "/"+hash); ok {
				base, found = b, true
			}
		}
		if found {
			break
		}
	}
	if !found {
		return "", fmt.Errorf("layout: index path file of %s: no path of shard 0 %s/%s that this package's %s hashing makes", ip.IndexUUID, cat, kind, ip.PathType)
	}
	n := 0
	for _, c := range cats {
		for _, k := range ip.Categories[c] {
			for shard := range ip.ShardCount {
				p := ShardPath(ip.PathType, ip.HashAlgorithm, base, ip.IndexUUID, shard, c, k) + "/"
				if !want[p] {
					return "", fmt.Errorf("layout: index path file of %s does not list %s, the %s path of shard %d %s/%s with base %q", ip.IndexUUID, p, ip.PathType, shard, c, k, base)
				}
				n++
			}
		}
	}
	if n != len(want) {
		return "", fmt.Errorf("layout: index path file of %s lists %d paths, %d expected", ip.IndexUUID, len(want), n)
	}
	return base, nil
}

// IndexPathFileUUID returns the index UUID that the name of an index path
// file gives, remote_path_<uuid>#...: the field between the prefix and
// the first "#", exactly (ok false: not such a name). A file is an
// index's only by this field: a UUID that another index's name merely
// contains does not make the file that index's.
func IndexPathFileUUID(name string) (uuid string, ok bool) {
	rest, ok := strings.CutPrefix(name, "remote_path_")
	if !ok {
		return "", false
	}
	uuid, _, _ = strings.Cut(rest, "#")
	return uuid, uuid != ""
}
