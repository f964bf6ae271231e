package view

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/snapshot"
)

// Snapshot names one shard of one index in a snapshot of an
// Elasticsearch or OpenSearch snapshot repository.
type Snapshot struct {
	Name  string // the snapshot; "" or "newest": the newest successful one that holds Index
	Index string // the index's name
	Shard int
}

// SnapshotShard is a resolved shard of a snapshot: the store of its
// shard directory, which the mount reads from, the files it shows, and
// the files the store does not hold as the snapshot says (Problems; a
// mount refuses a shard with any).
type SnapshotShard struct {
	Data     fetcher.Store
	Entries  []entry.Entry
	Problems []Problem
	Info     snapshot.SnapshotInfo
	IndexID  string
	Path     string // the shard directory below the root
	// Joined are the files stored in parts, by blob name: their parts,
	// keyed below Data's inner store (the shard's directory).
	Joined map[string][]fetcher.Object
	// Checksums are the files' Lucene footer checksums the snapshot
	// records (base 36 there), by name; a file whose checksum is not a
	// CRC32 in base 36 (a legacy file) has none.
	Checksums map[string]uint64
}

// Err returns nil if the store holds every file of the snapshot as it
// says, else an error naming the first that it does not.
func (s *SnapshotShard) Err() error {
	return problemsErr("snapshot "+s.Info.Name+": ", s.Problems)
}

// Resolve finds the shard in the repository below base: index.latest
// gives the generation of the root index-N, which names the snapshots
// and the indices; the shard's snap-<uuid>.dat lists its files. Only the
// shard's directory is listed, to check its blobs. Files are shown by
// their Lucene names: a virtual file (v__) from the snapshot's bytes, a
// data blob (__) as the object it is, and a file the repository stored
// in parts (__<uuid>.part0 ... .partN, under a chunk_size below its
// length) as the parts joined (partsStore).
func (s Snapshot) Resolve(ctx context.Context, open Opener, base string, log *slog.Logger) (*SnapshotShard, error) {
	if s.Index == "" {
		return nil, fmt.Errorf("--index: needed with --layout snapshot")
	}
	if s.Shard < 0 {
		return nil, fmt.Errorf("--shard %d: must not be negative", s.Shard)
	}
	_, repo, err := openRoot(ctx, open, base)
	if err != nil {
		return nil, err
	}
	return s.ResolveIn(ctx, open, base, repo, log)
}

// ReadSnapshotRoot reads the root of the snapshot repository below base
// in top: index.latest and the index-N it names.
func ReadSnapshotRoot(ctx context.Context, top fetcher.Store, base string) (*snapshot.Repository, error) {
	return readRoot(ctx, top, base)
}

// ResolveIn is Resolve in a repository whose root was read (repo).
func (s Snapshot) ResolveIn(ctx context.Context, open Opener, base string, repo *snapshot.Repository, log *slog.Logger) (*SnapshotShard, error) {
	top, err := open(ctx, "")
	if err != nil {
		return nil, err
	}
	gen := repo.Generation
	info, ix, err := repo.Pick(s.Name, s.Index)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	shardPath := layout.SnapshotShardPath(layout.PathType(ix.ShardPathType), base, ix.ID, s.Shard)
	data, err := open(ctx, shardPath)
	if err != nil {
		return nil, fmt.Errorf("%w: shard %d of index %s at %s: %w", ErrLayout, s.Shard, s.Index, shardPath, err)
	}
	snapName := "snap-" + info.UUID + ".dat"
	raw, err := readSmall(ctx, data, snapName)
	if err != nil {
		return nil, fmt.Errorf("%w: shard %d of index %s in snapshot %s: %w", ErrLayout, s.Shard, s.Index, info.Name, err)
	}
	ss, err := snapshot.ParseShardSnapshot(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s/%s: %w", ErrLayout, shardPath, snapName, err)
	}
	blobs, err := data.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", data, err)
	}
	byName := make(map[string]fetcher.Object, len(blobs))
	for _, b := range blobs {
		byName[b.Key] = b
	}
	out := &SnapshotShard{Data: data, Info: info, IndexID: ix.ID, Path: shardPath, Checksums: map[string]uint64{}}
	var joined map[string][]fetcher.Object // the files stored in parts, by blob name
	for _, f := range ss.Files {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("shard %d of index %s in snapshot %s: %w", s.Shard, s.Index, info.Name, err)
		}
		if sum, err := strconv.ParseUint(f.Checksum, 36, 64); err == nil && sum <= math.MaxUint32 {
			out.Checksums[f.Name] = sum
		}
		if f.Virtual() {
			b := f.MetaHash
			if b == nil {
				b = []byte{} // an empty virtual file: inline still
			}
			out.Entries = append(out.Entries, entry.Entry{Name: f.Name, Inline: b, Obj: fetcher.Object{Size: f.Length}})
			continue
		}
		objs, pr, err := findParts(ctx, f, out.Checksums[f.Name], byName)
		if err != nil {
			return nil, fmt.Errorf("shard %d of index %s in snapshot %s: %w", s.Shard, s.Index, info.Name, err)
		}
		switch {
		case pr != nil:
			out.Problems = append(out.Problems, *pr)
		case f.NParts() == 1:
			out.Entries = append(out.Entries, entry.Entry{Name: f.Name, Obj: objs[0]})
		default:
			if joined == nil {
				joined = map[string][]fetcher.Object{}
			}
			joined[f.Blob] = objs
			out.Entries = append(out.Entries, entry.Entry{Name: f.Name, Obj: joinParts(f.Blob, objs)})
		}
	}
	if joined != nil {
		out.Data = newPartsStore(data, joined)
		out.Joined = joined
	}
	log.Info("snapshot shard resolved", "snapshot", info.Name, "uuid", info.UUID, "index", s.Index, "index_id", ix.ID,
		"shard", s.Shard, "files", len(out.Entries), "generation", gen)
	return out, nil
}

