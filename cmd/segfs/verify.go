package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sync/errgroup"
	"golang.org/x/term"

	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/quote"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/view"
)

// verifyCmd is `segfs verify`.
type verifyCmd struct {
	Source string `arg:"" help:"A store, s3://bucket[/prefix] or file:///dir (with --layout opensearch, the repository of a remote segment store), or a local directory: a mount, or a copy of one."`

	storeFlags  `embed:""`
	layoutFlags `embed:""`
	cacheFlags  `embed:""`

	Deep       bool `help:"Also compute the CRC32 of every byte of every file and compare it with the file's footer (reads every byte; through the fetch pool and the part cache for a store)."`
	JSON       bool `name:"json" help:"Print the result as one JSON object instead of a table."`
	MaxFetches int  `name:"max-fetches" default:"16" help:"Most remote reads in flight at once."`
}

// verifyResult is one file's outcome.
type verifyResult struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	// Expected is the checksum the layout's metadata records, Footer the
	// one in the file's footer, Computed the CRC32 of its bytes (--deep);
	// each as 8 hex digits, "" when not known.
	Expected string `json:"expected,omitempty"`
	Footer   string `json:"footer,omitempty"`
	Computed string `json:"computed,omitempty"`
	Status   string `json:"status"` // ok, damaged, missing, skipped
	Problem  string `json:"problem,omitempty"`
}

// Statuses of a verifyResult.
const (
	statusOK      = "ok"
	statusDamaged = "damaged"
	statusMissing = "missing"
	statusSkipped = "skipped"
)

// verifyFile is what verify checks of one file, wherever it is read from.
type verifyFile struct {
	name     string
	size     int64
	expected *uint64 // the metadata's checksum, if the layout has one
	open     func() (lucene.ReadAtFunc, func(), error)
}

func (c *verifyCmd) Run(log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if c.MaxFetches < 1 || c.MaxFetches > 1024 {
		return &exitError{2, fmt.Errorf("--max-fetches %d: must be between 1 and 1024", c.MaxFetches)}
	}
	if err := c.spec(c.Source).Check(); err != nil {
		return &exitError{2, err}
	}
	var files []verifyFile
	var results []verifyResult
	var closeFn func()
	var err error
	if strings.Contains(c.Source, "://") {
		files, results, closeFn, err = c.storeFiles(ctx, log)
	} else {
		if c.Layout != "plain" {
			return &exitError{2, errors.New("--layout applies to a store; a local directory is verified file by file")}
		}
		files, err = localFiles(c.Source)
	}
	if closeFn != nil {
		defer closeFn()
	}
	if err != nil {
		return &exitError{2, err}
	}
	checked, err := c.check(ctx, files)
	if err != nil {
		return &exitError{2, err}
	}
	results = append(results, checked...)
	sort.Slice(results, func(i, j int) bool { return results[i].Name < results[j].Name })
	bad := c.report(os.Stdout, results)
	if bad > 0 {
		return &exitError{1, fmt.Errorf("%d of %d files damaged or missing", bad, len(results))}
	}
	return nil
}

