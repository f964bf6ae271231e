package push

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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

	// Store configures the S3 client (Region, Endpoint, PathStyle,
	// Logger).
	Store fetcher.Config

	// OnBytes, if set, is called as local bytes are processed (read for
	// upload or compression, or skipped). OnFile, if set, is called when a
	// file is done. Both may be called concurrently.
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
)

// FileResult describes one pushed file.
type FileResult struct {
	Key        string // key below the destination, without ".zst"
	Target     string // key written (or that would be): Key or Key+".zst"
	Action     Action
	Size       int64  // local size
	StoredSize int64  // bytes written (the compressed size); 0 if skipped or in a dry run
	Removed    string // the other form of the file, deleted after the upload; "" if none
	Took       time.Duration
}

// Summary totals a push.
type Summary struct {
	Raw, Compressed, Skipped, Removed int
	RawBytes                          int64 // local bytes uploaded raw
	CompressedIn, CompressedOut       int64 // logical and stored bytes of the compressed files
	SkippedBytes                      int64
	Elapsed                           time.Duration
	DryRun                            bool
}

// Ratio is CompressedIn / CompressedOut, or 0 if nothing was compressed.
func (s Summary) Ratio() float64 {
	if s.CompressedOut == 0 {
		return 0
	}
	return float64(s.CompressedIn) / float64(s.CompressedOut)
}

// target is a destination store.
type target interface {
	// upToDate reports whether key holds the local file (size, sha256).
	upToDate(ctx context.Context, key string, size int64, sha string, compressed bool) (bool, error)
	// put writes r (size bytes) under key atomically.
	put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) error
	remove(ctx context.Context, key string) error
	String() string
}

type localFile struct {
	path, key  string
	size       int64
	compressed bool
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
func Run(ctx context.Context, opt Options) (Summary, error) {
	start := time.Now()
	sum := Summary{DryRun: opt.DryRun}
	if err := opt.validate(); err != nil {
		return sum, err
	}
	files, err := walk(&opt)
	if err != nil {
		return sum, err
	}
	src, err := fetcher.ParseSource(opt.Dest)
	if err != nil {
		return sum, fmt.Errorf("bad destination: %w", err)
	}
	if src.Scheme == "file" && !opt.DryRun {
		if err := os.MkdirAll(src.Dir, 0o755); err != nil {
			return sum, err
		}
	}
	// fetcher.Open checks the bucket and the credentials with clear
	// errors; its listing says which keys exist.
	store, err := fetcher.Open(ctx, opt.Dest, opt.Store)
	var existing map[string]bool
	switch {
	case err != nil && src.Scheme == "file" && opt.DryRun && errors.Is(err, fs.ErrNotExist):
		existing = map[string]bool{}
	case err != nil:
		return sum, err
	default:
		objs, err := store.List(ctx)
		if err != nil {
			return sum, fmt.Errorf("list %s: %w", store, err)
		}
		existing = make(map[string]bool, len(objs))
		for _, o := range objs {
			existing[o.Key] = true
		}
	}
	var tgt target
	if src.Scheme == "s3" {
		client, err := fetcher.NewS3Client(ctx, opt.Dest, opt.Store)
		if err != nil {
			return sum, err
		}
		tgt = newS3Target(client, src, opt.Parallel)
	} else {
		tgt = &dirTarget{dir: src.Dir}
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
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opt.Parallel)
	for _, f := range files {
		g.Go(func() error {
			t0 := time.Now()
			r, err := pushFile(gctx, &opt, tgt, f)
			if err != nil {
				return err
			}
			if o := f.other(); existing[o] && targets[o] == "" {
				if !opt.DryRun {
					if err := tgt.remove(gctx, o); err != nil {
						return fmt.Errorf("delete %s (the other form of %s): %w", o, f.key, err)
					}
				}
				r.Removed = o
			}
			r.Took = time.Since(t0)
			mu.Lock()
			switch r.Action {
			case Raw:
				sum.Raw++
				sum.RawBytes += r.Size
			case Compressed:
				sum.Compressed++
				sum.CompressedIn += r.Size
				sum.CompressedOut += r.StoredSize
			case Skipped:
				sum.Skipped++
				sum.SkippedBytes += r.Size
			}
			if r.Removed != "" {
				sum.Removed++
			}
			mu.Unlock()
			if opt.OnFile != nil {
				opt.OnFile(r)
			}
			return nil
		})
	}
	err = g.Wait()
	sum.Elapsed = time.Since(start)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return sum, err
}

// walk lists the regular files below opt.Dir, sorted by key. Symbolic
// links and other non-regular files are left out.
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
		info, err := d.Info()
		if err != nil {
			return err
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
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", opt.Dir, err)
	}
	slices.SortFunc(files, func(a, b localFile) int { return strings.Compare(a.key, b.key) })
	return files, nil
}

// pushFile hashes f, skips it if the target is up to date, and otherwise
// uploads it raw or compressed.
func pushFile(ctx context.Context, opt *Options, tgt target, f localFile) (FileResult, error) {
	r := FileResult{Key: f.key, Target: f.target(), Size: f.size, Action: Raw}
	if f.compressed {
		r.Action = Compressed
	}
	sha, err := hashFile(f.path)
	if err != nil {
		return r, err
	}
	ok, err := tgt.upToDate(ctx, f.target(), f.size, sha, f.compressed)
	if err != nil {
		return r, fmt.Errorf("check %s: %w", f.target(), err)
	}
	if ok {
		r.Action = Skipped
		if opt.OnBytes != nil {
			opt.OnBytes(f.size)
		}
		return r, nil
	}
	if opt.DryRun {
		return r, nil
	}
	meta := map[string]string{MetaSHA256: sha, MetaSize: strconv.FormatInt(f.size, 10)}
	in, err := os.Open(f.path)
	if err != nil {
		return r, err
	}
	defer in.Close()
	var body io.Reader = &countingReader{r: in, add: opt.OnBytes}
	size := f.size
	if f.compressed {
		tmp, err := os.CreateTemp(opt.TmpDir, "segfs-push-*.zst")
		if err != nil {
			return r, fmt.Errorf("temporary file for %s: %w", f.key, err)
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		n, out, err := compress.Encode(ctx, tmp, body, opt.Encoder)
		if err != nil {
			return r, fmt.Errorf("compress %s: %w", f.path, err)
		}
		if n != f.size {
			return r, fmt.Errorf("compress %s: read %d bytes, want %d: the file changed during the push", f.path, n, f.size)
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return r, err
		}
		body, size = tmp, out
	}
	if err := tgt.put(ctx, f.target(), body, size, meta); err != nil {
		return r, fmt.Errorf("upload %s to %s: %w", f.path, f.target(), err)
	}
	r.StoredSize = size
	return r, nil
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r   io.Reader
	add func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 && c.add != nil {
		c.add(int64(n))
	}
	return n, err
}
