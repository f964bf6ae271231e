// Command demo shows segfs at work on a newcomer's machine: it serves a
// Lucene-shaped sample shard from a local S3 server (versitygw on
// loopback) through a segfs mount, reads it the ways a search engine and
// a recovery job do, checks every byte, and prints what each step cost.
//
// Run it with `make demo`. The sample shard is generated once into
// .cache/demo-shard and reused; everything else lives in a temporary
// directory that is removed at the end, also after Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/shard"
)

// config is the demo's command line.
type config struct {
	scale    int64  // bytes of sample shard
	seed     int64  // content seed
	cacheDir string // where the shard is generated and reused
	partSize string // --part-size for segfs; empty for its default
}

func main() {
	var cfg config
	flag.Int64Var(&cfg.scale, "scale", 300e6, "size of the sample shard in bytes")
	flag.Int64Var(&cfg.seed, "seed", 1, "seed of the sample shard's content")
	flag.StringVar(&cfg.cacheDir, "cache", "", "directory of the generated shard (default <repo>/.cache/demo-shard)")
	flag.StringVar(&cfg.partSize, "part-size", "", "segfs --part-size (default: segfs's own)")
	flag.Parse()

	prog := harness.Program{Name: "demo", Passed: "All checks passed.", InterruptErrors: true}
	os.Exit(prog.Main(func(ctx context.Context) error { return run(ctx, cfg) }))
}

func run(ctx context.Context, cfg config) (err error) {
	bins, err := harness.FindBinaries()
	if err != nil {
		return fmt.Errorf("%w\n(run `make build deps` first, or just `make demo`)", err)
	}
	if cfg.cacheDir == "" {
		cfg.cacheDir = filepath.Join(bins.Root, ".cache", "demo-shard")
	}
	fmt.Println("segfs demo: a Lucene-shaped shard on a local S3 server, read through a segfs mount")
	fmt.Println()

	spec := shard.Spec{Seed: cfg.seed, Scale: cfg.scale, Segments: 3, JSONStoredFields: true}
	reused := shard.Cached(cfg.cacheDir, spec)
	start := time.Now()
	man, err := shard.Generate(cfg.cacheDir, spec)
	if err != nil {
		return err
	}
	how := fmt.Sprintf("generated in %v (%s)", since(start), rate(man.TotalSize(), time.Since(start)))
	if reused {
		how = "reused from an earlier run"
	}
	info("shard", "%s: %d files, %s, %s", relPath(bins.Root, cfg.cacheDir), len(man.Files), mb(man.TotalSize()), how)

	work, err := os.MkdirTemp("", "segfs-demo-")
	if err != nil {
		return err
	}
	defer addErr(&err, func() error { return os.RemoveAll(work) })

	srv, err := harness.StartServer(ctx, harness.Options{Bin: bins.Versitygw, Dir: work})
	if err != nil {
		return err
	}
	defer addErr(&err, srv.Stop)
	info("server", "versitygw at %s, storing in %s", srv.Endpoint(), srv.Dir())

	const bucket, prefix = "demo", "indices/taxi-2015/0"
	if err := srv.CreateBucket(ctx, bucket); err != nil {
		return err
	}
	start = time.Now()
	if err := srv.UploadFiles(ctx, bucket, prefix, cfg.cacheDir, man.Names()); err != nil {
		return err
	}
	info("upload", "%d files to s3://%s/%s in %v (%s)", len(man.Files), bucket, prefix, since(start), rate(man.TotalSize(), time.Since(start)))

	var args []string
	if cfg.partSize != "" {
		args = append(args, "--part-size", cfg.partSize)
	}
	source := "s3://" + bucket + "/" + prefix
	m, err := harness.StartMount(ctx, harness.MountOptions{Bin: bins.Segfs, Source: source, Server: srv, Args: args, TempDir: work})
	if err != nil {
		return err
	}
	defer addErr(&err, m.Unmount)
	info("mount", "%s at %s (segfs pid %d)", source, m.Dir, m.Pid())
	fmt.Println()

	d := &demo{m: m, man: man, local: cfg.cacheDir, copyDir: filepath.Join(work, "copy")}
	done := make(chan error, 1)
	go func() { done <- d.steps(ctx) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Unmounting ends any read still blocked in the mount, so the
		// steps return; the deferred Unmount is then a no-op.
		fmt.Println("\nInterrupted: unmounting and stopping the server...")
		m.Unmount() // its error, if any, comes back from the deferred call
		<-done
		err = ctx.Err()
	}
	d.printTable()
	if err == nil {
		err = d.failed()
	}
	if err == nil {
		err = openSearchDemo(ctx, bins, srv, work)
	} else if !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w\nsegfs output (tail):\n%s", err, tail(m.Log(), 4000))
	}
	return err
}

// addErr runs f and joins its error, if any, into *err.
func addErr(err *error, f func() error) {
	if ferr := f(); ferr != nil {
		*err = errors.Join(*err, ferr)
	}
}

func info(what, format string, args ...any) {
	fmt.Printf("  %-8s %s\n", what, fmt.Sprintf(format, args...))
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

func relPath(root, p string) string {
	if rel, err := filepath.Rel(root, p); err == nil && filepath.IsLocal(rel) {
		return rel
	}
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
