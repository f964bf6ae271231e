package harness

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestProgramExitCode checks how a run's outcome maps to an exit status and
// messages, with a cancelled context standing in for a signal.
func TestProgramExitCode(t *testing.T) {
	boom := errors.New("boom")
	cleanup := errors.Join(context.Canceled, errors.New("remove work: busy"))
	tests := []struct {
		name        string
		prog        Program
		interrupted bool
		err         error
		code        int
		stdout      string
		stderr      string
	}{
		{"ok", Program{Name: "x"}, false, nil, ExitOK, "", ""},
		{"ok passed", Program{Name: "x", Passed: "All good."}, false, nil, ExitOK, "\nAll good.\n", ""},
		{"failed", Program{Name: "x", Passed: "All good."}, false, boom, ExitFailed, "", "\nx FAILED: boom\n"},
		{"interrupted", Program{Name: "x"}, true, context.Canceled, ExitInterrupted, "", "\nx: interrupted; cleaned up\n"},
		{"interrupted nil", Program{Name: "x", Passed: "All good."}, true, nil, ExitInterrupted, "", "\nx: interrupted; cleaned up\n"},
		{"interrupted error hidden", Program{Name: "x"}, true, boom, ExitInterrupted, "", "\nx: interrupted; cleaned up\n"},
		{"interrupted error shown", Program{Name: "x", InterruptErrors: true}, true, cleanup, ExitInterrupted, "", "\nx: interrupted: " + cleanup.Error() + "\n"},
		{"interrupted canceled not shown", Program{Name: "x", InterruptErrors: true}, true, context.Canceled, ExitInterrupted, "", "\nx: interrupted; cleaned up\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.interrupted {
				cancel()
			}
			var stdout, stderr strings.Builder
			code := tc.prog.exitCode(ctx, tc.err, &stdout, &stderr)
			if code != tc.code || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q",
					code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// TestProgramMain checks that Main passes run a live context and maps its
// error.
func TestProgramMain(t *testing.T) {
	code := Program{Name: "x"}.Main(func(ctx context.Context) error {
		if ctx.Err() != nil {
			t.Errorf("run got a done context: %v", ctx.Err())
		}
		return nil
	})
	if code != ExitOK {
		t.Errorf("Main = %d, want %d", code, ExitOK)
	}
}
