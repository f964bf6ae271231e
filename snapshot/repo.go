package snapshot

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Repository is what a repository's root index-N says: its snapshots, in
// the order they were taken, and its indices.
type Repository struct {
	Generation int64
	Snapshots  []SnapshotInfo
	Indices    map[string]IndexInfo // by index name
}

// SnapshotInfo is one snapshot of index-N.
type SnapshotInfo struct {
	Name    string `json:"name"`
	UUID    string `json:"uuid"`
	State   int    `json:"state"` // 1: SUCCESS
	Version string `json:"version"`
}

// MaxIndexShards bounds the shards an index of index-N may claim
// (OpenSearch's own limit is 1024 by default).
const MaxIndexShards = 1 << 16

// StateSuccess is a snapshot that completed.
const StateSuccess = 1

// IndexInfo is one index of index-N: its id (its directory under
// indices/), the snapshots that hold it and, from Elasticsearch 7.6 on,
// the current generation of each of its shards (one entry per shard;
// an entry may be null).
type IndexInfo struct {
	ID               string    `json:"id"`
	Snapshots        []string  `json:"snapshots"` // snapshot uuids
	ShardGenerations []*string `json:"shard_generations,omitempty"`
	// ShardPathType is where the index's shard directories are: 0 (none
	// written: every Elasticsearch repository) indices/<id>/<shard>
	// below the base path, 1 and 2 hashed (OpenSearch's PathType codes
	// hashed_prefix and hashed_infix).
	ShardPathType int `json:"shard_path_type,omitempty"`
}

// State names a snapshot's state code (SnapshotState).
func State(code int) string {
	switch code {
	case 0:
		return "IN_PROGRESS"
	case StateSuccess:
		return "SUCCESS"
	case 2:
		return "FAILED"
	case 3:
		return "PARTIAL"
	case 4:
		return "INCOMPATIBLE"
	}
	return fmt.Sprintf("STATE_%d", code)
}

// ParseLatest reads index.latest: the big-endian generation N of the
// current index-N.
func ParseLatest(raw []byte) (int64, error) {
	if len(raw) != 8 {
		return 0, fmt.Errorf("%w: index.latest of %d bytes, want 8", ErrBlob, len(raw))
	}
	g := int64(binary.BigEndian.Uint64(raw))
	if g < 0 {
		return 0, fmt.Errorf("%w: index.latest says generation %d", ErrBlob, g)
	}
	return g, nil
}

// IndexN is the name of the root index file of generation gen.
func IndexN(gen int64) string { return "index-" + strconv.FormatInt(gen, 10) }

// MaxSnapshots bounds the snapshots an index-N may list, and those one
// of its indices may name: a snapshot every five minutes kept for more
// than a year. MaxIndices bounds its indices: more than a cluster holds
// by far, though a repository keeps the indices of its snapshots after
// the cluster deleted them.
const (
	MaxSnapshots = 1 << 17
	MaxIndices   = 1 << 18
)

