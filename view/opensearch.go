package view

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
)

// OpenSearch names one shard of an OpenSearch remote segment store: the
// index UUID and shard number, and how the repository lays its blobs
// out. PathType and HashAlgorithm are taken from the index's
// remote-index-path file when the flags did not set them (PathTypeSet,
// HashSet); a set flag that contradicts that file is an error.
type OpenSearch struct {
	IndexUUID     string
	Shard         int
	PathType      layout.PathType
	PathTypeSet   bool
	HashAlgorithm layout.HashAlgorithm
	HashSet       bool
	// Metadata is "newest" (or "") for the shard's current state, or the
	// name of one metadata file: a point-in-time view of an earlier
	// refresh or commit.
	Metadata string
	// indexPathRead: the path type and hash are the index path file's
	// already (a RemoteStore read it), so Resolve does not look again.
	indexPathRead bool
}

// checkReadSize returns nil if size, what a listing claims for a file
// that is read whole into memory (a metadata or remote-index-path file),
// is one to allocate: not below zero, not above MaxMetadataSize. A
// listing is a remote claim; make would panic on a negative size and
// take what it is told of a huge one.
func checkReadSize(size int64) error {
	switch {
	case size < 0:
		return fmt.Errorf("listed with %d bytes, below zero", size)
	case size > layout.MaxMetadataSize:
		return fmt.Errorf("listed with %d bytes, more than the %d segfs reads", size, layout.MaxMetadataSize)
	}
	return nil
}

// Opener opens the store rooted at sub, a key prefix below the
// repository's root (the bucket, or the local directory).
type Opener func(ctx context.Context, sub string) (fetcher.Store, error)

// Shard is a resolved shard: the store of its data blobs, which the
// mount reads from, the files it shows, and the files of the metadata
// that the store does not hold as the metadata says (Problems): a mount
// refuses a shard with any (Err), verify reports them.
type Shard struct {
	Data         fetcher.Store
	Entries      []entry.Entry
	Problems     []Problem
	MetadataFile string // the metadata file's name
	Metadata     *layout.Metadata
	DataPath     string // the data blobs' prefix below the root
	MetadataPath string // the metadata files' prefix below the root
}

// Problem is a file of the metadata whose blob is missing or is not of
// the metadata's length.
type Problem struct {
	File    layout.FileEntry
	Missing bool   // no blob of that name; else the blob's length differs
	Size    int64  // the blob's length, when there is one
	Detail  string // one line naming the file and the blob
}

// Err returns nil if the store holds every file of the metadata as it
// says, else an error naming the first file that it does not (and how
// many more there are).
func (s *Shard) Err() error {
	return problemsErr("metadata file "+s.MetadataFile+" ", s.Problems)
}

// problemsErr is a shard's Err: nil for no problems, else ErrLayout
// with what names the shard's metadata, the first problem and how many
// more there are.
func problemsErr(what string, problems []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	more := ""
	if n := len(problems) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	return fmt.Errorf("%w: %s%s%s", ErrLayout, what, problems[0].Detail, more)
}

// ErrLayout marks a store that does not hold the shard as a whole: a
// missing or corrupt metadata file, a blob the metadata names that is
// missing or of another length. The mount refuses it; it never shows a
// partial shard.
var ErrLayout = errors.New("not a mountable shard")

