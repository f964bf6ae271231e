package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/shard"
)

// suite is what TestMain prepares once for every test in the package.
type suite struct {
	bins    harness.Binaries
	binsErr error           // from FindBinaries; tests skip or fail on it
	server  *harness.Server // nil unless both binaries exist
	dir     string          // the small shard, generated locally
	shard   shard.Manifest
	local   map[string][]byte // the shard's files by name
}

// shared is set by TestMain before any test runs and never changed after.
var shared *suite

// testPartSize is the --part-size most tests mount with, so that reads
// cross part borders often.
const testPartSize = 1 << 20

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "segfs-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	s, err := setup(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		return 1
	}
	shared = s
	code := m.Run()
	if s.server != nil {
		if err := s.server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			code = 1
		}
	}
	return code
}

func setup(tmp string) (*suite, error) {
	s := &suite{dir: filepath.Join(tmp, "shard"), local: map[string][]byte{}}
	s.bins, s.binsErr = harness.FindBinaries()
	if s.binsErr != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", s.binsErr)
	}
	var err error
	// Small enough to upload per test; with testPartSize its reads still
	// cross dozens of part borders.
	spec := shard.Spec{Seed: 20240601, Scale: 40 << 20, Segments: 3, JSONStoredFields: true}
	if s.shard, err = shard.Generate(s.dir, spec); err != nil {
		return nil, err
	}
	for _, f := range s.shard.Files {
		if s.local[f.Name], err = os.ReadFile(filepath.Join(s.dir, f.Name)); err != nil {
			return nil, err
		}
	}
	if s.binsErr == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if s.server, err = harness.StartServer(ctx, harness.Options{Bin: s.bins.Versitygw, Dir: tmp}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// needServer returns the shared server, or skips or fails the test when a
// binary is missing.
func needServer(t *testing.T) *harness.Server {
	t.Helper()
	harness.SkipOrFail(t, shared.binsErr)
	return shared.server
}

// needSegfs returns the segfs binary, or skips or fails the test when it is
// missing.
func needSegfs(t *testing.T) string {
	t.Helper()
	return harness.RequireSegfs(t).Segfs
}

// newBucket creates a bucket named after the test.
func newBucket(t *testing.T, srv *harness.Server) string {
	t.Helper()
	bucket := harness.BucketName(t, "t-")
	if err := srv.CreateBucket(context.Background(), bucket); err != nil {
		t.Fatal(err)
	}
	return bucket
}

// uploadShard uploads the small shard into a new bucket under prefix and
// returns the bucket.
func uploadShard(t *testing.T, srv *harness.Server, prefix string) string {
	t.Helper()
	bucket := newBucket(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.UploadFiles(ctx, bucket, prefix, shared.dir, shared.shard.Names()); err != nil {
		t.Fatal(err)
	}
	return bucket
}

// mountS3 mounts s3://bucket[/prefix] from the shared server for the
// test, unmounting it at cleanup.
func mountS3(t *testing.T, srv *harness.Server, source string, args ...string) *harness.Mount {
	t.Helper()
	return harness.StartMountT(t, harness.MountOptions{
		Bin:    needSegfs(t),
		Source: source,
		Server: srv,
		Args:   args,
	})
}

// mountFile mounts the local directory dir through a file:// source.
func mountFile(t *testing.T, dir string, args ...string) *harness.Mount {
	t.Helper()
	return harness.StartMountT(t, harness.MountOptions{
		Bin:    needSegfs(t),
		Source: (&url.URL{Scheme: "file", Path: dir}).String(),
		Args:   args,
	})
}

// assertNotMounted fails the test if dir is a FUSE mount.
func assertNotMounted(t *testing.T, dir string) {
	t.Helper()
	mounted, err := harness.IsMounted(dir)
	if err != nil {
		t.Fatal(err)
	}
	if mounted {
		t.Errorf("%s is still mounted", dir)
	}
}
