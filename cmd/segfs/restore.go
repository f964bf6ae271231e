package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/ops"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/quote"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/restore"
	"github.com/segfs/segfs/view"
)

// restoreCmd is `segfs restore`: the flags, the engine's wiring and the
// output of package restore, which does the work (and states what it
// keeps true).
type restoreCmd struct {
	Source string `arg:"" name:"SOURCE" help:"The store: s3://bucket[/prefix] or file:///dir (with --layout opensearch, the repository of a remote segment store)."`
	Dest   string `arg:"" name:"DEST_DIR" help:"Local directory to write the files into: empty or absent (it is created), or holding an earlier restore of the same source, which is completed."`

	storeFlags  `embed:""`
	layoutFlags `embed:""`
	cacheFlags  `embed:""`

	NoCache     bool     `name:"no-cache" help:"Keep no part cache: fetched bytes go to DEST_DIR only. By default the parts also go to the part cache a mount of SOURCE with the same --cache-dir and --part-size reads, so that it starts warm (with the default --cache-size a shard larger than 10GiB keeps only its last parts)."`
	MaxFetches  int      `name:"max-fetches" default:"16" help:"Most remote reads in flight at once (the fetch pool); a quarter more pieces (at least 2 more) are fetched and written at once, so the pool has the next while some are written."`
	PartSize    byteSize `name:"part-size" default:"8MiB" help:"Size of the aligned pieces fetched, written and cached (a mount reads the cache only with the same --part-size)."`
	MetricsAddr string   `name:"metrics-addr" help:"Serve the restore's counters as JSON at http://ADDR/stats and in the Prometheus text format at http://ADDR/metrics while it runs, as segfs mount does. Off by default."`
	KeepExtra   bool     `name:"keep-extra" help:"Keep the files an earlier restore into DEST_DIR wrote that the source no longer has (a refresh or a merge dropped them); by default they are removed."`
	Verify      string   `name:"verify" default:"footer" enum:"none,footer,deep" help:"What a file must pass before it gets its name, and to be skipped by a later run: none (its length), footer (its length; for a Lucene file a valid footer, with the checksum the layout's metadata records), deep (also the CRC32 of every byte against the footer, reading the file back)."`
}

func (c *restoreCmd) validate() error {
	if err := checkFetchFlags(c.PartSize, c.MaxFetches); err != nil {
		return err
	}
	switch {
	case c.NoCache && c.CacheDir != "":
		return errors.New("--no-cache and --cache-dir do not go together")
	case c.Dest == "":
		return errors.New("DEST_DIR must not be empty")
	}
	if err := c.spec(c.Source).Check(); err != nil {
		return err
	}
	if _, err := fetcher.ParseSource(c.Source); err != nil {
		return err
	}
	if fi, err := os.Stat(c.Dest); err == nil && !fi.IsDir() {
		return fmt.Errorf("DEST_DIR %s is not a directory", c.Dest)
	}
	return restore.CheckPaths(c.Dest, c.Source, c.CacheDir)
}

// Run restores SOURCE into DEST_DIR and prints a summary on stdout. Exit
// status: 0 when every file is restored and verified (or was already),
// 1 when any failed (each named on stderr), 2 on usage errors and a
// DEST_DIR that holds anything else, 130 when interrupted.
func (c *restoreCmd) Run(log *slog.Logger) error {
	if err := c.validate(); err != nil {
		return &exitError{2, err}
	}
	// SIGINT or SIGTERM cancels ctx: the fetches stop, the files being
	// written are removed, and every file under its final name is
	// complete and verified. A second signal kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)

	sum, err := c.restore(ctx, log, os.Stderr)
	if sum != nil {
		for _, f := range sum.Failed {
			fmt.Fprintf(os.Stderr, "restore: %s: %s\n", quote.Name(f.Name), quote.Text(f.Err.Error()))
		}
		fmt.Println(summaryLine(sum))
	}
	switch {
	case ctx.Err() != nil:
		return &exitError{130, fmt.Errorf("interrupted: the files restored and verified stay under their names, the others are not there; a new restore fetches only those: %w", context.Cause(ctx))}
	case err != nil:
		return err
	case len(sum.Failed) > 0:
		return &exitError{1, fmt.Errorf("%d of %d files failed; the others are restored and verified, and a new restore fetches only the failed ones", len(sum.Failed), sum.Files)}
	}
	return nil
}

// summaryLine is the summary's line of output.
func summaryLine(s *restore.Summary) string {
	rate := 0.0
	if secs := s.Took.Seconds(); secs > 0 {
		rate = float64(s.RestoredBytes) / secs / 1e6
	}
	return fmt.Sprintf("restore: %d of %d files restored (%d bytes, %s), %d already present and verified (%d bytes), %d failed; took %v, %.1f MB/s; GETs %d (%d bytes), retries %d",
		s.Restored, s.Files, s.RestoredBytes, humanBytes(s.RestoredBytes), s.Skipped, s.SkippedBytes, len(s.Failed),
		s.Took.Round(time.Millisecond), rate, s.Gets, s.GetBytes, s.Retries)
}

