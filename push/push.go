package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/fetcher"
)

// CompressedSuffix is appended to the key of a compressed file. It is the
// suffix the mount recognises (fs.CompressedSuffix).
const CompressedSuffix = ".zst"

// Metadata keys set on every object written to S3.
const (
	MetaSHA256 = "segfs-source-sha256"
	MetaSize   = "segfs-source-size"
)

// ErrChanged reports a local file whose size or content changed between
// the moment push hashed it and the moment it was read for the upload.
// Nothing is stored under the file's key by that attempt; push it again
// once the file is stable.
var ErrChanged = errors.New("file changed while being pushed")

// Options configure Run.
type Options struct {
	// Dir is the local directory to push; Dest is s3://bucket[/prefix] or
	// file:///dir.
	Dir, Dest string

	// CompressMinSize is the smallest file size that is compressed.
	CompressMinSize int64
	// CompressMatch are globs (path.Match) on a file's base name; a file
	// is compressed if it matches one and is at least CompressMinSize.
	// "*" matches every file. Empty means none.
	CompressMatch []string
	// Encoder configures the seekable zstd encoder.
	Encoder compress.EncoderOptions
	// Parallel is the number of files processed at once (default 4).
	Parallel int
	// TmpDir holds the compressed temporary files. Default os.TempDir().
	TmpDir string
	// DryRun decides and reports what would be done, writes nothing.
	DryRun bool
	// Delete removes, after every file was pushed, the objects below
	// Dest that no local file accounts for (neither KEY nor KEY.zst of a
	// local file). Off by default: a push only adds and replaces.
	Delete bool

	// Store configures the S3 client (Region, Endpoint, PathStyle,
	// Logger).
	Store fetcher.Config

	// OnBytes, if set, is called as local bytes are processed (read for
	// upload or compression, or skipped). OnFile, if set, is called when a
	// file is done, and for each object deleted by Delete. Both may be
	// called concurrently.
	OnBytes func(n int64)
	OnFile  func(FileResult)
	// OnStart, if set, is called once the local files are listed, with
	// their number and total size.
	OnStart func(files int, bytes int64)
}

// Action is what happened to one file.
type Action string

const (
	Raw        Action = "raw"        // uploaded as it is
	Compressed Action = "compressed" // uploaded as KEY.zst
	Skipped    Action = "skipped"    // the target was up to date
	Deleted    Action = "deleted"    // a remote object no local file accounts for, removed (Options.Delete)
)

// FileResult describes one pushed file, or one deleted object.
type FileResult struct {
	Key        string // key below the destination, without ".zst" (for Deleted: the object's key)
	Target     string // key written (or that would be): Key or Key+".zst"
	Action     Action
	Size       int64  // local size (for Deleted: 0)
	StoredSize int64  // bytes written (the compressed size); 0 if skipped or in a dry run
	Removed    string // the other form of the file, deleted after the upload; "" if none
	Took       time.Duration
}

// Summary totals a push.
type Summary struct {
	Raw, Compressed, Skipped, Removed int
	// Deleted counts the objects removed (or, in a dry run, that would
	// be) because no local file accounts for them (Options.Delete).
	Deleted                     int
	RawBytes                    int64 // local bytes uploaded raw
	CompressedIn, CompressedOut int64 // logical and stored bytes of the compressed files
	SkippedBytes                int64
	Elapsed                     time.Duration
	DryRun                      bool
}

// Ratio is CompressedIn / CompressedOut, or 0 if nothing was compressed.
func (s Summary) Ratio() float64 {
	if s.CompressedOut == 0 {
		return 0
	}
	return float64(s.CompressedIn) / float64(s.CompressedOut)
}

// target is a destination store. Its methods may be called concurrently.
type target interface {
	// list returns every key below the destination. A destination that
	// does not exist yet lists empty.
	list(ctx context.Context) ([]string, error)
	// upToDate reports whether key holds the local file (size, sha256).
	upToDate(ctx context.Context, key string, size int64, sha string, compressed bool) (bool, error)
	// put writes r (size bytes) under key atomically: if put fails, or
	// r returns an error instead of io.EOF, nothing new is visible under
	// key.
	put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) error
	// remove deletes key; a missing key is not an error.
	remove(ctx context.Context, key string) error
	String() string
}

