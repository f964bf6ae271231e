// Package entry is the file a mount shows, as every layer sees it: a
// remote object (with its seek table when it is stored as seekable
// zstd) or bytes a layout holds, under a name checked by ValidName. It
// is a leaf: the engine, the edge, the layouts and restore share it
// without importing each other.
package entry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/fetcher"
)

// CompressedSuffix marks an object stored in the seekable zstd format by
// segfs push: the mount shows it without the suffix, at its logical size.
const CompressedSuffix = ".zst"

// Entry is one file of the tree: a remote object, and for a seekable zstd
// object its seek table, which gives the file's logical size. An entry
// with Inline set is a file whose bytes a layout already holds (an
// OpenSearch shard's segments_N, from its metadata file): it has no
// object, and its reads never reach the store.
type Entry struct {
	Name   string         // path shown in the mount
	Obj    fetcher.Object // the remote object; zero for an inline entry
	Table  *compress.SeekTable
	Inline []byte // the file's bytes, read-only; nil for a remote object
}

// Size returns the size the file shows.
func (e Entry) Size() int64 {
	switch {
	case e.Inline != nil:
		return int64(len(e.Inline))
	case e.Table != nil:
		return e.Table.Size
	}
	return e.Obj.Size
}

// FromObjects turns a listing into the files of the tree. Each object whose
// key ends in CompressedSuffix and whose tail parses as a seek table is
// shown under its name without the suffix; one whose tail does not parse is
// shown as it is, with a warning. A table with frames larger than the
// mount decodes (reader.FrameConfig.MaxFrameSize) parses and is shown like any
// other: the engine refuses its reads (reader.FrameReader.ReadAt). A
// tail that cannot be read because the remote fails (the store's retries
// exhausted) is an error: showing that object as it is would let a
// transient failure rename a file. One that changed or vanished since
// the listing, or is shorter than listed, is shown as it is (its reads
// fail, as for any object changed after the listing): one bad object
// does not keep a shard from mounting. Keys the
// tree would skip as unusable are not read. Tails are read with at most
// parallel requests.
//
// When both forms of a file are stored, KEY and KEY.zst (segfs push
// writes the new form before it deletes the old one when a file's
// compression policy changes), only one is shown under KEY: the one
// modified later, which is the one push keeps, or the raw one if their
// times are equal or the compressed one has no readable seek table (it
// is then shown as it is). The other is left out with a warning naming
// both.
func FromObjects(ctx context.Context, store fetcher.Store, objects []fetcher.Object, parallel int, log *slog.Logger) ([]Entry, error) {
	return FromObjectsAfter(ctx, store, objects, nil, parallel, log)
}

// FromObjectsAfter is FromObjects for a new listing of a store whose
// entries were prev (a refresh of a mount): an object listed with the
// same key, ETag and size as one of prev is the same immutable version,
// so it keeps the form prev found for it, seek table included, with no
// GET. An idle store's refresh then costs its listing alone.
func FromObjectsAfter(ctx context.Context, store fetcher.Store, objects []fetcher.Object, prev []Entry, parallel int, log *slog.Logger) ([]Entry, error) {
	known := make(map[string]Entry, len(prev))
	for _, e := range prev {
		if e.Inline == nil {
			known[e.Obj.Key] = e
		}
	}
	entries := make([]Entry, len(objects))
	for i, o := range objects {
		entries[i] = Entry{Name: o.Key, Obj: o}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	for i := range entries {
		e := &entries[i]
		name, ok := strings.CutSuffix(e.Obj.Key, CompressedSuffix)
		if !ok || name == "" || strings.HasSuffix(name, "/") || !ValidName(e.Obj.Key) {
			continue
		}
		if k, ok := known[e.Obj.Key]; ok && k.Obj.ETag == e.Obj.ETag && k.Obj.Size == e.Obj.Size {
			e.Name, e.Table = k.Name, k.Table
			continue
		}
		g.Go(func() error {
			t, err := readSeekTable(gctx, store, e.Obj)
			switch {
			case err == nil:
				e.Name, e.Table = name, t
			case gctx.Err() != nil:
				return gctx.Err()
			case errors.Is(err, errTailRead) && !errors.Is(err, fetcher.ErrChanged) && !errors.Is(err, fetcher.ErrNotFound) && !errors.Is(err, fetcher.ErrShort):
				return fmt.Errorf("seek table of %s: %w", e.Obj.Key, err)
			default:
				log.Warn("not a readable seekable zstd object; shown as it is", "key", e.Obj.Key, "err", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("reading seek tables: %w", err)
	}
	return oneFormEach(entries, log), nil
}

// oneFormEach leaves out, of each raw and compressed entry shown under
// the same name, the one modified earlier (the compressed one on a tie).
func oneFormEach(entries []Entry, log *slog.Logger) []Entry {
	raw := make(map[string]int, len(entries))
	for i, e := range entries {
		if e.Table == nil {
			raw[e.Name] = i
		}
	}
	drop := make(map[int]bool)
	for i, e := range entries {
		j, ok := raw[e.Name]
		if e.Table == nil || !ok {
			continue
		}
		shown, hidden := j, i
		if e.Obj.ModTime.After(entries[j].Obj.ModTime) {
			shown, hidden = i, j
		}
		drop[hidden] = true
		log.Warn("both a raw and a compressed object are stored for one file; showing the newer (the raw one on a tie)",
			"file", e.Name, "shown", entries[shown].Obj.Key, "hidden", entries[hidden].Obj.Key)
	}
	if len(drop) == 0 {
		return entries
	}
	out := make([]Entry, 0, len(entries)-len(drop))
	for i, e := range entries {
		if !drop[i] {
			out = append(out, e)
		}
	}
	return out
}

// errTailRead marks a seek table that could not be read from the store,
// as opposed to one that was read and did not parse.
var errTailRead = errors.New("reading the object's tail failed")

// readSeekTable fetches an object's tail and parses its seek table,
// fetching once more if the table is longer than the first guess. A
// failed fetch gives an error wrapping errTailRead. It never allocates
// more than compress.MaxTableSize for a tail, whatever size the listing
// claims for the object.
func readSeekTable(ctx context.Context, store fetcher.Store, obj fetcher.Object) (*compress.SeekTable, error) {
	if obj.Size < 0 {
		// A listing's lie: the object alone is affected, shown as it is.
		return nil, fmt.Errorf("listed with %d bytes: no seek table to read", obj.Size)
	}
	n := compress.TailSize(obj.Size)
	for range 2 {
		tail := make([]byte, n)
		if err := store.ReadRange(ctx, obj, obj.Size-n, tail); err != nil {
			return nil, fmt.Errorf("%w: %w", errTailRead, err)
		}
		t, err := compress.ParseSeekTable(tail, obj.Size)
		var more *compress.NeedMoreError
		if errors.As(err, &more) && more.Need > n && more.Need <= min(obj.Size, compress.MaxTableSize) {
			n = more.Need
			continue
		}
		return t, err
	}
	return nil, fmt.Errorf("seek table of %s: still short after a second read", obj.Key)
}

// ValidName reports whether key is a clean relative path that names a file
// below the root: no empty, "." or ".." elements, no leading slash, and no
// element longer than the kernel accepts.
func ValidName(key string) bool {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
		return false
	}
	for _, name := range strings.Split(key, "/") {
		if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsRune(name, 0) {
			return false
		}
	}
	return true
}
