package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/quote"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/verify"
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

func (c *verifyCmd) Run(log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if c.MaxFetches < 1 || c.MaxFetches > 1024 {
		return &exitError{2, fmt.Errorf("--max-fetches %d: must be between 1 and 1024", c.MaxFetches)}
	}
	if err := c.spec(c.Source).Check(); err != nil {
		return &exitError{2, err}
	}
	var files []verify.File
	var results []verify.Result
	var closeFn func()
	var err error
	if strings.Contains(c.Source, "://") {
		files, results, closeFn, err = c.storeFiles(ctx, log)
	} else {
		if c.Layout != "plain" {
			return &exitError{2, errors.New("--layout applies to a store; a local directory is verified file by file")}
		}
		files, err = verify.Local(c.Source)
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
func (c *verifyCmd) storeFiles(ctx context.Context, log *slog.Logger) ([]verify.File, []verify.Result, func(), error) {
	src, err := view.Resolve(ctx, c.spec(c.Source), view.Options{Store: c.storeFlags.config(0, c.MaxFetches*2, log), Parallel: c.MaxFetches, Tolerate: true, Log: log})
	if err != nil {
		return nil, nil, nil, err
	}
	var known []verify.Result
	for _, p := range src.Problems {
		r := verify.Result{Name: p.File.Name, Size: p.File.Length, Expected: lucene.FormatChecksum(p.File.Checksum), Status: verify.Damaged, Problem: p.Detail}
		if p.Missing {
			r.Status = verify.Missing
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
	return verify.Reader(src.Entries, src.Sums, eng.rd), known, eng.Close, nil
}

// check verifies every file, with a progress bar on a terminal for
// --deep. An error is returned only for what stops the whole run (an
// interrupt); a file that cannot be read is a result.
func (c *verifyCmd) check(ctx context.Context, files []verify.File) ([]verify.Result, error) {
	cfg := verify.Config{Deep: c.Deep, Checkers: c.checkers()}
	if c.Deep && !c.JSON && term.IsTerminal(int(os.Stderr.Fd())) {
		var total int64
		for _, f := range files {
			total += f.Size
		}
		bar := progressbar.NewOptions64(total, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowBytes(true),
			progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish(),
			progressbar.OptionSetDescription(fmt.Sprintf("0/%d files", len(files))))
		defer bar.Finish()
		var mu sync.Mutex
		done := 0
		cfg.Progress = func(n int) { bar.Add(n) }
		cfg.Done = func() {
			mu.Lock()
			defer mu.Unlock()
			done++
			bar.Describe(fmt.Sprintf("%d/%d files", done, len(files)))
		}
	}
	return verify.Check(ctx, files, cfg)
}

// checkers is how many files are checked at once: a quarter of the
// fetch pool, at most 4 (each --deep check reads through the pool in
// CheckChunk reads, one at a time).
func (c *verifyCmd) checkers() int { return min(4, max(1, c.MaxFetches/4)) }

// report prints the results to w and returns how many are damaged or
// missing.
func (c *verifyCmd) report(w io.Writer, results []verify.Result) int {
	bad := 0
	var bytes int64
	for _, r := range results {
		if r.Bad() {
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
			Source  string          `json:"source"`
			Deep    bool            `json:"deep"`
			Files   []verify.Result `json:"files"`
			Damaged int             `json:"damaged"`
			Summary string          `json:"summary"`
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
