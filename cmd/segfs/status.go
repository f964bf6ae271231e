package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/segfs/segfs/ops"
	"github.com/segfs/segfs/quote"
	"golang.org/x/term"
)

// controlFlags name the directory of control sockets (package ops);
// the mount and the commands that reach it share them.
type controlFlags struct {
	ControlDir string `name:"control-dir" placeholder:"DIR" help:"Directory of the control sockets through which segfs status and segfs warm reach a running mount (created 0700; refused unless owned by the user and closed to others). Default: /run/segfs as root, else $XDG_RUNTIME_DIR/segfs, else segfs-UID in the temporary directory."`
}

// controlDir returns the control directory.
func (f controlFlags) controlDir() string {
	if f.ControlDir != "" {
		return f.ControlDir
	}
	return ops.DefaultDir()
}

// statusCmd is `segfs status`.
type statusCmd struct {
	Mountpoint string `arg:"" help:"Where segfs is mounted."`
	JSON       bool   `name:"json" help:"Print the report as one JSON object."`
	All        bool   `name:"all" help:"List every file, not only the 20 largest."`

	controlFlags `embed:""`
}

// Run asks the mount's daemon for its report and prints it.
func (c *statusCmd) Run(log *slog.Logger) error {
	client, err := ops.Client(c.controlDir(), c.Mountpoint)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	url := "http://segfs/status"
	if c.All {
		url += "?all=1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("status of %s: %w", c.Mountpoint, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("status of %s: %w", c.Mountpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status of %s: %s: %s", c.Mountpoint, resp.Status, strings.TrimSpace(string(body)))
	}
	if c.JSON {
		_, err = os.Stdout.Write(quote.JSON(body)) // the same JSON, without raw C1 controls
		return err
	}
	var rep ops.StatusReport
	if err := json.Unmarshal(body, &rep); err != nil {
		return fmt.Errorf("status of %s: %w", c.Mountpoint, err)
	}
	printStatus(os.Stdout, &rep)
	return nil
}

// viewLine says how old the mount's view is and what its refreshes did
// (package follow), from the counters at now.
func viewLine(m map[string]int64, now time.Time) string {
	line := "as listed at mount"
	if ns := m["view_listed_timestamp_ns"]; ns > 0 {
		line = fmt.Sprintf("listed %s ago", now.Sub(time.Unix(0, ns)).Round(time.Second))
	}
	if m["refreshes"] == 0 && m["refresh_failures"] == 0 {
		return line + " (no refresh: --refresh or SIGHUP)"
	}
	return fmt.Sprintf("%s; %d refreshes, %d failed; %d files added, %d changed, %d removed", line,
		m["refreshes"], m["refresh_failures"], m["files_added"], m["files_changed"], m["files_removed"])
}

