package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses of Program.Main. A program returns ExitUsage itself when its
// flags do not parse, before it calls Main.
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitUsage       = 2
	ExitInterrupted = 130 // 128 + SIGINT, as a shell reports a Ctrl-C
)

// Program describes a command line program of tests/ (the demo, the bench,
// the soak) for Main.
type Program struct {
	// Name begins Main's messages: "NAME FAILED: ...",
	// "NAME: interrupted; cleaned up".
	Name string
	// Passed, if not empty, is printed on stdout after a run that succeeded.
	Passed string
	// InterruptErrors makes Main print, after an interrupt, an error of run
	// that is not context.Canceled itself, such as context.Canceled joined
	// with a failed cleanup. Without it an interrupted run's error is not
	// printed: it is then mostly the interrupt's own doing.
	InterruptErrors bool
}

// Main runs run with a context that is cancelled on SIGINT or SIGTERM, and
// returns the exit status for os.Exit: ExitInterrupted if the context was
// cancelled by then, whatever run returned, with
// "NAME: interrupted; cleaned up" on stderr; else ExitFailed if run
// returned an error, with "NAME FAILED: err" on stderr; else ExitOK.
//
// It is the one place for the signal handling and exit statuses that every
// such program shares: each parses its flags, then calls Main with a run
// that does the work and returns only once everything it started is
// cleaned up, so that Ctrl-C leaves nothing behind.
func (p Program) Main(run func(ctx context.Context) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return p.exitCode(ctx, run(ctx), os.Stdout, os.Stderr)
}

// exitCode reports the outcome of a run under ctx on stdout and stderr and
// returns its exit status, as Main describes.
func (p Program) exitCode(ctx context.Context, err error, stdout, stderr io.Writer) int {
	switch {
	case ctx.Err() != nil && p.InterruptErrors && err != nil && err != context.Canceled:
		fmt.Fprintf(stderr, "\n%s: interrupted: %v\n", p.Name, err)
		return ExitInterrupted
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "\n%s: interrupted; cleaned up\n", p.Name)
		return ExitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "\n%s FAILED: %v\n", p.Name, err)
		return ExitFailed
	}
	if p.Passed != "" {
		fmt.Fprintf(stdout, "\n%s\n", p.Passed)
	}
	return ExitOK
}
