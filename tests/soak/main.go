// Command soak runs segfs for a bounded time under a mixed workload, over
// a shaped remote that fails now and then, and checks every byte.
//
// A versitygw S3 server holds a seeded, generated shard (kept between runs
// under <repo>/.cache/soak-shard) and one seekable zstd object; the shaping
// proxy of tests/shaper in front of it adds latency and a per-connection
// bandwidth cap; the fault proxy of tests/faults in front of that injects
// every kind of fault it knows into a steady share of the requests. segfs mounts through both,
// with a part cache smaller than the shard so that parts keep being
// evicted and fetched again.
//
// Workers then run until the duration is over: sequential copies of whole
// files, random preads (buffered and O_DIRECT), repeated opens with stat
// and a listing; a controller unmounts and mounts again now and then,
// every second time after kill -9, going round three modes: --prefetch
// open, --prefetch open --passthrough, --prefetch all. Every byte read is
// compared with the local shard, in every mode. However short the run, it
// goes on until each mode has been mounted and a kill -9 done. At the end segfs is unmounted and the run checks that nothing
// leaked: goroutines of this process, mounts, temporary files in the cache
// directory; and that every part left in the cache holds the right bytes.
//
// It prints a report and exits 1 if any byte was wrong, an operation hung,
// an unmount failed, the cache held a wrong part or whole-object file, or
// something leaked.
// Reads that failed with an errno are reported, not fatal: the faults may
// exhaust a request's retries now and then, and EIO is then the right
// answer.
//
// Run it with `make soak` (SOAK_FLAGS='--duration 2m' to shorten it);
// `go run ./tests/soak -h` lists the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// config is the command line.
type config struct {
	duration     time.Duration
	seed         int64
	scale        int64
	partSize     string
	cacheSize    string
	maxFetches   int
	idleTimeout  time.Duration
	faultRate    float64
	latency      time.Duration
	rate         int64 // bytes per second per connection; 0: no cap
	copiers      int
	readers      int
	openers      int
	remountEvery time.Duration
	opTimeout    time.Duration
	shardDir     string
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.DurationVar(&c.duration, "duration", 10*time.Minute, "how long the workload runs, and at least until every mount mode was used and one kill -9 done; the soak stops by itself")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the shard, the workload and the faults")
	fs.Int64Var(&c.scale, "scale", 256<<20, "bytes of generated shard")
	fs.StringVar(&c.partSize, "part-size", "2MiB", "segfs --part-size")
	fs.StringVar(&c.cacheSize, "cache-size", "96MiB", "segfs --cache-size: smaller than the shard, so that parts are evicted and fetched again")
	fs.IntVar(&c.maxFetches, "max-fetches", 16, "segfs --max-fetches")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 2*time.Second, "segfs --idle-timeout: how soon a stalled body is abandoned")
	fs.Float64Var(&c.faultRate, "fault-rate", 0.03, "chance per request of each main fault kind (about 6 times this in all are faulted)")
	fs.DurationVar(&c.latency, "latency", 10*time.Millisecond, "first-byte latency the shaping proxy adds")
	rateMB := fs.Float64("rate", 64, "MB/s per connection the shaping proxy allows (0: no cap)")
	fs.IntVar(&c.copiers, "copiers", 2, "workers copying whole files")
	fs.IntVar(&c.readers, "readers", 8, "workers doing random preads")
	fs.IntVar(&c.openers, "openers", 2, "workers opening, stating and listing")
	fs.DurationVar(&c.remountEvery, "remount-every", 75*time.Second, "time between remounts (every second after kill -9), or a third of --duration if less")
	fs.DurationVar(&c.opTimeout, "op-timeout", 2*time.Minute, "an operation running longer than this is a hang, and fails the soak")
	fs.StringVar(&c.shardDir, "shard-dir", "", "where the generated shard is kept between runs (default <repo>/.cache/soak-shard)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.rate = int64(*rateMB * 1e6)
	switch {
	case c.duration <= 0:
		return c, fmt.Errorf("--duration %v: must be positive", c.duration)
	case c.scale < 1<<20:
		return c, fmt.Errorf("--scale %d: at least 1 MiB", c.scale)
	case c.faultRate < 0 || c.faultRate > 0.15:
		return c, fmt.Errorf("--fault-rate %v: must be in [0, 0.15]", c.faultRate)
	case c.copiers < 0 || c.readers < 0 || c.openers < 0 || c.copiers+c.readers+c.openers == 0:
		return c, errors.New("need at least one worker")
	case c.remountEvery <= 0 || c.opTimeout <= 0 || c.idleTimeout <= 0:
		return c, errors.New("--remount-every, --op-timeout and --idle-timeout must be positive")
	case c.maxFetches < 1:
		return c, fmt.Errorf("--max-fetches %d: must be positive", c.maxFetches)
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(harness.ExitUsage)
	}
	os.Exit(harness.Program{Name: "soak"}.Main(func(ctx context.Context) error {
		rep, err := run(ctx, cfg, os.Stdout)
		if err == nil && !rep.passed() {
			err = errors.New("see the report above")
		}
		return err
	}))
}
