package view

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
)

// RemoteStore is an OpenSearch remote segment store repository as a whole
// (issue 37): its indices, each index's shards, each shard resolved on
// demand. Top is the store of the repository's root (the bucket, or the
// local directory); every store it opens below it shares Top's client
// (fetcher.Sub), and every entry it returns is keyed below Top, so that
// one engine (one fetch pool, one cache) reads every shard.
type RemoteStore struct {
	Top  fetcher.Store
	Base string // the base path below Top; "" for none
	// IndexUUID, when set, narrows the repository to one index: its
	// shards are the top level.
	IndexUUID string
	Log       *slog.Logger
}

// IndexRef is one index of a repository: its UUID and where its shards
// are (from its remote-index-path file; the fixed type without one).
type IndexRef struct {
	UUID          string
	PathType      layout.PathType
	HashAlgorithm layout.HashAlgorithm
	Shards        int  // from the index path file; 0 when unknown (fixed, no file)
	FromFile      bool // PathType and Shards come from an index path file
	// Hidden is a directory of the base path whose name has the form of
	// a hashed path's hash (looksHashed): a listing does not show it,
	// a lookup by its name opens it.
	Hidden bool
	// file is the index path file a listing found, not read yet
	// (Complete reads it).
	file fetcher.Object
}

// Complete returns ref with what its index path file says, when a
// listing found one it did not read (one GET); else ref as it is.
func (r *RemoteStore) Complete(ctx context.Context, ref IndexRef) (IndexRef, error) {
	if ref.file.Key == "" || ref.FromFile {
		return ref, nil
	}
	return r.readIndexFile(ctx, ref.UUID, ref.file)
}

// readIndexFile reads index uuid's index path file obj.
func (r *RemoteStore) readIndexFile(ctx context.Context, uuid string, obj fetcher.Object) (IndexRef, error) {
	ref := IndexRef{UUID: uuid, PathType: layout.Fixed, HashAlgorithm: layout.FNV1aComposite1}
	if obj.Size > layout.MaxIndexPathSize {
		return ref, fmt.Errorf("%w: %s: listed with %d bytes, more than the %d segfs reads of an index path file", ErrLayout, obj.Key, obj.Size, layout.MaxIndexPathSize)
	}
	raw, err := readSmall(ctx, r.Top, obj.Key)
	if err != nil {
		return ref, fmt.Errorf("%w: %s: %w", ErrLayout, obj.Key, err)
	}
	ip, err := layout.ParseIndexPath(raw)
	if err != nil {
		return ref, fmt.Errorf("%w: %s: %w", ErrLayout, obj.Key, err)
	}
	if ip.IndexUUID != uuid {
		return ref, fmt.Errorf("%w: %s names index %s", ErrLayout, obj.Key, ip.IndexUUID)
	}
	ref.PathType, ref.Shards, ref.FromFile = ip.PathType, ip.ShardCount, true
	if ip.HasHashAlgorithm {
		ref.HashAlgorithm = ip.HashAlgorithm
	}
	return ref, nil
}

// open is the repository's opener: sub-stores of Top.
func (r *RemoteStore) open(ctx context.Context, sub string) (fetcher.Store, error) {
	return fetcher.Sub(r.Top, sub)
}

// indexFiles returns the index path files below the base path, by index
// UUID as their names give it (remote_path_<uuid>#...). One listing.
func (r *RemoteStore) indexFiles(ctx context.Context) (map[string]fetcher.Object, error) {
	dir := path.Join(r.Base, layout.IndexPathDir)
	st, err := r.open(ctx, dir)
	if err != nil {
		if errors.Is(err, fetcher.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	objs, err := st.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", st, err)
	}
	out := map[string]fetcher.Object{}
	for _, o := range objs {
		uuid, ok := layout.IndexPathFileUUID(o.Key)
		if !ok || strings.Contains(o.Key, "/") {
			continue
		}
		if validDirName(uuid) {
			o.Key = path.Join(dir, o.Key) // below Top
			out[uuid] = o
		}
	}
	return out, nil
}

// validDirName reports whether name can be one directory of the mount:
// not empty, no separator, not a dot name.
func validDirName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// Indices returns the indices the repository holds: those with an index
// path file (their file found, not read), and the directories of the
// base path (the fixed path type's; Hidden those whose names look like a
// hash), sorted by UUID. Two listings, at once.
func (r *RemoteStore) Indices(ctx context.Context) ([]IndexRef, error) {
	var files map[string]fetcher.Object
	var ferr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		files, ferr = r.indexFiles(ctx)
	}()
	dirs, err := fetcher.ListDirs(ctx, r.Top, strings.Trim(r.Base, "/"))
	<-done
	if err := errors.Join(ferr, err); err != nil {
		return nil, err
	}
	set := map[string]IndexRef{}
	for _, d := range dirs {
		if d != layout.IndexPathDir && validDirName(d) {
			set[d] = IndexRef{UUID: d, PathType: layout.Fixed, HashAlgorithm: layout.FNV1aComposite1, Hidden: looksHashed(d)}
		}
	}
	for u, obj := range files {
		set[u] = IndexRef{UUID: u, file: obj}
	}
	out := make([]IndexRef, 0, len(set))
	for _, u := range slices.Sorted(maps.Keys(set)) {
		out = append(out, set[u])
	}
	return out, nil
}

