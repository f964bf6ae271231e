// Package verify checks the files of a store or of a local directory
// as `segfs verify` does: each has a valid Lucene footer, its checksum
// is the one the layout's metadata records, and with Deep the CRC32 of
// every byte is the footer's (lucene.Check). A file that cannot be read
// is a result, never an error of the run.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/reader"
)

// Result is one file's outcome.
type Result struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	// Expected is the checksum the layout's metadata records, Footer the
	// one in the file's footer, Computed the CRC32 of its bytes (Deep);
	// each as 8 hex digits, "" when not known.
	Expected string `json:"expected,omitempty"`
	Footer   string `json:"footer,omitempty"`
	Computed string `json:"computed,omitempty"`
	Status   string `json:"status"` // ok, damaged, missing, skipped
	Problem  string `json:"problem,omitempty"`
}

// Statuses of a Result.
const (
	OK      = "ok"
	Damaged = "damaged"
	Missing = "missing"
	Skipped = "skipped"
)

// Bad reports whether r is damaged or missing.
func (r Result) Bad() bool { return r.Status == Damaged || r.Status == Missing }

// File is what is checked of one file, wherever it is read from.
type File struct {
	Name     string
	Size     int64
	Expected *uint64 // the metadata's checksum, if the layout has one
	Open     func() (lucene.ReadAtFunc, func(), error)
}

// Config says how files are checked.
type Config struct {
	Deep     bool // also every byte's CRC32 against the footer
	Checkers int  // files checked at once (at least 1)
	// Progress, if set, is told the bytes read as a Deep check reads
	// them, and Done each file checked; both from several goroutines.
	Progress func(n int)
	Done     func()
}

// Reader returns the entries as files read through rd, with the
// checksums of sums (by name) as expected; an inline file (a layout's
// own bytes) has none.
func Reader(entries []entry.Entry, sums map[string]uint64, rd *reader.Reader) []File {
	files := make([]File, 0, len(entries))
	for _, e := range entries {
		f := File{Name: e.Name, Size: e.Size()}
		if sum, ok := sums[e.Name]; ok && e.Inline == nil {
			f.Expected = &sum
		}
		f.Open = func() (lucene.ReadAtFunc, func(), error) {
			h := rd.Open(e, reader.Place{}, true)
			read := func(ctx context.Context, p []byte, off int64) (int, error) {
				data, release, err := h.Read(ctx, p, off)
				n := copy(p, data)
				if release != nil {
					release()
				}
				return n, err
			}
			return read, h.Close, nil
		}
		files = append(files, f)
	}
	return files
}

// Local returns the regular files below dir, by path relative to it.
func Local(dir string) ([]File, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("verify %s: not a directory (a store is s3://bucket[/prefix] or file:///dir)", dir)
	}
	var files []File
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, File{Name: filepath.ToSlash(rel), Size: info.Size(), Open: func() (lucene.ReadAtFunc, func(), error) {
			f, err := os.Open(p)
			if err != nil {
				return nil, nil, err
			}
			read := func(_ context.Context, b []byte, off int64) (int, error) {
				n, err := f.ReadAt(b, off)
				if errors.Is(err, io.EOF) {
					err = nil
				}
				return n, err
			}
			return read, func() { f.Close() }, nil
		}})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", dir, err)
	}
	return files, nil
}

// Check verifies every file, cfg.Checkers at once, and returns their
// results in the order of files. An error is returned only for what
// stops the whole run (ctx ended).
func Check(ctx context.Context, files []File, cfg Config) ([]Result, error) {
	results := make([]Result, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, cfg.Checkers))
	for i, f := range files {
		g.Go(func() error {
			results[i] = checkFile(gctx, f, cfg)
			if cfg.Done != nil {
				cfg.Done()
			}
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("verify interrupted: %w", err)
	}
	return results, nil
}

// checkFile checks one file: a valid footer, its checksum against the
// layout's metadata when there is one, and with Deep the CRC32 of every
// byte against the footer.
func checkFile(ctx context.Context, f File, cfg Config) Result {
	r := Result{Name: f.Name, Size: f.Size, Status: OK}
	if f.Expected != nil {
		r.Expected = lucene.FormatChecksum(*f.Expected)
	}
	damaged := func(format string, args ...any) Result {
		r.Status, r.Problem = Damaged, fmt.Sprintf(format, args...)
		return r
	}
	if f.Size < lucene.FooterLength {
		if f.Size == 0 && strings.HasSuffix(f.Name, ".lock") {
			r.Status, r.Problem = Skipped, "a lock file, not a Lucene file"
			return r
		}
		return damaged("%d bytes: shorter than a Lucene footer", f.Size)
	}
	read, closeFn, err := f.Open()
	if err != nil {
		return damaged("open: %v", err)
	}
	defer closeFn()
	var buf []byte
	if cfg.Deep {
		buf = make([]byte, lucene.CheckChunk)
	}
	footer, err := lucene.Check(ctx, read, f.Size, f.Expected, buf, cfg.Progress)
	if footer != nil {
		r.Footer = lucene.FormatChecksum(footer.Checksum)
	}
	if err != nil {
		return damaged("%v", err)
	}
	if cfg.Deep {
		r.Computed = r.Footer
	}
	return r
}