type localFile struct {
	path, key  string
	size       int64
	compressed bool
	// dev and ino identify the file the walk saw (its Lstat): the file
	// opened to be hashed and uploaded must be this one (openListed).
	dev, ino uint64
}

func (f localFile) target() string {
	if f.compressed {
		return f.key + CompressedSuffix
	}
	return f.key
}

func (f localFile) other() string {
	if f.compressed {
		return f.key
	}
	return f.key + CompressedSuffix
}

func (o *Options) validate() error {
	for _, g := range o.CompressMatch {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("--compress-match %q: %w", g, err)
		}
	}
	if o.CompressMinSize < 0 {
		return fmt.Errorf("compress min size %d: must not be negative", o.CompressMinSize)
	}
	// A frame past the limit a mount applies by default would make the
	// object unreadable there (fs.FrameConfig.MaxFrameSize).
	if o.Encoder.FrameSize > compress.DefaultFrameLimit {
		return fmt.Errorf("frame size %d: must be at most %d, the largest frame a segfs mount decodes by default", o.Encoder.FrameSize, compress.DefaultFrameLimit)
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.TmpDir == "" {
		o.TmpDir = os.TempDir()
	}
	if o.Store.Logger == nil {
		o.Store.Logger = slog.Default()
	}
	return nil
}