// Resolve finds the shard below base in the repository open reaches,
// reads and checks its metadata file, and returns the entries the mount
// shows: every file of the metadata by its Lucene name and length, read
// from its data blob, and segments_N from the metadata's SegmentInfos
// bytes (the uploaded segments_N when the metadata has none). Lock files
// are never looked at.
func (o OpenSearch) Resolve(ctx context.Context, open Opener, base string, log *slog.Logger) (*Shard, error) {
	if o.IndexUUID == "" || strings.Contains(o.IndexUUID, "/") {
		return nil, fmt.Errorf("--index-uuid %q: must be an index UUID", o.IndexUUID)
	}
	if o.Shard < 0 {
		return nil, fmt.Errorf("--shard %d: must not be negative", o.Shard)
	}
	if !o.indexPathRead {
		if err := o.pathsFromIndexFile(ctx, open, base, log); err != nil {
			return nil, err
		}
	}
	mdPath := layout.ShardPath(o.PathType, o.HashAlgorithm, base, o.IndexUUID, o.Shard, "segments", "metadata")
	dataPath := layout.ShardPath(o.PathType, o.HashAlgorithm, base, o.IndexUUID, o.Shard, "segments", "data")
	mdStore, err := open(ctx, mdPath)
	if err != nil {
		return nil, fmt.Errorf("%w: metadata of shard %d of index %s (%s paths) at %s: %w", ErrLayout, o.Shard, o.IndexUUID, o.PathType, mdPath, err)
	}
	data, err := open(ctx, dataPath)
	if err != nil {
		return nil, fmt.Errorf("%w: data of shard %d of index %s at %s: %w", ErrLayout, o.Shard, o.IndexUUID, dataPath, err)
	}
	// The data prefix is listed while the metadata file is found and
	// read: one round trip fewer before the shard shows.
	var blobs []fetcher.Object
	var listErr error
	listed := make(chan struct{})
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(listed)
		if blobs, listErr = data.List(lctx); listErr != nil {
			listErr = fmt.Errorf("list %s: %w", data, listErr)
		}
	}()
	md, name, obj, err := o.newestMetadata(ctx, mdStore)
	if err != nil {
		cancel() // the shard fails: its blobs need no listing
	}
	<-listed
	if err != nil {
		return nil, err
	}
	if listErr != nil {
		return nil, listErr
	}
	entries, problems, err := shardEntries(md, blobs, obj)
	if err != nil {
		return nil, fmt.Errorf("%w: metadata file %s: %w", ErrLayout, name, err)
	}
	log.Info("shard resolved", "index_uuid", o.IndexUUID, "shard", o.Shard, "path_type", o.PathType.String(),
		"metadata", name, "version", md.Version, "files", len(entries), "generation", md.Generation)
	return &Shard{Data: data, Entries: entries, Problems: problems, MetadataFile: name, Metadata: md, DataPath: dataPath, MetadataPath: mdPath}, nil
}

// newestMetadata lists the metadata prefix, picks the file o names (or
// the newest) and reads it.
func (o OpenSearch) newestMetadata(ctx context.Context, mdStore fetcher.Store) (*layout.Metadata, string, fetcher.Object, error) {
	mdObjs, err := mdStore.List(ctx)
	if err != nil {
		return nil, "", fetcher.Object{}, fmt.Errorf("list %s: %w", mdStore, err)
	}
	name, obj, err := o.pickMetadata(mdObjs)
	if err != nil {
		return nil, "", fetcher.Object{}, fmt.Errorf("%w: %s: %w", ErrLayout, mdStore, err)
	}
	md, err := readMetadata(ctx, mdStore, name, obj)
	return md, name, obj, err
}

// readMetadata reads and parses the metadata file name (obj in mdStore),
// refusing a listed size it would not allocate.
func readMetadata(ctx context.Context, mdStore fetcher.Store, name string, obj fetcher.Object) (*layout.Metadata, error) {
	if err := checkReadSize(obj.Size); err != nil {
		return nil, fmt.Errorf("%w: metadata file %s: %w", ErrLayout, name, err)
	}
	raw := make([]byte, obj.Size)
	if err := mdStore.ReadRange(ctx, obj, 0, raw); err != nil {
		return nil, fmt.Errorf("read metadata file %s: %w", name, err)
	}
	md, err := layout.ParseMetadata(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: metadata file %s: %w", ErrLayout, name, err)
	}
	return md, nil
}

// pickMetadata returns the metadata file to mount from a listing of the
// metadata prefix: the newest, as OpenSearch picks it, or the one named.
func (o OpenSearch) pickMetadata(objs []fetcher.Object) (string, fetcher.Object, error) {
	byName := make(map[string]fetcher.Object, len(objs))
	names := make([]string, 0, len(objs))
	for _, obj := range objs {
		if strings.Contains(obj.Key, "/") {
			continue // not a metadata file of this shard
		}
		byName[obj.Key] = obj
		names = append(names, obj.Key)
	}
	name := o.Metadata
	if name == "" || name == "newest" {
		newest, err := layout.NewestMetadata(names)
		if err != nil {
			return "", fetcher.Object{}, err
		}
		name = newest
	}
	obj, ok := byName[name]
	if !ok {
		return "", fetcher.Object{}, fmt.Errorf("no metadata file %s", name)
	}
	return name, obj, nil
}