// looksHashed reports whether a directory of the base path has the form
// of a hashed_infix path's hash rather than of an index UUID (22
// characters): an FNV1aComposite1 hash (a character, then 14 binary
// digits) or an FNV1aBase64 one (11 characters). The root's listing
// does not show them (Hidden); an index of such a name still opens by
// name.
func looksHashed(name string) bool {
	switch len(name) {
	case 11:
		return true
	case 15:
		return strings.Trim(name[1:], "01") == ""
	}
	return false
}

// Index returns what the repository says of index uuid: its index path
// file if it has one, else the fixed path type, if its directory exists
// (ok false: neither).
func (r *RemoteStore) Index(ctx context.Context, uuid string) (ref IndexRef, ok bool, err error) {
	if !validDirName(uuid) {
		return IndexRef{}, false, nil
	}
	ref = IndexRef{UUID: uuid, PathType: layout.Fixed, HashAlgorithm: layout.FNV1aComposite1}
	files, err := r.indexFiles(ctx)
	if err != nil {
		return ref, false, err
	}
	if obj, found := files[uuid]; found {
		ref, err := r.readIndexFile(ctx, uuid, obj)
		return ref, err == nil, err
	}
	shards, err := fetcher.ListDirs(ctx, r.Top, path.Join(strings.Trim(r.Base, "/"), uuid))
	if err != nil {
		return ref, false, err
	}
	return ref, len(shards) > 0, nil
}

// Shards returns the shard numbers of an index, ascending: 0 to n-1 when
// its index path file says n, else the numeric directories below its
// fixed path.
func (r *RemoteStore) Shards(ctx context.Context, ref IndexRef) ([]int, error) {
	if ref.FromFile {
		out := make([]int, ref.Shards)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	dirs, err := fetcher.ListDirs(ctx, r.Top, path.Join(strings.Trim(r.Base, "/"), ref.UUID))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, d := range dirs {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 && strconv.Itoa(n) == d {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Shard resolves one shard of an index as a one-shard mount does
// (OpenSearch.Resolve, its newest metadata), and returns it with its
// entries named below prefix and keyed below Top. Problems of the shard
// (Shard.Err) are the caller's to judge: a mount refuses it, verify
// reports them.
func (r *RemoteStore) Shard(ctx context.Context, ref IndexRef, shard int, prefix string) (*Shard, []entry.Entry, error) {
	o := OpenSearch{IndexUUID: ref.UUID, Shard: shard, PathType: ref.PathType, HashAlgorithm: ref.HashAlgorithm,
		PathTypeSet: true, HashSet: true, indexPathRead: true}
	sh, err := o.Resolve(ctx, r.open, r.Base, r.Log)
	if err != nil {
		return nil, nil, err
	}
	return sh, EntriesBelow(sh, prefix), nil
}

// EntriesBelow returns a resolved shard's entries named below prefix
// and keyed below the repository's root (its data path before each
// blob's name).
func EntriesBelow(sh *Shard, prefix string) []entry.Entry {
	out := make([]entry.Entry, len(sh.Entries))
	for i, e := range sh.Entries {
		e.Name = prefix + e.Name
		if e.Inline == nil {
			e.Obj.Key = path.Join(sh.DataPath, e.Obj.Key)
		}
		out[i] = e
	}
	return out
}