// printStatus writes a report for people. Names and paths are quoted
// (quoteName): a name from the store may hold a newline or an escape
// sequence.
func printStatus(w io.Writer, r *ops.StatusReport) {
	m := r.Counters
	pct := func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "source\t%s\n", quote.Name(r.Source))
	fmt.Fprintf(tw, "mountpoint\t%s (pid %d, up %s)\n", quote.Name(r.Mountpoint), r.PID, time.Duration(r.UptimeSeconds*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(tw, "version\t%s\n", quote.Text(r.Version))
	fmt.Fprintf(tw, "cache\t%s of %s in %d parts, %s\n", humanBytes(r.CacheBytes), humanBytes(r.CacheMaxBytes), r.CacheParts, quote.Name(r.CacheDir))
	fmt.Fprintf(tw, "files\t%d, %s of %s cached (%s)\n", r.FileCount, humanBytes(r.CachedBytes), humanBytes(r.TotalBytes), pct(ratio(r.CachedBytes, r.TotalBytes)))
	fmt.Fprintf(tw, "hits\t%s of %d part reads without waiting for the store (%s from disk); %d reads, %s\n",
		pct(r.HitRatio), r.PartReads, pct(r.DiskHitRatio), m["reads"], humanBytes(m["read_bytes"]))
	fmt.Fprintf(tw, "remote\t%d GETs, %s, %d retries\n", m["gets"], humanBytes(m["get_bytes"]), m["retries"])
	fmt.Fprintf(tw, "fetches\trunning %d demand, %d readahead, %d background; queued %d, %d, %d\n",
		m["running_demand"], m["running_readahead"], m["running_background"], m["queued_demand"], m["queued_readahead"], m["queued_background"])
	fmt.Fprintf(tw, "errors\t%d reads, %d fetches, %d cache writes\n", m["read_errors"], m["fetch_errors"], m["cache_put_errors"])
	fmt.Fprintf(tw, "view\t%s\n", viewLine(m, time.Now()))
	tw.Flush()
	if len(r.Dirs) > 0 {
		fmt.Fprintf(w, "\ndirectories (the largest %d; --all for every one):\n", len(r.Dirs))
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		for _, d := range r.Dirs {
			name := d.Name
			if name == "" {
				name = "."
			}
			fmt.Fprintf(tw, "%s\t%s\t%d files\t \t%s\n", pct(d.Fraction), humanBytes(d.Size), d.Files, quote.Name(name+"/"))
		}
		tw.Flush()
	}
	if len(r.Files) < r.FileCount {
		fmt.Fprintf(w, "\nthe %d largest files (--all for every one):\n", len(r.Files))
	} else {
		fmt.Fprintf(w, "\nfiles:\n")
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	for _, f := range r.Files {
		fmt.Fprintf(tw, "%s\t%s\t \t%s\n", pct(f.Fraction), humanBytes(f.Size), quote.Name(f.Name))
	}
	tw.Flush()
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// warmCmd is `segfs warm`.
type warmCmd struct {
	Mountpoint string   `arg:"" help:"Where segfs is mounted."`
	Paths      []string `arg:"" optional:"" help:"Files or directories of the mount to warm (paths in the mount, or relative to MOUNTPOINT). Default: every file."`
	Quiet      bool     `name:"quiet" short:"q" help:"Print only failures and the summary."`

	controlFlags `embed:""`
}

// Run asks the daemon to warm the paths and follows it until every file
// is cached or failed. Ctrl-C stops the warm; the mount keeps serving.
func (c *warmCmd) Run(log *slog.Logger) error {
	mnt, err := ops.CanonicalMountpoint(c.Mountpoint)
	if err != nil {
		return err
	}
	rel := make([]string, 0, len(c.Paths))
	for _, p := range c.Paths {
		r, err := relToMount(mnt, p)
		if err != nil {
			return &exitError{2, err}
		}
		rel = append(rel, r)
	}
	client, err := ops.Client(c.controlDir(), c.Mountpoint)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	body, _ := json.Marshal(ops.WarmRequest{Paths: rel})
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://segfs/warm", strings.NewReader(string(body)))
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{130, errors.New("warm stopped; the mount keeps serving")}
		}
		return fmt.Errorf("warm of %s: %w", c.Mountpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return &exitError{2, fmt.Errorf("warm of %s: %s", c.Mountpoint, strings.TrimSpace(string(msg)))}
	}
	return c.follow(ctx, resp.Body, os.Stdout, os.Stderr)
}

// follow reads the warm's events, shows them on stdout (progress) and
// stderr (failures, and the progress bar when stderr is a terminal),
// and returns its outcome.
func (c *warmCmd) follow(ctx context.Context, body io.Reader, stdout, stderr io.Writer) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var first ops.WarmEvent
	var bar *progressbar.ProgressBar
	var failures []string
	start := time.Now()
	done, last := 0, int64(0)
	for sc.Scan() {
		var ev ops.WarmEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("warm of %s: bad event %q: %w", c.Mountpoint, sc.Text(), err)
		}
		if first.Files == 0 && ev.Files > 0 {
			first = ev
			if f, ok := stderr.(*os.File); ok && !c.Quiet && term.IsTerminal(int(f.Fd())) {
				bar = progressbar.NewOptions64(ev.TotalBytes, progressbar.OptionSetWriter(stderr),
					progressbar.OptionShowBytes(true), progressbar.OptionSetWidth(30),
					progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionShowElapsedTimeOnFinish(),
					progressbar.OptionClearOnFinish(),
					progressbar.OptionSetDescription(fmt.Sprintf("0/%d files", ev.Files)))
				_ = bar.Set64(ev.Bytes)
			} else if !c.Quiet {
				fmt.Fprintf(stdout, "warming %d files, %s, %s cached already\n", ev.Files, humanBytes(ev.TotalBytes), humanBytes(ev.Bytes))
			}
			last = ev.Bytes
			continue
		}
		if ev.Error != "" {
			// The name and the daemon's message are printed escaped: the
			// name is a key of the store, and the message may quote it.
			failure := quote.Name(ev.File) + ": " + quote.Text(ev.Error)
			failures = append(failures, failure)
			if bar != nil {
				bar.Clear()
			}
			fmt.Fprintf(stderr, "segfs: warm: %s\n", failure)
		} else if ev.File != "" {
			done++
			if bar == nil && !c.Quiet {
				fmt.Fprintf(stdout, "cached %s\n", quote.Name(ev.File))
			}
		}
		if bar != nil {
			bar.Describe(fmt.Sprintf("%d/%d files", done, first.Files))
			_ = bar.Set64(ev.Bytes)
		}
		last = ev.Bytes
		if ev.Done {
			if bar != nil {
				_ = bar.Finish()
			}
			took := time.Since(start)
			fmt.Fprintf(stdout, "warmed %d of %d files: %s of %s cached, in %s (%.1f MB/s)\n", done, first.Files,
				humanBytes(ev.Bytes), humanBytes(first.TotalBytes), took.Round(time.Millisecond),
				float64(ev.Bytes-first.Bytes)/took.Seconds()/1e6)
			if len(failures) > 0 {
				return &exitError{1, fmt.Errorf("%d files not cached: %s", len(failures), strings.Join(failures, "; "))}
			}
			return nil
		}
	}
	if bar != nil {
		bar.Clear()
	}
	if ctx.Err() != nil {
		return &exitError{130, fmt.Errorf("warm stopped with %s cached; the mount keeps serving", humanBytes(last))}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("warm of %s: %w", c.Mountpoint, err)
	}
	return fmt.Errorf("warm of %s: the daemon ended the warm before it was done (unmounted?)", c.Mountpoint)
}

// relToMount returns p as a path within the mount at mnt: p is a path
// under mnt (absolute, or relative to the working directory if it
// exists there), else a path relative to mnt.
func relToMount(mnt, p string) (string, error) {
	abs := p
	if !filepath.IsAbs(p) {
		if _, err := os.Lstat(p); err != nil {
			return filepath.Clean(p), checkInside(p)
		}
		var err error
		if abs, err = filepath.Abs(p); err != nil {
			return "", err
		}
	}
	if canon, err := ops.CanonicalMountpoint(abs); err == nil {
		abs = canon // as mnt: the symlinks of its parents resolved
	}
	rel, err := filepath.Rel(mnt, filepath.Clean(abs))
	if err != nil {
		return "", fmt.Errorf("%s is not in the mount at %s", p, mnt)
	}
	return rel, checkInside(rel)
}

func checkInside(rel string) error {
	rel = filepath.Clean(rel)
	if rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return fmt.Errorf("%s is not in the mount", rel)
	}
	return nil
}
