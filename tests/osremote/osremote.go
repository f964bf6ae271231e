// Package osremote writes shards in the layout of OpenSearch's remote
// segment store, for segfs's tests and demo: Lucene-like files (valid
// codec headers and footers around seeded bytes) uploaded as
// <name>__<uuid> blobs under the shard's data path, a metadata file per
// refresh naming them, a lock file per metadata file, and optionally the
// index's remote-index-path file. It follows the format notes in
// layout/ and uses layout's encoder, so what it writes is what segfs's
// parser accepts; the tests check the mount against the files given.
package osremote

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/tests/lucenegen"
)

// Put stores data under key (relative to the repository's root: the
// bucket, or the local directory).
type Put func(key string, data []byte) error

// DirPut returns a Put that writes below the local directory root, a
// repository of the fs kind.
func DirPut(root string) Put {
	return func(key string, data []byte) error {
		p := filepath.Join(root, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, data, 0o644)
	}
}

// Options name the shard and how its repository lays it out.
type Options struct {
	Base          string // the repository's base path; "" for none
	IndexUUID     string
	Shard         int
	PathType      layout.PathType
	HashAlgorithm layout.HashAlgorithm
	// Version and Body are the metadata files' format (layout.Metadata).
	Version int
	Body    string
	// IndexPathFile also writes <Base>/remote-index-path/remote_path_...
	// with the path type and hash algorithm.
	IndexPathFile bool
	// SegmentInfosFromFiles makes the metadata's SegmentInfos the bytes
	// of the refresh's own segments_<gen>, as a node's are those of its
	// commit, instead of generated ones: for an index Lucene wrote, whose
	// segments_N a generated one cannot stand in for.
	SegmentInfosFromFiles bool
	Seed                  uint64
}

// Remote writes refreshes of one shard. Not safe for concurrent use.
type Remote struct {
	o        Options
	put      Put
	uploaded map[string]string // "name\x00checksum" -> blob name: a file two refreshes share is one blob
	rng      *rand.Rand
	counter  int64
	indexed  bool // the remote-index-path file is written
}

// New returns a Remote writing with put.
func New(put Put, o Options) *Remote {
	return &Remote{o: o, put: put, uploaded: map[string]string{}, rng: rand.New(rand.NewPCG(o.Seed, 0x05))}
}

// Path returns the key prefix of kind ("data", "metadata", "lock_files").
func (r *Remote) Path(kind string) string {
	return layout.ShardPath(r.o.PathType, r.o.HashAlgorithm, r.o.Base, r.o.IndexUUID, r.o.Shard, "segments", kind)
}

// Refresh is one uploaded state of the shard.
type Refresh struct {
	MetadataName string
	Metadata     *layout.Metadata
	Blobs        map[string]string // Lucene name -> blob key below the root
	// SegmentInfos are the bytes a mount shows as segments_<gen>: the
	// metadata's, which differ from the uploaded segments_N blob (as a
	// real node's refresh bytes may).
	SegmentInfos []byte
}