// ParseIndexN reads a repository's root index-N (JSON), at most
// MaxBlobSize bytes, which decoding may not make into more than
// MaxIndexNBuilt (estimated before it starts), nor into more than
// MaxSnapshots snapshots or MaxIndices indices.
func ParseIndexN(raw []byte, gen int64) (*Repository, error) {
	if len(raw) > MaxBlobSize {
		return nil, fmt.Errorf("%w: %s of %d bytes, more than the %d segfs reads", ErrBlob, IndexN(gen), len(raw), MaxBlobSize)
	}
	switch cost, err := indexNCost(raw, MaxIndexNBuilt); {
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %w", ErrBlob, IndexN(gen), err)
	case cost > MaxIndexNBuilt:
		return nil, fmt.Errorf("%w: %s of %d bytes would decode to more than %d bytes, the most segfs builds of an index-N (MaxIndexNBuilt)", ErrBlob, IndexN(gen), len(raw), MaxIndexNBuilt)
	}
	var doc struct {
		Snapshots []SnapshotInfo       `json:"snapshots"`
		Indices   map[string]IndexInfo `json:"indices"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBlob, IndexN(gen), err)
	}
	if len(doc.Snapshots) > MaxSnapshots || len(doc.Indices) > MaxIndices {
		return nil, fmt.Errorf("%w: %s lists %d snapshots and %d indices, more than the %d and %d segfs takes", ErrBlob, IndexN(gen), len(doc.Snapshots), len(doc.Indices), MaxSnapshots, MaxIndices)
	}
	for name, ix := range doc.Indices {
		if len(ix.Snapshots) > MaxSnapshots {
			return nil, fmt.Errorf("%w: %s: index %s is in %d snapshots, more than the %d segfs takes", ErrBlob, IndexN(gen), name, len(ix.Snapshots), MaxSnapshots)
		}
		if !plainName(ix.ID) {
			return nil, fmt.Errorf("%w: %s: index %s has id %q", ErrBlob, IndexN(gen), name, ix.ID)
		}
		if len(ix.ShardGenerations) > MaxIndexShards {
			return nil, fmt.Errorf("%w: %s: index %s has %d shard generations, more than the %d segfs takes", ErrBlob, IndexN(gen), name, len(ix.ShardGenerations), MaxIndexShards)
		}
		if ix.ShardPathType < 0 || ix.ShardPathType > 2 {
			return nil, fmt.Errorf("%w: %s: index %s has shard_path_type %d, not one segfs knows (0, 1 or 2)", ErrBlob, IndexN(gen), name, ix.ShardPathType)
		}
	}
	for _, s := range doc.Snapshots {
		if !plainName(s.UUID) {
			return nil, fmt.Errorf("%w: %s: snapshot %s has uuid %q", ErrBlob, IndexN(gen), s.Name, s.UUID)
		}
	}
	return &Repository{Generation: gen, Snapshots: doc.Snapshots, Indices: doc.Indices}, nil
}

// plainName reports whether s may name a directory or blob of the
// repository: not empty, no separator, not a dot name.
func plainName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' || s[i] == '\\' || s[i] == 0 {
			return false
		}
	}
	return true
}

// Named returns the snapshot named name, if exactly one snapshot of
// the repository has that name (a repository written by a cluster never
// has two; a hostile one may, and then none of them is named).
func (r *Repository) Named(name string) (SnapshotInfo, bool) {
	var out SnapshotInfo
	n := 0
	for _, s := range r.Snapshots {
		if s.Name == name {
			out = s
			n++
		}
	}
	return out, n == 1
}

// Pick returns the snapshot named snapshot (or, for "" or "newest", the
// newest successful snapshot that holds index) and index's entry. A name
// that two snapshots have is an error: segfs never guesses which.
func (r *Repository) Pick(snapshot, index string) (SnapshotInfo, IndexInfo, error) {
	ix, ok := r.Indices[index]
	if !ok {
		return SnapshotInfo{}, IndexInfo{}, fmt.Errorf("no index %q in the repository (generation %d)", index, r.Generation)
	}
	holds := make(map[string]bool, len(ix.Snapshots))
	for _, u := range ix.Snapshots {
		holds[u] = true
	}
	if snapshot == "" || snapshot == "newest" {
		for i := len(r.Snapshots) - 1; i >= 0; i-- {
			if s := r.Snapshots[i]; s.State == StateSuccess && holds[s.UUID] {
				return s, ix, nil
			}
		}
		return SnapshotInfo{}, IndexInfo{}, fmt.Errorf("no successful snapshot holds index %q", index)
	}
	s, ok := r.Named(snapshot)
	if !ok {
		if slices.ContainsFunc(r.Snapshots, func(s SnapshotInfo) bool { return s.Name == snapshot }) {
			return SnapshotInfo{}, IndexInfo{}, fmt.Errorf("snapshot name %q is given to more than one snapshot in the repository (generation %d)", snapshot, r.Generation)
		}
		return SnapshotInfo{}, IndexInfo{}, fmt.Errorf("no snapshot %q in the repository (generation %d)", snapshot, r.Generation)
	}
	if !holds[s.UUID] {
		return SnapshotInfo{}, IndexInfo{}, fmt.Errorf("snapshot %s does not hold index %q", snapshot, index)
	}
	return s, ix, nil
}
