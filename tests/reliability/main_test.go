package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
)

// shared is the versitygw server every test uses (nil if a binary is
// missing), set by TestMain before any test runs.
var (
	shared    *harness.Server
	binaries  harness.Binaries
	binsError error
)

// hangGuard bounds every wait on something segfs should do by itself.
const hangGuard = harness.HangGuard

// partSize is the --part-size of most tests: small, so that reads cross
// part borders and a few MiB make many parts.
const (
	partSize     = 1 << 20
	partSizeFlag = "1MiB"
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "segfs-reliability-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	binaries, binsError = harness.FindBinaries()
	if binsError == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		shared, err = harness.StartServer(ctx, harness.Options{Bin: binaries.Versitygw, Dir: tmp})
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "reliability setup:", err)
			return 1
		}
	}
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "reliability:", err)
			code = 1
		}
	}
	return code
}

// env is one test's remote: a bucket on a server, its objects, and a fault
// proxy in front of the server.
type env struct {
	t      *testing.T
	srv    *harness.Server
	bucket string
	objs   map[string][]byte // key to content, as uploaded
	proxy  *faults.Proxy
}

// newEnv creates a bucket named after the test on srv (the shared server
// if nil), uploads objs into it and starts a proxy with the given seed in
// front of the server. Everything is removed at the end of the test.
func newEnv(t *testing.T, srv *harness.Server, seed uint64, objs map[string][]byte) *env {
	t.Helper()
	if srv == nil {
		harness.SkipOrFail(t, binsError)
		srv = shared
	}
	harness.RequireSegfs(t)
	e := &env{t: t, srv: srv, objs: objs, bucket: harness.BucketName(t, "r-")}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.CreateBucket(ctx, e.bucket); err != nil {
		t.Fatal(err)
	}
	if err := srv.PutObjects(ctx, e.bucket, objs); err != nil {
		t.Fatal(err)
	}
	p, err := faults.New(faults.Config{
		Upstream:  srv.Endpoint(),
		Seed:      seed,
		AccessKey: srv.AccessKey(),
		SecretKey: srv.SecretKey(),
		Region:    harness.Region,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	e.proxy = p
	return e
}

// rules sets the proxy's rules or ends the test.
func (e *env) rules(rules ...faults.Rule) {
	e.t.Helper()
	if err := e.proxy.SetRules(rules...); err != nil {
		e.t.Fatal(err)
	}
}

// mountOptions are the options of a mount of the whole bucket through the
// proxy, with the given cache directory and extra flags.
func (e *env) mountOptions(cacheDir string, args ...string) harness.MountOptions {
	return harness.MountOptions{
		Bin:      binaries.Segfs,
		Source:   "s3://" + e.bucket,
		Server:   e.srv,
		Endpoint: e.proxy.URL(),
		Args:     append([]string{"--cache-dir", cacheDir}, args...),
		TempDir:  e.t.TempDir(),
	}
}

// mount mounts the bucket through the proxy for t (the test or one of
// its subtests), unmounting it at t's cleanup.
func (e *env) mount(t *testing.T, cacheDir string, args ...string) *harness.Mount {
	t.Helper()
	return harness.StartMountT(t, e.mountOptions(cacheDir, args...))
}

// cacheDir returns a new cache directory path (not yet created).
func cacheDir(t *testing.T) string {
	return filepath.Join(t.TempDir(), "cache")
}