// Upload uploads the files of one refresh at primary term term and
// segments generation gen (files not uploaded before, by name and
// checksum; others are shared), then the metadata file and its lock file.
// files must hold segments_<gen in base 36> when the body carries
// SegmentInfos.
func (r *Remote) Upload(files map[string][]byte, term, gen int64) (*Refresh, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	ref := &Refresh{Blobs: map[string]string{}}
	md := &layout.Metadata{Version: r.o.Version, Body: r.o.Body, Generation: -1, PrimaryTerm: -1}
	var length int64
	for _, n := range names {
		data := files[n]
		foot, err := lucene.CheckFile(data)
		if err != nil {
			return nil, fmt.Errorf("osremote: %s: %w", n, err)
		}
		k := n + "\x00" + fmt.Sprint(foot.Checksum)
		blob, ok := r.uploaded[k]
		if !ok {
			blob = n + "__" + r.uuid()
			if err := r.put(path.Join(r.Path("data"), blob), data); err != nil {
				return nil, fmt.Errorf("osremote: upload %s: %w", n, err)
			}
			r.uploaded[k] = blob
		}
		ref.Blobs[n] = path.Join(r.Path("data"), blob)
		md.Files = append(md.Files, layout.FileEntry{Name: n, Uploaded: blob, Checksum: foot.Checksum, Length: int64(len(data)), WrittenByMajor: 10})
		if !strings.HasPrefix(n, "segments_") {
			length += int64(len(data))
		}
	}
	if r.o.Body != "2.6" {
		segs := []string{}
		for _, n := range names {
			if strings.HasSuffix(n, ".si") {
				segs = append(segs, strings.TrimSuffix(n, ".si"))
			}
		}
		if r.o.SegmentInfosFromFiles {
			sn := layout.SegmentsFileName(gen)
			if md.SegmentInfos = files[sn]; md.SegmentInfos == nil {
				return nil, fmt.Errorf("osremote: SegmentInfosFromFiles: the refresh has no %s", sn)
			}
		} else {
			md.SegmentInfos = lucenegen.GenerateSegmentsN(gen, segs, r.o.Seed+uint64(gen)*7919+1)
		}
		md.Generation, md.PrimaryTerm = gen, term
		ref.SegmentInfos = md.SegmentInfos
	}
	if r.o.Version >= 2 || r.o.Body == "2.10" || r.o.Body == "" {
		md.Checkpoint = &layout.Checkpoint{IndexName: "segfs-test", IndexUUID: r.o.IndexUUID, ShardID: r.o.Shard,
			PrimaryTerm: term, SegmentsGen: gen, SegmentInfosVersion: gen * 10, Length: length, Codec: "Lucene101"}
		if r.o.Version >= 2 {
			md.Checkpoint.CreatedTimestamp = 1_700_000_000_000_000_000 + gen
		}
	}
	raw, err := layout.EncodeMetadata(md)
	if err != nil {
		return nil, fmt.Errorf("osremote: encode metadata: %w", err)
	}
	r.counter++
	name := layout.FormatMetadataName(layout.MetadataName{PrimaryTerm: term, Generation: gen, TranslogGeneration: gen,
		UploadCounter: r.counter, NodeHash: "-1234567", CreatedMillis: 1_700_000_000_000 + gen, Version: r.o.Version})
	if err := r.put(path.Join(r.Path("metadata"), name), raw); err != nil {
		return nil, fmt.Errorf("osremote: upload metadata: %w", err)
	}
	if err := r.put(path.Join(r.Path("lock_files"), name+"___node-1.lock"), nil); err != nil {
		return nil, fmt.Errorf("osremote: upload lock file: %w", err)
	}
	if r.o.IndexPathFile && !r.indexed {
		if err := r.writeIndexPath(); err != nil {
			return nil, err
		}
		r.indexed = true
	}
	ref.MetadataName, ref.Metadata = name, md
	return ref, nil
}

// writeIndexPath writes the index's remote-index-path file.
func (r *Remote) writeIndexPath() error {
	kinds := []string{"data", "metadata", "lock_files"}
	var paths []string
	for shard := 0; shard <= r.o.Shard; shard++ {
		for _, k := range kinds {
			paths = append(paths, layout.ShardPath(r.o.PathType, r.o.HashAlgorithm, r.o.Base, r.o.IndexUUID, shard, "segments", k)+"/")
		}
	}
	doc := map[string]any{
		"version":           "1",
		"index_uuid":        r.o.IndexUUID,
		"shard_count":       r.o.Shard + 1,
		"path_type":         strings.ToUpper(r.o.PathType.String()),
		"path_creation_map": map[string][]string{"segments": kinds},
		"paths":             paths,
	}
	if r.o.PathType != layout.Fixed {
		doc["path_hash_algorithm"] = strings.ToUpper(r.o.HashAlgorithm.String())
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	// OpenSearch names it remote_path_<uuid>#<index metadata version>#<file version>#<random UUID>.
	name := fmt.Sprintf("remote_path_%s#2#1#%s", r.o.IndexUUID, r.uuid())
	return r.put(path.Join(r.o.Base, layout.IndexPathDir, name), raw)
}

// uuid returns a 20-character URL-safe name, as OpenSearch's time-based
// UUIDs are.
func (r *Remote) uuid() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := make([]byte, 20)
	for i := range b {
		b[i] = alphabet[r.rng.IntN(len(alphabet))]
	}
	return string(b)
}

// ShardFiles returns a small Lucene-like shard: per segment its metadata
// files and data files, sizes scaled by scale bytes, and segments_<gen>.
func ShardFiles(segments []string, gen int64, scale int64, seed uint64) (map[string][]byte, error) {
	files := map[string][]byte{}
	sizes := map[string]int64{".si": 400, ".fnm": 1500, ".fdm": 300, ".fdx": 900, ".tmd": 2000, ".tip": 5000,
		".dvm": 700, ".nvm": 200, ".fdt": scale, ".tim": scale / 2, ".doc": scale / 3, ".pos": scale / 4, ".dvd": scale / 5, ".nvd": scale / 16}
	// A file's bytes are a function of the seed and its name alone, so
	// that a segment is the same in every refresh that holds it, as a
	// Lucene segment is immutable.
	exts := slices.Sorted(maps.Keys(sizes))
	for _, seg := range segments {
		for _, ext := range exts {
			size := sizes[ext]
			name := seg + ext
			size = max(size, lucenegen.GeneratedMinSize(name))
			h := fnv.New64a()
			h.Write([]byte(name))
			data, err := lucenegen.GenerateFile(name, size, seed*1000+h.Sum64())
			if err != nil {
				return nil, err
			}
			files[name] = data
		}
	}
	files[layout.SegmentsFileName(gen)] = lucenegen.GenerateSegmentsN(gen, segments, seed)
	return files, nil
}