// ctxEvery is how many parts findParts checks between two looks at its
// context.
const ctxEvery = 4096

// findParts returns the listed objects of f's parts, in order, or the
// problem of its first part that is missing or of another size than
// the snapshot says (one per file). Parts are named as they are
// reached, so the work is bounded by what the listing holds (each part
// found is a listed object) and not by what the lengths claim; ctx is
// checked every ctxEvery parts, its error returned. The problem names
// the file with its checksum, sum.
func findParts(ctx context.Context, f snapshot.FileInfo, sum uint64, byName map[string]fetcher.Object) ([]fetcher.Object, *Problem, error) {
	n := f.NParts()
	objs := make([]fetcher.Object, 0, min(n, int64(len(byName))))
	for i, part := range f.Parts() {
		if i%ctxEvery == ctxEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		b, ok := byName[part.Blob]
		var detail string
		switch {
		case !ok && n > 1:
			detail = fmt.Sprintf("names blob %s for part %d of %s, which does not exist", part.Blob, i, f.Name)
		case !ok:
			detail = fmt.Sprintf("names blob %s for %s, which does not exist", part.Blob, f.Name)
		case b.Size != part.Len && n > 1:
			detail = fmt.Sprintf("says part %d of %s is %d bytes; its blob %s is %d", i, f.Name, part.Len, b.Key, b.Size)
		case b.Size != part.Len:
			detail = fmt.Sprintf("says %s is %d bytes; its blob %s is %d", f.Name, f.Length, b.Key, b.Size)
		default:
			objs = append(objs, b)
			continue
		}
		return nil, &Problem{File: layout.FileEntry{Name: f.Name, Length: f.Length, Checksum: sum}, Missing: !ok, Size: b.Size, Detail: detail}, nil
	}
	return objs, nil, nil
}

// readSmall reads the whole object key of st, at most
// snapshot.MaxBlobSize bytes (what the store claims is checked before
// anything is allocated).
func readSmall(ctx context.Context, st fetcher.Store, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	obj, err := st.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	return readObject(ctx, st, obj)
}

// readObject reads the whole object obj of st, at most
// snapshot.MaxBlobSize bytes (its size checked before anything is
// allocated).
func readObject(ctx context.Context, st fetcher.Store, obj fetcher.Object) ([]byte, error) {
	if obj.Size < 0 || obj.Size > snapshot.MaxBlobSize {
		return nil, fmt.Errorf("%s: listed with %d bytes, more than the %d segfs reads", obj.Key, obj.Size, snapshot.MaxBlobSize)
	}
	buf := make([]byte, obj.Size)
	if err := st.ReadRange(ctx, obj, 0, buf); err != nil {
		return nil, fmt.Errorf("read %s: %w", obj.Key, err)
	}
	return buf, nil
}
