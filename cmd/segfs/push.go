package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/push"
)

// pushCmd is `segfs push`.
type pushCmd struct {
	Dir  string `arg:"" name:"LOCAL_DIR" help:"Local directory to upload (regular files only, recursively)."`
	Dest string `arg:"" name:"DEST" help:"Destination store: s3://bucket[/prefix] or file:///dir."`

	CompressMinSize byteSize `name:"compress-min-size" default:"64MiB" help:"Files at or above this size whose name matches --compress-match are stored compressed, as KEY.zst in the seekable zstd format."`
	CompressMatch   string   `name:"compress-match" default:"*.fdt" help:"Comma-separated globs on a file's base name selecting the files to compress (stored fields compress well; postings and doc values do not). \"*\" selects every file; \"\" none."`
	FrameSize       byteSize `name:"frame-size" default:"256KiB" help:"Logical bytes per compressed frame, the unit a random read decodes. Larger frames compress better; smaller ones decode less per cold read (docs/BENCH.md has the measure behind the default)."`
	Level           int      `name:"level" default:"3" help:"zstd compression level, 1 to 22."`
	Parallel        int      `name:"parallel" default:"4" help:"Files hashed, compressed and uploaded at once."`
	TmpDir          string   `name:"tmp-dir" help:"Directory for the compressed temporary files (each as large as its compressed file). Default: the system temporary directory ($TMPDIR or /tmp)."`
	DryRun          bool     `name:"dry-run" help:"Hash the files and compare them with DEST, then report what would be uploaded, skipped or deleted, writing nothing."`
	storeFlags      `embed:""`

	Delete bool `name:"delete" help:"After every file is pushed, delete the objects below DEST that no local file accounts for (neither KEY nor KEY.zst of a file in LOCAL_DIR). Off by default: a push only adds and replaces."`
}

func (c *pushCmd) validate() error {
	switch {
	case c.FrameSize < 1 || c.FrameSize > compress.DefaultFrameLimit:
		return fmt.Errorf("--frame-size %v: must be between 1B and %v, the largest frame a mount decodes by default (--max-frame-size)", c.FrameSize, byteSize(compress.DefaultFrameLimit))
	case c.Level < 1 || c.Level > 22:
		return fmt.Errorf("--level %d: must be between 1 and 22", c.Level)
	case c.Parallel < 1 || c.Parallel > 256:
		return fmt.Errorf("--parallel %d: must be between 1 and 256", c.Parallel)
	case c.CompressMinSize < 0:
		return fmt.Errorf("--compress-min-size %v: must not be negative", c.CompressMinSize)
	}
	return nil
}

// Run pushes LOCAL_DIR to DEST and prints a summary on stdout.
func (c *pushCmd) Run(log *slog.Logger) error {
	if err := c.validate(); err != nil {
		return err
	}
	var globs []string
	for g := range strings.SplitSeq(c.CompressMatch, ",") {
		if g = strings.TrimSpace(g); g != "" {
			globs = append(globs, g)
		}
	}
	// SIGINT or SIGTERM cancels ctx: uploads in flight stop and their
	// multipart uploads are aborted, so nothing partial is stored. A
	// second signal kills the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)

	opt := push.Options{
		Dir:             c.Dir,
		Dest:            c.Dest,
		CompressMinSize: int64(c.CompressMinSize),
		CompressMatch:   globs,
		Encoder:         compress.EncoderOptions{FrameSize: int(c.FrameSize), Level: c.Level},
		Parallel:        c.Parallel,
		TmpDir:          c.TmpDir,
		DryRun:          c.DryRun,
		Delete:          c.Delete,
		Store:           c.storeFlags.config(0, c.Parallel*4, log),
	}
	verb := ""
	if c.DryRun {
		verb = "would be "
	}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		var (
			mu          sync.Mutex
			bar         *progressbar.ProgressBar
			done, files int
		)
		opt.OnStart = func(n int, total int64) {
			files = n
			bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(os.Stderr),
				progressbar.OptionShowBytes(true),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionShowElapsedTimeOnFinish(),
				progressbar.OptionSetDescription(fmt.Sprintf("0/%d files", n)),
				progressbar.OptionClearOnFinish(),
			)
		}
		opt.OnBytes = func(n int64) { bar.Add64(n) }
		opt.OnFile = func(r push.FileResult) {
			if r.Action == push.Deleted {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			done++
			bar.Describe(fmt.Sprintf("%d/%d files", done, files))
		}
		defer func() {
			if bar != nil {
				bar.Finish()
			}
		}()
	} else {
		opt.OnFile = func(r push.FileResult) {
			if r.Action == push.Deleted {
				log.Info(verb+string(r.Action), "key", r.Target)
				return
			}
			attrs := []any{"key", r.Target, "size", r.Size, "took", r.Took.Round(time.Millisecond)}
			if r.Action == push.Compressed && r.StoredSize > 0 {
				attrs = append(attrs, "stored", r.StoredSize)
			}
			if r.Removed != "" {
				attrs = append(attrs, "removed", r.Removed)
			}
			log.Info(verb+string(r.Action), attrs...)
		}
	}

	sum, err := push.Run(ctx, opt)
	if err != nil && ctx.Err() != nil {
		return &exitError{code: 130, err: fmt.Errorf("interrupted: uploads in flight were aborted, nothing partial is stored; files pushed before stay (a new push skips them): %w", err)}
	}
	if err != nil {
		return err
	}
	printSummary(sum)
	return nil
}

func printSummary(s push.Summary) {
	head := "pushed"
	if s.DryRun {
		head = "dry run (nothing written)"
	}
	comp := fmt.Sprintf("%d compressed", s.Compressed)
	if s.CompressedOut > 0 {
		comp += fmt.Sprintf(" (%s -> %s, ratio %.2f)", humanBytes(s.CompressedIn), humanBytes(s.CompressedOut), s.Ratio())
	}
	deleted := ""
	if s.Deleted > 0 {
		deleted = fmt.Sprintf(", %d without a local file deleted", s.Deleted)
	}
	fmt.Printf("%s: %d raw (%s), %s, %d skipped (%s), %d other forms deleted%s; took %v\n",
		head, s.Raw, humanBytes(s.RawBytes), comp, s.Skipped, humanBytes(s.SkippedBytes), s.Removed, deleted,
		s.Elapsed.Round(time.Millisecond))
}

// humanBytes formats n with one decimal in the largest fitting binary unit.
func humanBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%dB", n)
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}