// wantCompressed is the hybrid policy: a file is compressed if it is at
// least CompressMinSize bytes and its base name matches a glob.
func (o *Options) wantCompressed(name string, size int64) bool {
	if size < o.CompressMinSize {
		return false
	}
	for _, g := range o.CompressMatch {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// Run pushes opt.Dir to opt.Dest. It stops at the first error; files
// already pushed stay pushed, and a new run resumes by skipping them.
// Objects are deleted (the other form of a file whose policy changed,
// and with opt.Delete the objects no local file accounts for) only after
// the upload they make redundant succeeded.
func Run(ctx context.Context, opt Options) (Summary, error) {
	if err := opt.validate(); err != nil {
		return Summary{DryRun: opt.DryRun}, err
	}
	files, err := walk(&opt)
	if err != nil {
		return Summary{DryRun: opt.DryRun}, err
	}
	tgt, err := openTarget(ctx, &opt)
	if err != nil {
		return Summary{DryRun: opt.DryRun}, err
	}
	return run(ctx, &opt, tgt, files)
}

// openTarget checks the destination (fetcher.Open gives clear errors for
// a missing bucket or wrong credentials) and returns its target.
func openTarget(ctx context.Context, opt *Options) (target, error) {
	src, err := fetcher.ParseSource(opt.Dest)
	if err != nil {
		return nil, fmt.Errorf("bad destination: %w", err)
	}
	if src.Scheme == "file" {
		if !opt.DryRun {
			if err := os.MkdirAll(src.Dir, 0o755); err != nil {
				return nil, fmt.Errorf("destination: %w", err)
			}
		}
		return &dirTarget{dir: src.Dir}, nil
	}
	store, err := fetcher.Open(ctx, opt.Dest, opt.Store)
	if err != nil {
		return nil, err
	}
	client, err := fetcher.NewS3Client(ctx, opt.Dest, opt.Store)
	if err != nil {
		return nil, err
	}
	return newS3Target(client, src, store, opt.Store.Logger), nil
}

// run pushes files to tgt: see Run.
func run(ctx context.Context, opt *Options, tgt target, files []localFile) (Summary, error) {
	start := time.Now()
	sum := Summary{DryRun: opt.DryRun}
	keys, err := tgt.list(ctx)
	if err != nil {
		return sum, fmt.Errorf("list %s: %w", tgt, err)
	}
	existing := make(map[string]bool, len(keys))
	for _, k := range keys {
		existing[k] = true
	}
	targets := make(map[string]string, len(files)) // target key -> local path
	for _, f := range files {
		if p, dup := targets[f.target()]; dup {
			return sum, fmt.Errorf("%s and %s would both be stored as %s", p, f.path, f.target())
		}
		targets[f.target()] = f.path
	}

	if opt.OnStart != nil {
		var total int64
		for _, f := range files {
			total += f.size
		}
		opt.OnStart(len(files), total)
	}
	var mu sync.Mutex
	add := func(r FileResult) {
		mu.Lock()
		sum.add(r)
		mu.Unlock()
		if opt.OnFile != nil {
			opt.OnFile(r)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opt.Parallel)
	for _, f := range files {
		g.Go(func() error {
			t0 := time.Now()
			r, err := pushFile(gctx, opt, tgt, f)
			if err != nil {
				return err
			}
			// The new form is stored: only now is the other one redundant.
			if o := f.other(); existing[o] && targets[o] == "" {
				if !opt.DryRun {
					if err := tgt.remove(gctx, o); err != nil {
						return fmt.Errorf("delete %s (the other form of %s): %w", o, f.key, err)
					}
				}
				r.Removed = o
			}
			r.Took = time.Since(t0)
			add(r)
			return nil
		})
	}
	err = g.Wait()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err == nil && opt.Delete {
		err = deleteStale(ctx, opt, tgt, files, keys, add)
	}
	sum.Elapsed = time.Since(start)
	return sum, err
}

func (s *Summary) add(r FileResult) {
	switch r.Action {
	case Raw:
		s.Raw++
		s.RawBytes += r.Size
	case Compressed:
		s.Compressed++
		s.CompressedIn += r.Size
		s.CompressedOut += r.StoredSize
	case Skipped:
		s.Skipped++
		s.SkippedBytes += r.Size
	case Deleted:
		s.Deleted++
	}
	if r.Removed != "" {
		s.Removed++
	}
}

// staleKeys returns the keys that neither form of any local file
// accounts for, sorted.
func staleKeys(files []localFile, keys []string) []string {
	wanted := make(map[string]bool, 2*len(files))
	for _, f := range files {
		wanted[f.key] = true
		wanted[f.key+CompressedSuffix] = true
	}
	var stale []string
	for _, k := range keys {
		if !wanted[k] {
			stale = append(stale, k)
		}
	}
	slices.Sort(stale)
	return stale
}

// deleteStale removes (or in a dry run reports) the stale keys, up to
// opt.Parallel at a time.
func deleteStale(ctx context.Context, opt *Options, tgt target, files []localFile, keys []string, add func(FileResult)) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opt.Parallel)
	for _, k := range staleKeys(files, keys) {
		g.Go(func() error {
			t0 := time.Now()
			if !opt.DryRun {
				if err := tgt.remove(gctx, k); err != nil {
					return fmt.Errorf("delete %s (no local file): %w", k, err)
				}
			}
			add(FileResult{Key: k, Target: k, Action: Deleted, Took: time.Since(t0)})
			return nil
		})
	}
	return g.Wait()
}

// walk lists the regular files below opt.Dir, sorted by key, with the
// device and inode of each. Symbolic links and other non-regular files
// are left out.
func walk(opt *Options) ([]localFile, error) {
	fi, err := os.Stat(opt.Dir)
	switch {
	case err != nil:
		return nil, fmt.Errorf("local directory: %w", err)
	case !fi.IsDir():
		return nil, fmt.Errorf("local directory %s: not a directory", opt.Dir)
	}
	var files []localFile
	err = filepath.WalkDir(opt.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			if !d.IsDir() {
				opt.Store.Logger.Warn("not a regular file; left out", "path", p)
			}
			return nil
		}
		info, err := d.Info() // an Lstat: d is not a link
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no device and inode numbers", p)
		}
		rel, err := filepath.Rel(opt.Dir, p)
		if err != nil {
			return err
		}
		files = append(files, localFile{
			path:       p,
			key:        filepath.ToSlash(rel),
			size:       info.Size(),
			compressed: opt.wantCompressed(d.Name(), info.Size()),
			dev:        uint64(st.Dev),
			ino:        st.Ino,
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", opt.Dir, err)
	}
	slices.SortFunc(files, func(a, b localFile) int { return strings.Compare(a.key, b.key) })
	return files, nil
}
