// Command segfs mounts the segment files of a remote store as a local,
// read-only directory. See the README for usage.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/segfs/segfs/daemon"
	"github.com/segfs/segfs/quote"
)

// cli is the command line. Each command's Run does the work.
type cli struct {
	LogLevel  slog.Level       `name:"log-level" default:"info" help:"Log level: debug, info, warn or error."`
	LogFormat string           `name:"log-format" default:"text" enum:"text,json" help:"Log format on stderr: text (key=value lines) or json (one object a line, for log shippers)."`
	Version   kong.VersionFlag `name:"version" help:"Print segfs's version, VCS commit and Go version, and exit."`

	Mount      mountCmd      `cmd:"" help:"Mount SOURCE read-only at MOUNTPOINT and serve it in the foreground until unmounted or signalled."`
	Unmount    unmountCmd    `cmd:"" help:"Unmount a segfs mount; the serving process then exits."`
	Push       pushCmd       `cmd:"" help:"Upload a local shard directory to a store in the layout segfs mounts, compressing the selected files."`
	Status     statusCmd     `cmd:"" help:"Report on a running mount: source, uptime, cache use, hit ratios, GETs, fetches in flight and queued, errors, and how much of each file is cached (the largest first)."`
	Warm       warmCmd       `cmd:"" help:"Have a running mount fetch files or directories (default: all) into its cache at background priority, and show its progress. Exit 0 when all are cached, 1 naming those that failed; Ctrl-C stops the warm, not the mount."`
	Restore    restoreCmd    `cmd:"" help:"Write the files of SOURCE (with its layout, as a mount shows them) into the local directory DEST_DIR from parallel part fetches, each verified before it gets its name; a second run completes an interrupted one. Exit 0 when every file is restored and verified, 1 naming those that failed, 2 on usage errors or a DEST_DIR holding other files, 130 when interrupted."`
	Snapshots  snapshotsCmd  `cmd:"" help:"List what a snapshot repository holds: its snapshots (name, uuid, state, version), their indices, and each shard's files and bytes. A table, or --json. Exit 0 when every shard of a successful snapshot was read, 1 when one could not be, 2 on usage or access errors."`
	Verify     verifyCmd     `cmd:"" help:"Check every file of SOURCE (a store, or a local directory): lengths, Lucene footers, checksums against a layout's metadata; --deep every byte. Exit 0 when all are intact, 1 when any is damaged or missing, 2 on usage or access errors."`
	Completion completionCmd `cmd:"" help:"Print a completion script for bash, zsh or fish (the packages install them)."`
	Man        manCmd        `cmd:"" hidden:"" help:"Print the segfs(8) man page."`
}

// exitError carries a process exit code with its message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	helperForm() // mount.fuse3's argument form (package daemon)
	var c cli
	kctx := kong.Parse(&c,
		kong.Vars{"version": versionString()},
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
	log := newLogger(os.Stderr, c.LogFormat, c.LogLevel)
	err := kctx.Run(log)
	if err == nil {
		return
	}
	// One line, escaped: an error may quote a key of the store, which
	// may hold a newline or an escape sequence.
	fmt.Fprintf(os.Stderr, "segfs: %s\n", quote.Text(err.Error()))
	var ee *exitError
	if errors.As(err, &ee) {
		os.Exit(ee.code)
	}
	os.Exit(1)
}

// newLogger returns the logger of --log-format and --log-level. A
// record is one line with no control byte whatever names it holds: the
// text handler quotes a value that needs it, the JSON one escapes
// control characters and quote.JSONWriter the other unprintable runes.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(quote.JSONWriter{W: w}, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// helperForm runs before kong parses os.Args: the helper form's
// arguments are rewritten (or its daemon started) first.
func helperForm() {
	if daemon.TakeReadyPipe() {
		// This is the helper form's daemon. Its stdout and stderr are
		// its starter's, often a pipe (ssh, a script) whose reader is
		// gone once mount returned; without a handler Go kills a process
		// that writes to fd 1 or 2 after that, and the mount with it.
		// With one, such writes just fail.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
		return
	}
	if !daemon.IsHelperForm(os.Args[1:]) {
		return
	}
	// In the foreground it rewrites os.Args into the mount command for
	// main to run; otherwise it starts the daemon and exits with the
	// mount's outcome.
	h, err := daemon.ParseHelperForm(os.Args[1:])
	if err == nil {
		err = h.Check(parseOnly)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "segfs: %v\n", err)
		os.Exit(2) // a usage error, as kong's are in main
	}
	if h.Foreground {
		os.Args = append([]string{os.Args[0]}, h.Args...)
		return
	}
	os.Exit(daemon.Daemonize(h.Args))
}

// parseOnly parses args with the command line model, running nothing. A
// parser that cannot be built (a variable main sets, say) leaves the
// check to main.
func parseOnly(args []string) error {
	var c cli
	p, err := kong.New(&c, kong.Name("segfs"), kong.Writers(io.Discard, io.Discard), kong.Exit(func(int) {}))
	if err != nil {
		return nil
	}
	_, err = p.Parse(args)
	return err
}
