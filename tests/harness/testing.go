package harness

import (
	"context"
	"os"
	"testing"
)

// E2ERequired reports whether SEGFS_REQUIRE_E2E is set, in which case a
// missing binary is a failure rather than a reason to skip.
func E2ERequired() bool { return os.Getenv(EnvRequireE2E) != "" }

// SkipOrFail ends the test when err (from FindBinaries) is not nil: with
// t.Fatal when E2ERequired, else with t.Skip. A nil err does nothing.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if E2ERequired() {
		tb.Fatalf("%s is set but a binary is missing: %v", EnvRequireE2E, err)
	}
	tb.Skipf("skipping end-to-end test (set %s=1 to fail instead; `make test` does): %v", EnvRequireE2E, err)
}

// RequireBinaries returns both binaries, or ends the test as SkipOrFail
// does if either is missing.
func RequireBinaries(tb testing.TB) Binaries {
	tb.Helper()
	b, err := FindBinaries()
	SkipOrFail(tb, err)
	return b
}

// RequireSegfs returns the binaries, or ends the test as SkipOrFail does if
// the segfs binary is missing (versitygw may be missing).
func RequireSegfs(tb testing.TB) Binaries {
	tb.Helper()
	b, err := FindBinaries()
	if !isExecutable(b.Segfs) {
		SkipOrFail(tb, err)
	}
	return b
}

// RequireVersitygw returns the binaries, or ends the test as SkipOrFail
// does if the versitygw binary is missing (segfs may be missing).
func RequireVersitygw(tb testing.TB) Binaries {
	tb.Helper()
	b, err := FindBinaries()
	if !isExecutable(b.Versitygw) {
		SkipOrFail(tb, err)
	}
	return b
}

// StartServerT starts a server for the test and stops it in tb.Cleanup.
func StartServerT(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := StartServer(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// StartMountT mounts for the test and unmounts in tb.Cleanup, failing the
// test if that unmount is not clean. TempDir defaults to tb.TempDir().
func StartMountT(tb testing.TB, opts MountOptions) *Mount {
	tb.Helper()
	if opts.TempDir == "" {
		opts.TempDir = tb.TempDir()
	}
	m, err := StartMount(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			tb.Error(err)
		}
	})
	return m
}
