// Command segfs mounts the segment files of a remote store as a local,
// read-only directory. See the README for usage.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/alecthomas/kong"
)

// cli is the command line. Each command's Run does the work.
type cli struct {
	LogLevel slog.Level `name:"log-level" default:"info" help:"Log level: debug, info, warn or error."`

	Mount   mountCmd   `cmd:"" help:"Mount SOURCE read-only at MOUNTPOINT and serve it in the foreground until unmounted or signalled."`
	Unmount unmountCmd `cmd:"" help:"Unmount a segfs mount; the serving process then exits."`
	Push    pushCmd    `cmd:"" help:"Upload a local shard directory to a store in the layout segfs mounts, compressing the selected files."`
	Verify  verifyCmd  `cmd:"" help:"Check every file of SOURCE (a store, or a local directory): lengths, Lucene footers, checksums against a layout's metadata; --deep every byte. Exit 0 when all are intact, 1 when any is damaged or missing, 2 on usage or access errors."`
}

// exitError carries a process exit code with its message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	var c cli
	kctx := kong.Parse(&c,
		kong.Name("segfs"),
		kong.Description("segfs serves a search engine's segment files from an object store as a read-only local directory."),
		kong.UsageOnError(),
		// Usage errors exit 2, as verify documents and as most tools do
		// (kong's own code is 80).
		kong.Exit(func(code int) {
			if code == 80 {
				code = 2
			}
			os.Exit(code)
		}),
	)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: c.LogLevel}))
	err := kctx.Run(log)
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "segfs: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		os.Exit(ee.code)
	}
	os.Exit(1)
}