// storeFiles opens the store with its layout and returns its files, the
// results already known (files of the metadata missing or of another
// length), and what to close after.
func (c *verifyCmd) storeFiles(ctx context.Context, log *slog.Logger) ([]verifyFile, []verifyResult, func(), error) {
	src, err := view.Resolve(ctx, c.spec(c.Source), view.Options{Store: c.storeFlags.config(0, c.MaxFetches*2, log), Parallel: c.MaxFetches, Tolerate: true, Log: log})
	if err != nil {
		return nil, nil, nil, err
	}
	var known []verifyResult
	expected := src.Sums
	for _, p := range src.Problems {
		r := verifyResult{Name: p.File.Name, Size: p.File.Length, Expected: lucene.FormatChecksum(p.File.Checksum), Status: statusDamaged, Problem: p.Detail}
		if p.Missing {
			r.Status = statusMissing
		}
		known = append(known, r)
	}
	eng, err := newEngine(engineConfig{
		store:  src.Store,
		cache:  &c.cacheFlags,
		sched:  prefetch.Config{Workers: c.MaxFetches},
		reader: reader.Config{Prefetch: prefetch.None},
		keys:   src.Keys,
		own:    int64(c.checkers()) * lucene.CheckChunk, // a --deep check's buffer per file checked at once
	}, log)
	if err != nil {
		return nil, nil, nil, err
	}
	rd, closeFn := eng.rd, eng.Close
	files := make([]verifyFile, 0, len(src.Entries))
	for _, e := range src.Entries {
		vf := verifyFile{name: e.Name, size: e.Size()}
		if sum, ok := expected[e.Name]; ok && e.Inline == nil {
			vf.expected = &sum
		}
		vf.open = func() (lucene.ReadAtFunc, func(), error) {
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
		files = append(files, vf)
	}
	return files, known, closeFn, nil
}

// localFiles returns the regular files below dir, by path relative to it.
func localFiles(dir string) ([]verifyFile, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("verify %s: not a directory (a store is s3://bucket[/prefix] or file:///dir)", dir)
	}
	var files []verifyFile
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
		files = append(files, verifyFile{name: filepath.ToSlash(rel), size: info.Size(), open: func() (lucene.ReadAtFunc, func(), error) {
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

// check verifies every file, at most a few at once, with a progress bar
// on a terminal for --deep. An error is returned only for what stops the
// whole run (an interrupt); a file that cannot be read is a result.
func (c *verifyCmd) check(ctx context.Context, files []verifyFile) ([]verifyResult, error) {
	results := make([]verifyResult, len(files))
	var total int64
	for _, f := range files {
		total += f.size
	}
	var bar *progressbar.ProgressBar
	var barMu sync.Mutex
	if c.Deep && !c.JSON && term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowBytes(true),
			progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish(),
			progressbar.OptionSetDescription(fmt.Sprintf("0/%d files", len(files))))
		defer bar.Finish()
	}
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.checkers())
	for i, f := range files {
		g.Go(func() error {
			results[i] = c.checkFile(gctx, f, func(n int) {
				if bar != nil {
					bar.Add(n)
				}
			})
			if bar != nil {
				barMu.Lock()
				done++
				bar.Describe(fmt.Sprintf("%d/%d files", done, len(files)))
				barMu.Unlock()
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
// layout's metadata when there is one, and with --deep the CRC32 of
// every byte against the footer.
func (c *verifyCmd) checkFile(ctx context.Context, f verifyFile, progress func(int)) verifyResult {
	r := verifyResult{Name: f.name, Size: f.size, Status: statusOK}
	if f.expected != nil {
		r.Expected = lucene.FormatChecksum(*f.expected)
	}
	damaged := func(format string, args ...any) verifyResult {
		r.Status, r.Problem = statusDamaged, fmt.Sprintf(format, args...)
		return r
	}
	if f.size < lucene.FooterLength {
		if f.size == 0 && strings.HasSuffix(f.name, ".lock") {
			r.Status, r.Problem = statusSkipped, "a lock file, not a Lucene file"
			return r
		}
		return damaged("%d bytes: shorter than a Lucene footer", f.size)
	}
	read, closeFn, err := f.open()
	if err != nil {
		return damaged("open: %v", err)
	}
	defer closeFn()
	var buf []byte
	if c.Deep {
		buf = make([]byte, lucene.CheckChunk)
	}
	footer, err := lucene.Check(ctx, read, f.size, f.expected, buf, progress)
	if footer != nil {
		r.Footer = lucene.FormatChecksum(footer.Checksum)
	}
	if err != nil {
		return damaged("%v", err)
	}
	if c.Deep {
		r.Computed = r.Footer
	}
	return r
}

// checkers is how many files are checked at once: a quarter of the
// fetch pool, at most 4 (each --deep check reads through the pool in
// CheckChunk reads, one at a time).
func (c *verifyCmd) checkers() int { return min(4, max(1, c.MaxFetches/4)) }

// report prints the results to w and returns how many are damaged or
// missing.
func (c *verifyCmd) report(w io.Writer, results []verifyResult) int {
	bad := 0
	var bytes int64
	for _, r := range results {
		if r.Status == statusDamaged || r.Status == statusMissing {
			bad++
		}
		bytes += r.Size
	}
	check := "footers"
	if c.Deep {
		check = "footers and every byte"
	}
	summary := fmt.Sprintf("%d files, %d bytes: %d ok, %d damaged or missing (checked: %s)", len(results), bytes, len(results)-bad, bad, check)
	if !c.Deep && bad == 0 {
		summary += "; --deep also checks every byte"
	}
	if c.JSON {
		out := struct {
			Source  string         `json:"source"`
			Deep    bool           `json:"deep"`
			Files   []verifyResult `json:"files"`
			Damaged int            `json:"damaged"`
			Summary string         `json:"summary"`
		}{c.Source, c.Deep, results, bad, summary}
		quote.WriteJSON(w, out)
		return bad
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "file\tsize\tchecksum\tstatus\tproblem")
	for _, r := range results {
		sum := r.Footer
		if sum == "" {
			sum = r.Expected
		}
		// A name from the store, and a problem that may quote one, must
		// not forge a row or reach the terminal as control bytes.
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", quote.Name(r.Name), r.Size, sum, r.Status, quote.Text(r.Problem))
	}
	tw.Flush()
	fmt.Fprintln(w, summary)
	return bad
}