// shardEntries checks the metadata's files against the data blobs and
// returns the entries to show, in the metadata's (sorted) order, and the
// files whose blob is missing or of another length. mdObj is the
// metadata file's own object: its time is the inline segments_N's. A
// name that is not a plain file name, or an uploaded name that is not a
// plain blob name (layout.CheckBlobName, as ParseMetadata checks it), is an
// error: a blob is matched to the listing by exactly the key it is read
// by, at mount as at refresh.
func shardEntries(md *layout.Metadata, blobs []fetcher.Object, mdObj fetcher.Object) ([]entry.Entry, []Problem, error) {
	if err := checkBlobNames(md.Files); err != nil {
		return nil, nil, err
	}
	byName := make(map[string]fetcher.Object, len(blobs))
	for _, b := range blobs {
		byName[b.Key] = b
	}
	inline := md.SegmentInfos != nil && md.Generation >= 0
	segments := ""
	if inline {
		segments = layout.SegmentsFileName(md.Generation)
	}
	entries := make([]entry.Entry, 0, len(md.Files)+1)
	var problems []Problem
	for _, f := range md.Files {
		if inline && strings.HasPrefix(f.Name, "segments_") {
			continue // served from the metadata's SegmentInfos below
		}
		if f.Name != path.Clean(f.Name) || strings.Contains(f.Name, "/") || !entry.ValidName(f.Name) {
			return nil, nil, fmt.Errorf("file name %q is not a file name", f.Name)
		}
		blob, ok := byName[f.Uploaded]
		switch {
		case !ok:
			problems = append(problems, Problem{File: f, Missing: true,
				Detail: fmt.Sprintf("names blob %s for %s, which does not exist", f.Uploaded, f.Name)})
			continue
		case f.Length >= 0 && blob.Size != f.Length:
			problems = append(problems, Problem{File: f, Size: blob.Size,
				Detail: fmt.Sprintf("says %s is %d bytes; its blob %s is %d", f.Name, f.Length, f.Uploaded, blob.Size)})
			continue
		}
		entries = append(entries, entry.Entry{Name: f.Name, Obj: blob})
	}
	if inline {
		entries = append(entries, entry.Entry{Name: segments, Inline: md.SegmentInfos, Obj: fetcher.Object{ModTime: mdObj.ModTime}})
	}
	return entries, problems, nil
}

// pathsFromIndexFile takes the path type and hash algorithm from the
// index's file under <base>/remote-index-path/, if there is one, where
// the flags left them unset; a flag that contradicts it is an error.
// Without the file the flags (or their defaults) stand.
func (o *OpenSearch) pathsFromIndexFile(ctx context.Context, open Opener, base string, log *slog.Logger) error {
	dir := path.Join(base, layout.IndexPathDir)
	st, err := open(ctx, dir)
	if err != nil {
		log.Debug("no remote-index-path directory", "dir", dir, "err", err)
		return nil
	}
	objs, err := st.List(ctx)
	if err != nil {
		return fmt.Errorf("list %s: %w", st, err)
	}
	for _, obj := range objs {
		if uuid, ok := layout.IndexPathFileUUID(obj.Key); !ok || uuid != o.IndexUUID {
			continue // another index's file: what it holds is not this mount's concern
		}
		// The index's file, by its name, refused as the metadata file
		// is: skipped, the flags' defaults would stand in for what it
		// says, and a wrong path type shows another shard or none.
		if err := checkReadSize(obj.Size); err != nil {
			return fmt.Errorf("%w: %s/%s: %w", ErrLayout, dir, obj.Key, err)
		}
		if obj.Size > layout.MaxIndexPathSize {
			return fmt.Errorf("%w: %s/%s: listed with %d bytes, more than the %d segfs reads of an index path file", ErrLayout, dir, obj.Key, obj.Size, layout.MaxIndexPathSize)
		}
		raw := make([]byte, obj.Size)
		if err := st.ReadRange(ctx, obj, 0, raw); err != nil {
			return fmt.Errorf("read %s/%s: %w", dir, obj.Key, err)
		}
		ip, err := layout.ParseIndexPath(raw)
		if err != nil {
			return fmt.Errorf("%w: %s/%s: %w", ErrLayout, dir, obj.Key, err)
		}
		if ip.IndexUUID != o.IndexUUID {
			continue
		}
		if o.PathTypeSet && o.PathType != ip.PathType {
			return fmt.Errorf("--path-type %s contradicts %s/%s, which says %s", o.PathType, dir, obj.Key, ip.PathType)
		}
		if ip.HasHashAlgorithm {
			if o.HashSet && o.HashAlgorithm != ip.HashAlgorithm {
				return fmt.Errorf("--hash-algorithm %s contradicts %s/%s, which says %s", o.HashAlgorithm, dir, obj.Key, ip.HashAlgorithm)
			}
			o.HashAlgorithm = ip.HashAlgorithm
		}
		o.PathType = ip.PathType
		log.Info("path type from the index's remote-index-path file", "file", dir+"/"+obj.Key,
			"path_type", ip.PathType.String(), "hash_algorithm", ip.HashAlgorithm.String())
		return nil
	}
	return nil
}