// restore does the work of Run; progress goes to errOut (a bar on a
// terminal, else log lines). The summary is nil when nothing was
// attempted; an error is returned only for what stops the whole
// restore before or around the fetches, a file's failure is in the
// summary.
func (c *restoreCmd) restore(ctx context.Context, log *slog.Logger, errOut *os.File) (*restore.Summary, error) {
	start := time.Now()
	src, err := view.Resolve(ctx, c.spec(c.Source), view.Options{Store: c.storeFlags.config(0, c.MaxFetches*2, log), Parallel: c.MaxFetches, Log: log})
	if err != nil {
		return nil, err
	}
	files := restore.Plan(entry.Shown(src.Entries, log), src.Sums)

	minFree, minFreeFraction, err := parseMinFree(c.CacheMinFree)
	if err != nil {
		return nil, &exitError{2, err}
	}
	destCfg := restore.DestConfig{Path: c.Dest, Identity: c.identity(src), KeepExtra: c.KeepExtra,
		CacheMinFreeBytes: minFree, CacheMinFreeFraction: minFreeFraction, Logger: log}
	if !c.NoCache {
		if destCfg.CacheDir, err = c.cacheFlags.dir(fetcher.CacheSource(src.Store)); err != nil {
			return nil, err
		}
	}
	dest, err := restore.OpenDest(destCfg, files)
	switch {
	case errors.Is(err, restore.ErrRefused):
		return nil, &exitError{2, err}
	case err != nil:
		return nil, err
	}
	defer dest.Close()

	sum := &restore.Summary{Files: len(files)}
	todo, err := dest.Present(ctx, files, restore.Level(c.Verify), sum)
	if err != nil {
		return nil, err
	}

	ecfg := engineConfig{
		store: src.Store,
		sched: prefetch.Config{Workers: c.MaxFetches},
		reader: reader.Config{
			PartSize: int64(c.PartSize),
			// The smallest bound: no part fits, so a part the disk cache
			// refuses is dropped, not kept in memory (0 means the
			// default). A restore reads each part once.
			MemoryLimit: 1,
			Prefetch:    prefetch.None,
			// The pieces already keep the pool busy: a part is one GET.
			SplitSize: 0,
			// A frame is decoded for the piece that reads it; none is
			// kept for later reads.
			Frames: reader.FrameConfig{CacheBytes: 0},
		},
		keys: src.Keys,
		// restore's own buffer of a part per worker, and the checks of
		// an earlier run's files.
		own: int64(restoreWorkers(c.MaxFetches))*int64(c.PartSize) + restore.PresentCheckers*lucene.CheckChunk,
	}
	if !c.NoCache {
		ecfg.cache = &c.cacheFlags
	}
	if c.MetricsAddr != "" {
		ecfg.listeners = []ops.Limits{ops.MetricsLimits()}
	}
	eng, err := newEngine(ecfg, log)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	dc, rd := eng.disk, eng.rd
	cacheDir := "none (--no-cache)"
	if dc != nil {
		cacheDir = dc.Dir()
	}
	if c.MetricsAddr != "" {
		m, err := ops.StartMetrics(c.MetricsAddr, "", eng.daemon(nil), log)
		if err != nil {
			return nil, err
		}
		defer m.Close()
	}

	var total int64
	for _, f := range todo {
		total += f.Size()
	}
	log.Info("restoring", "source", src.Store.String(), "dest", dest.Path(), "files", len(todo), "bytes", total,
		"present", sum.Skipped, "verify", c.Verify, "cache", cacheDir, "max_fetches", c.MaxFetches, "part_size", int64(c.PartSize))
	syncErr := dest.Run(ctx, rd, files, todo, restore.Config{PartSize: int64(c.PartSize), Workers: restoreWorkers(c.MaxFetches),
		Level: restore.Level(c.Verify), Progress: errOut}, sum)
	counters := src.Store.Counters()
	sum.Gets, sum.GetBytes, sum.Retries = counters.Gets.Load(), counters.GetBytes.Load(), counters.Retries.Load()
	sum.Took = time.Since(start)
	return sum, syncErr
}

// identity names what a restore restores, for DEST_DIR's mark: the
// source with the service it is on (fetcher.CacheSource: two services
// can have buckets of one name) and without credentials, and for a
// layout the shard.
func (c *restoreCmd) identity(src *view.Resolved) string {
	return fetcher.CacheSource(src.Store) + c.spec(c.Source).Identity()
}

// restoreWorkers is how many pieces are fetched and written at once
// for a pool of fetches: a quarter more than the pool (at least 2), so
// that while some write a part they received the pool has the next
// parts to fetch, and no connection waits on the disk.
func restoreWorkers(fetches int) int { return fetches + max(2, fetches/4) }
