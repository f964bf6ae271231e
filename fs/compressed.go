package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"golang.org/x/sync/errgroup"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/fetcher"
)

// CompressedSuffix marks an object stored in the seekable zstd format by
// segfs push: the mount shows it without the suffix, at its logical size.
const CompressedSuffix = ".zst"

// Entry is one file of the tree: a remote object, and for a seekable zstd
// object its seek table, which gives the file's logical size.
type Entry struct {
	Name  string         // path shown in the mount
	Obj   fetcher.Object // the remote object
	Table *compress.SeekTable
}

// Size returns the size the file shows.
func (e Entry) Size() int64 {
	if e.Table != nil {
		return e.Table.Size
	}
	return e.Obj.Size
}

// Entries turns a listing into the files of the tree. Each object whose
// key ends in CompressedSuffix and whose tail parses as a seek table is
// shown under its name without the suffix; one whose tail does not parse is
// shown as it is, with a warning. A tail that cannot be read because the
// remote fails (the store's retries exhausted) is an error: showing that
// object as it is would let a transient failure rename a file. One that
// changed or vanished since the listing is shown as it is (its reads fail
// with ESTALE, as for any object changed after the listing). Keys the
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
func Entries(ctx context.Context, store fetcher.Store, objects []fetcher.Object, parallel int, log *slog.Logger) ([]Entry, error) {
	entries := make([]Entry, len(objects))
	for i, o := range objects {
		entries[i] = Entry{Name: o.Key, Obj: o}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	for i := range entries {
		e := &entries[i]
		name, ok := strings.CutSuffix(e.Obj.Key, CompressedSuffix)
		if !ok || name == "" || strings.HasSuffix(name, "/") || !validKey(e.Obj.Key) {
			continue
		}
		g.Go(func() error {
			t, err := readSeekTable(gctx, store, e.Obj)
			switch {
			case err == nil:
				e.Name, e.Table = name, t
			case gctx.Err() != nil:
				return gctx.Err()
			case errors.Is(err, errTailRead) && !errors.Is(err, fetcher.ErrChanged) && !errors.Is(err, fetcher.ErrNotFound):
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
// failed fetch gives an error wrapping errTailRead.
func readSeekTable(ctx context.Context, store fetcher.Store, obj fetcher.Object) (*compress.SeekTable, error) {
	n := compress.TailSize(obj.Size)
	for range 2 {
		tail := make([]byte, n)
		if err := store.ReadRange(ctx, obj, obj.Size-n, tail); err != nil {
			return nil, fmt.Errorf("%w: %w", errTailRead, err)
		}
		t, err := compress.ParseSeekTable(tail, obj.Size)
		var more *compress.NeedMoreError
		if errors.As(err, &more) && more.Need > n && more.Need <= obj.Size {
			n = more.Need
			continue
		}
		return t, err
	}
	return nil, fmt.Errorf("seek table of %s: still short after a second read", obj.Key)
}

// FrameReader serves logical ranges of seekable zstd objects. It fetches
// the compressed bytes of the frames a read touches through the Reader
// (so through the part cache and the fetch pool, with readahead),
// verifies and decodes them, and keeps hot decoded frames in memory.
type FrameReader struct {
	// Immutable after construction.
	r      *Reader
	dec    *compress.Decoder
	frames *ristretto.Cache[string, []byte]
	log    *slog.Logger

	hits, decodes, decodedBytes, decodeNanos atomic.Int64
}

// FrameStats is a snapshot of a FrameReader's counters.
type FrameStats struct {
	Hits         int64 // frames served decoded from memory
	Decodes      int64 // frames decoded (successfully or not)
	DecodedBytes int64 // logical bytes of the frames decoded successfully
	// DecodeTime is the wall time spent in the decoder, summed over the
	// decodes (concurrent decodes add up; a busy machine inflates it).
	DecodeTime time.Duration
}

// Stats returns the counters. It may be called concurrently with reads.
func (fr *FrameReader) Stats() FrameStats {
	return FrameStats{
		Hits:         fr.hits.Load(),
		Decodes:      fr.decodes.Load(),
		DecodedBytes: fr.decodedBytes.Load(),
		DecodeTime:   time.Duration(fr.decodeNanos.Load()),
	}
}

// NewFrameReader returns a FrameReader over r whose decoded frames take at
// most about memory bytes. Close it after use.
//
// The frame cache is ristretto: its TinyLFU admission keeps frames that
// are read often while a sequential scan streams past them, and a miss
// only costs a decode of bytes that are local by then.
func NewFrameReader(r *Reader, memory int64, log *slog.Logger) (*FrameReader, error) {
	dec, err := compress.NewDecoder()
	if err != nil {
		return nil, fmt.Errorf("frame reader: %w", err)
	}
	frames, err := ristretto.NewCache(&ristretto.Config[string, []byte]{
		NumCounters: max(memory/(256<<10), 64) * 10, // ten per frame it can hold
		MaxCost:     max(memory, 1),
		BufferItems: 64,
	})
	if err != nil {
		dec.Close()
		return nil, fmt.Errorf("frame reader: %w", err)
	}
	return &FrameReader{r: r, dec: dec, frames: frames, log: log}, nil
}

// Close releases the decoder and the frame cache.
func (fr *FrameReader) Close() {
	fr.frames.Close()
	fr.dec.Close()
}

// ReadAt reads up to len(dest) logical bytes of e at off into dest and
// returns the filled prefix; a read at or past the end returns none. A
// frame that fails to decode or verify fails the read with an error
// naming the object and the frame; nothing of it is kept.
func (fr *FrameReader) ReadAt(ctx context.Context, e Entry, dest []byte, off int64, seq *Sequence) ([]byte, error) {
	t := e.Table
	if off < 0 {
		return nil, fmt.Errorf("read %s at %d: negative offset", e.Name, off)
	}
	if off >= t.Size || len(dest) == 0 {
		return dest[:0], nil
	}
	end := min(off+int64(len(dest)), t.Size)
	first, last := t.FramesFor(off, end-off)
	out := dest[:0]
	for i := first; i <= last; i++ {
		f := t.Frames[i]
		if f.Size == 0 {
			continue
		}
		data, err := fr.frame(ctx, e, i, seq)
		if err != nil {
			return nil, err
		}
		lo, hi := max(off, f.Off)-f.Off, min(end, f.Off+f.Size)-f.Off
		out = append(out, data[lo:hi]...)
	}
	return out, nil
}

// frame returns decoded frame i of e, from memory or fetched and decoded.
func (fr *FrameReader) frame(ctx context.Context, e Entry, i int, seq *Sequence) ([]byte, error) {
	key := e.Obj.Key + "\x00" + e.Obj.ETag + "\x00" + strconv.Itoa(i)
	if data, ok := fr.frames.Get(key); ok {
		fr.hits.Add(1)
		return data, nil
	}
	f := e.Table.Frames[i]
	comp := make([]byte, f.CompSize)
	got, err := fr.r.ReadAt(ctx, e.Obj, comp, f.CompOff, seq)
	if err != nil {
		return nil, err
	}
	if int64(len(got)) != f.CompSize {
		return nil, fmt.Errorf("%s frame %d: %d of %d compressed bytes: %w", e.Obj.Key, i, len(got), f.CompSize, compress.ErrCorrupt)
	}
	start := time.Now()
	data, err := fr.dec.DecodeFrame(f, got, nil)
	fr.decodeNanos.Add(int64(time.Since(start)))
	fr.decodes.Add(1)
	if err != nil {
		return nil, fmt.Errorf("%s frame %d: %w", e.Obj.Key, i, err)
	}
	fr.decodedBytes.Add(int64(len(data)))
	fr.frames.Set(key, data, int64(len(data)))
	return data, nil
}
