// Package snaprepo writes Elasticsearch-style snapshot repositories for
// segfs's tests: index.latest, the root index-N (JSON), and per shard its
// snap-<uuid>.dat (snapshot.EncodeShardSnapshot) and its blobs, as the
// reference notes record real clusters writing them: small files
// (.si, segments_N) virtual (v__, their bytes in the metadata), the rest
// data blobs (__<uuid>), each in one part unless PartSize asks for more.
package snaprepo

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"strings"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/snapshot"
)

// Put stores data under key, relative to the repository's root.
type Put func(key string, data []byte) error

// Shard is one shard of one index in one snapshot.
type Shard struct {
	Index string
	Shard int
	Files map[string][]byte // Lucene name -> bytes
}

// Options say how the repository is written.
type Options struct {
	Base     string // the repository's base path; "" for none
	Seed     uint64
	Compress bool  // the repository's compress setting: DEFLATE metadata
	PartSize int64 // chunk_size; 0: none (every file one part)
	// NoShardGenerations writes index-N as clusters before Elasticsearch
	// 7.6 did: no shard_generations, so no shard count.
	NoShardGenerations bool
	// ShardPathType puts the shard directories where OpenSearch does for
	// a repository's shard_path_type (layout.SnapshotShardPath), and
	// index-N says so.
	ShardPathType layout.PathType
}

// Repo writes snapshots into one repository. Not safe for concurrent use.
type Repo struct {
	o         Options
	put       Put
	rng       *rand.Rand
	gen       int64
	snapshots []snapshot.SnapshotInfo
	indices   map[string]*snapshot.IndexInfo
}

// New returns a Repo writing with put.
func New(put Put, o Options) *Repo {
	return &Repo{o: o, put: put, rng: rand.New(rand.NewPCG(o.Seed, 0x36)), indices: map[string]*snapshot.IndexInfo{}}
}

func (r *Repo) uuid() string {
	const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := make([]byte, 22)
	for i := range b {
		b[i] = abc[r.rng.IntN(len(abc))]
	}
	return string(b)
}

// virtual reports whether a cluster stores name as a v__ file.
func virtual(name string) bool {
	return strings.HasSuffix(name, ".si") || strings.HasPrefix(name, "segments_")
}

// Snapshot writes a successful snapshot named name holding shards, then
// the next index-N and index.latest. It returns the snapshot's uuid.
func (r *Repo) Snapshot(name string, shards ...Shard) (string, error) {
	uuid := r.uuid()
	for _, sh := range shards {
		ix := r.indices[sh.Index]
		if ix == nil {
			ix = &snapshot.IndexInfo{ID: r.uuid(), ShardPathType: int(r.o.ShardPathType)}
			r.indices[sh.Index] = ix
		}
		if !slices.Contains(ix.Snapshots, uuid) {
			ix.Snapshots = append(ix.Snapshots, uuid)
		}
		for !r.o.NoShardGenerations && len(ix.ShardGenerations) <= sh.Shard {
			gen := r.uuid()
			ix.ShardGenerations = append(ix.ShardGenerations, &gen)
		}
		dir := layout.SnapshotShardPath(r.o.ShardPathType, r.o.Base, ix.ID, sh.Shard)
		ss := &snapshot.ShardSnapshot{Name: name, IndexVersion: 1}
		for _, n := range slices.Sorted(func(yield func(string) bool) {
			for n := range sh.Files {
				if !yield(n) {
					return
				}
			}
		}) {
			data := sh.Files[n]
			f := snapshot.FileInfo{Name: n, Length: int64(len(data)), PartSize: math.MaxInt64, WrittenBy: "8.7.0"}
			if foot, err := lucene.CheckFile(data); err == nil {
				f.Checksum = base36(foot.Checksum)
			}
			if r.o.PartSize > 0 {
				f.PartSize = r.o.PartSize
			}
			if virtual(n) {
				f.Blob, f.MetaHash = "v__"+r.uuid(), data
			} else {
				f.Blob = "__" + r.uuid()
				for _, p := range f.Parts() {
					if err := r.put(path.Join(dir, p.Blob), data[p.Off:p.Off+p.Len]); err != nil {
						return "", err
					}
				}
			}
			ss.Files = append(ss.Files, f)
		}
		if err := r.put(path.Join(dir, "snap-"+uuid+".dat"), snapshot.EncodeShardSnapshot(ss, r.o.Compress)); err != nil {
			return "", err
		}
	}
	r.snapshots = append(r.snapshots, snapshot.SnapshotInfo{Name: name, UUID: uuid, State: snapshot.StateSuccess, Version: "7.10.2"})
	r.gen++
	doc := map[string]any{"snapshots": r.snapshots, "indices": r.indices, "min_version": "7.9.0"}
	raw, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	if err := r.put(path.Join(r.o.Base, snapshot.IndexN(r.gen)), raw); err != nil {
		return "", err
	}
	latest := binary.BigEndian.AppendUint64(nil, uint64(r.gen))
	return uuid, r.put(path.Join(r.o.Base, "index.latest"), latest)
}

// base36 is Store.digestToString: the checksum in base 36.
func base36(v uint64) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append(b, digits[v%36])
		v /= 36
	}
	slices.Reverse(b)
	return string(b)
}
