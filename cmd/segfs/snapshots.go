package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/segfs/segfs/quote"
	"github.com/segfs/segfs/snapshot"
	"github.com/segfs/segfs/view"
)

// snapshotsCmd lists what a snapshot repository holds.
type snapshotsCmd struct {
	Source string `arg:"" help:"The repository's root: s3://bucket[/base_path] or file:///dir."`

	storeFlags `embed:""`

	Snapshot   string `name:"snapshot" placeholder:"NAME" help:"List only this snapshot. Default: all."`
	Index      string `name:"index" placeholder:"NAME" help:"List only this index. Default: all."`
	JSON       bool   `name:"json" help:"Print the listing as one JSON object instead of a table."`
	MaxFetches int    `name:"max-fetches" default:"16" help:"Most shard metadata reads in flight at once."`
	MaxShards  int    `name:"max-shards" default:"65536" placeholder:"N" help:"Most shard snapshots read in one run (a HEAD and a GET each, counting the shards probed in a repository without shard counts). Past it segfs snapshots reads nothing more and exits 2: narrow it with --snapshot and --index, or raise this."`
}

// Run reads the repository's root and every shard's metadata the flags
// select, and prints them: exit 0 when every shard of a successful
// snapshot was read, 1 when one could not be, 2 on a usage error, a
// root that cannot be read, or more shard snapshots selected than
// --max-shards.
func (c *snapshotsCmd) Run(log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if c.MaxFetches < 1 || c.MaxFetches > 1024 {
		return &exitError{2, fmt.Errorf("--max-fetches %d: must be between 1 and 1024", c.MaxFetches)}
	}
	if c.MaxShards < 1 {
		return &exitError{2, fmt.Errorf("--max-shards %d: must be at least 1", c.MaxShards)}
	}
	open, _, base, err := view.RepositoryOpener(c.Source, c.storeFlags.config(0, c.MaxFetches*2, log))
	if err != nil {
		return &exitError{2, err}
	}
	f := view.CatalogFilter{Snapshot: c.Snapshot, Index: c.Index, MaxShards: c.MaxShards}
	cat, err := view.ReadCatalog(ctx, open, base, f, c.MaxFetches)
	if errors.Is(err, view.ErrTooManyShards) {
		return &exitError{2, fmt.Errorf("%w; narrow the listing with --snapshot and --index, or raise --max-shards (%d)", err, c.MaxShards)}
	}
	if err != nil {
		return &exitError{2, err}
	}
	if bad := c.report(os.Stdout, cat); bad > 0 {
		return &exitError{1, fmt.Errorf("%d shards of successful snapshots could not be read", bad)}
	}
	return nil
}

// report prints the catalog and returns how many shards of successful
// snapshots could not be read.
func (c *snapshotsCmd) report(w io.Writer, cat *view.Catalog) int {
	bad := 0
	for _, s := range cat.Snapshots {
		for _, ix := range s.Indices {
			for _, sh := range ix.Shards {
				if sh.Error != "" && s.State == snapshot.State(snapshot.StateSuccess) {
					bad++
				}
			}
		}
	}
	if c.JSON {
		quote.WriteJSON(w, cat)
		return bad
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "snapshot\tuuid\tstate\tversion\tindex\tshard\tfiles\tsize\tproblem")
	shards := 0
	for _, s := range cat.Snapshots {
		// Names from the repository must not forge a row or reach the
		// terminal as control bytes.
		head := fmt.Sprintf("%s\t%s\t%s\t%s", quote.Name(s.Name), quote.Name(s.UUID), s.State, quote.Text(s.Version))
		if len(s.Indices) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t\n", head)
		}
		for _, ix := range s.Indices {
			if len(ix.Shards) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\tno shard has a snapshot\n", head, quote.Name(ix.Name))
			}
			for _, sh := range ix.Shards {
				shards++
				if sh.Error != "" {
					fmt.Fprintf(tw, "%s\t%s\t%d\t-\t-\t%s\n", head, quote.Name(ix.Name), sh.Shard, quote.Text(sh.Error))
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t\n", head, quote.Name(ix.Name), sh.Shard, sh.Files, humanBytes(sh.Bytes))
			}
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "generation %d: %d snapshots, %d shard snapshots, %d of successful snapshots unreadable\n", cat.Generation, len(cat.Snapshots), shards, bad)
	return bad
}