// Newer returns the shard as its newest metadata file now shows it, or
// nil if that file is still cur's or records no later state than cur's
// (layout.MetadataNewer: a listing that lacks cur's file must not take the view
// back to an older commit). It lists mdStore, the store of the shard's
// metadata prefix (cur.MetadataPath), and reads the new metadata file,
// whose uploaded names must be plain blob names (layout.CheckBlobName), as at
// mount; it does not list the data prefix again: a blob cur shows under
// the same name and length is known, and every other blob the new
// metadata names is asked for with one HEAD (at most parallel at once). A blob that is missing or of
// another length is a Problem, as at mount: the caller keeps cur's view
// (Err). A shard mounted at a named --metadata never changes: Newer is
// for one mounted at "newest".
func Newer(ctx context.Context, mdStore fetcher.Store, cur *Shard, parallel int) (*Shard, error) {
	mdObjs, err := mdStore.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", mdStore, err)
	}
	newest := OpenSearch{Metadata: "newest"}
	name, obj, err := newest.pickMetadata(mdObjs)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLayout, mdStore, err)
	}
	if !layout.MetadataNewer(name, cur.MetadataFile) { // cur's own file included
		return nil, nil
	}
	md, err := readMetadata(ctx, mdStore, name, obj)
	if err != nil {
		return nil, err
	}
	known := make(map[string]fetcher.Object, len(cur.Entries))
	for _, e := range cur.Entries {
		if e.Inline == nil {
			known[e.Obj.Key] = e.Obj
		}
	}
	if err := checkBlobNames(md.Files); err != nil {
		return nil, fmt.Errorf("%w: metadata file %s: %w", ErrLayout, name, err)
	}
	blobs, err := statBlobs(ctx, cur.Data, md.Files, known, parallel)
	if err != nil {
		return nil, err
	}
	entries, problems, err := shardEntries(md, blobs, obj)
	if err != nil {
		return nil, fmt.Errorf("%w: metadata file %s: %w", ErrLayout, name, err)
	}
	return &Shard{Data: cur.Data, Entries: entries, Problems: problems, MetadataFile: name, Metadata: md, DataPath: cur.DataPath, MetadataPath: cur.MetadataPath}, nil
}

// statBlobs returns the blobs of files: those known as listed before,
// the others as one HEAD each finds them (a blob that is not found is
// left out, for shardEntries to report). Any other failure of a HEAD is
// an error: a transient failure must not read as a missing blob. Every
// uploaded name must be a plain blob name (checkBlobNames, which Newer
// runs first): it is sent as the key it is.
func statBlobs(ctx context.Context, data fetcher.Store, files []layout.FileEntry, known map[string]fetcher.Object, parallel int) ([]fetcher.Object, error) {
	var (
		mu    sync.Mutex
		blobs = make([]fetcher.Object, 0, len(files))
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	var unknown []layout.FileEntry
	for _, f := range files {
		if b, ok := known[f.Uploaded]; ok && (f.Length < 0 || b.Size == f.Length) {
			blobs = append(blobs, b) // before any HEAD runs: no lock needed
			continue
		}
		unknown = append(unknown, f)
	}
	for _, f := range unknown {
		g.Go(func() error {
			b, err := data.Stat(gctx, f.Uploaded)
			switch {
			case errors.Is(err, fetcher.ErrNotFound):
				return nil
			case err != nil:
				return fmt.Errorf("stat %s (%s): %w", f.Uploaded, f.Name, err)
			}
			mu.Lock()
			blobs = append(blobs, b)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return blobs, nil
}

// checkBlobNames returns an error naming the first of files whose
// uploaded name is not a plain blob name (layout.CheckBlobName).
func checkBlobNames(files []layout.FileEntry) error {
	for _, f := range files {
		if err := layout.CheckBlobName(f.Uploaded); err != nil {
			return fmt.Errorf("file %q: uploaded as %w", f.Name, err)
		}
	}
	return nil
}
