package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
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

// BucketName returns a bucket name made of prefix, the test's name cut to
// a valid S3 name (lower-case letters, digits and single dashes) and a
// random suffix, so that each run of a test has its own bucket.
func BucketName(tb testing.TB, prefix string) string {
	var name strings.Builder
	name.WriteString(prefix)
	for _, r := range strings.ToLower(tb.Name()) {
		if name.Len() >= 48 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			name.WriteRune(r)
		} else if !strings.HasSuffix(name.String(), "-") {
			name.WriteByte('-')
		}
	}
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	return strings.TrimSuffix(name.String(), "-") + "-" + hex.EncodeToString(suffix[:])
}
