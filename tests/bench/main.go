// Command bench measures segfs against baselines that run in the same
// invocation, on the same generated shard, through the same shaped remote.
//
// A versitygw S3 server holds a seeded, Lucene-shaped shard (cached between
// runs) and one big file. Unless --profile loopback is given, an in-process
// shaping proxy (tests/shaper) sits in front of it and adds latency and a
// per-connection bandwidth cap; segfs and every baseline use that proxy's
// endpoint, and the run starts by measuring that the shaping is what the
// profile says. The cases (see the issue "make bench") then run against
// fresh segfs mounts, each printing seconds, MB/s or latencies, and ratios
// to the baselines: file-based (one whole-object GET per file, one file
// after another, to disk), limit (N parallel 8 MiB ranged GETs into
// /dev/null) and single-get (one 4 KiB ranged GET per random read).
//
// Run it with `make bench` or `make bench-quick`; `go run ./tests/bench
// -h` lists the flags. It prints a table and writes every record to a JSON
// file. Everything but the cached shard and the JSON file lives in a
// temporary directory that is removed at the end, also after Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/shaper"
	"github.com/segfs/segfs/tests/shard"
)

// config is the command line.
type config struct {
	profile    shaper.Profile
	quick      bool
	maxFetches int
	out        string
	cacheDir   string
	keepGoing  bool
	seed       int64
	reads      int
	readSize   int
	jsonFields bool
	// shaperBuffered has the shaping proxy hold bytes in buffers, not pipes.
	shaperBuffered bool
	segfsArgs      []string     // extra flags for every segfs mount
	keepLogs       string       // if set, each mount's log is written there
	cases          map[int]bool // the case numbers to run
}

// Sizes of the two modes.
const (
	fullScale, fullBig   = 1_500_000_000, 1 << 30
	quickScale, quickBig = 150_000_000, 256 << 20
	// partSize is segfs's part size and the limit baseline's GET size.
	partSize     = 8 << 20
	partSizeFlag = "8MiB"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == mmapChildArg {
		os.Exit(mmapChild())
	}
	if len(os.Args) > 1 && os.Args[1] == plainChildArg {
		os.Exit(plainChild())
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(harness.ExitUsage)
	}
	os.Exit(harness.Program{Name: "bench"}.Main(func(ctx context.Context) error {
		return run(ctx, cfg)
	}))
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	profile := fs.String("profile", "default", `remote profile: "default" (20ms ± 5ms latency, 64 MB/s per connection), "loopback" (no proxy), or latency=D,jitter=D,rate=NMB/s`)
	fs.BoolVar(&cfg.quick, "quick", false, "small shard (~150 MB + a 256 MiB file instead of ~1.5 GB + 1 GiB), for use while developing")
	fs.IntVar(&cfg.maxFetches, "max-fetches", 16, "segfs --max-fetches, and N for the limit baseline's parallel GETs")
	fs.StringVar(&cfg.out, "out", "", "JSON results file (default <repo>/.cache/bench/results.json, results-quick.json with --quick)")
	fs.StringVar(&cfg.cacheDir, "cache-dir", "", "where the generated shard is kept between runs (default <repo>/.cache/bench-shard)")
	fs.BoolVar(&cfg.keepGoing, "keep-going", false, "record a failed case and go on with the next instead of stopping")
	fs.Int64Var(&cfg.seed, "seed", 1, "seed of the shard's content and of the random read offsets")
	fs.IntVar(&cfg.reads, "reads", 200, "random preads per random-read case")
	fs.IntVar(&cfg.readSize, "read-size", 4096, "bytes per random pread")
	fs.BoolVar(&cfg.jsonFields, "json-stored-fields", false, "fill stored-fields (.fdt) files with compressible JSON records instead of random bytes")
	segfsArgs := fs.String("segfs-args", "", `extra flags for every segfs mount, space-separated (e.g. "--prefetch none")`)
	fs.StringVar(&cfg.keepLogs, "keep-logs", "", `directory to write each segfs mount's log to (with --segfs-args "--debug", a FUSE trace of every request)`)
	shaperCopy := fs.String("shaper-copy", "splice", `how the shaping proxy holds the bytes it delays: "splice" (in pipes, no copy through the bench; buffers where pipes of 8 MiB cannot be made) or "buffer"`)
	cases := fs.String("cases", "1,2,3,4,5,6,7,8,9,10", "comma-separated case numbers to run, with their baselines (case 5 is warm only after 1 and 3; 6 is the resources of 2)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.segfsArgs = strings.Fields(*segfsArgs)
	switch *shaperCopy {
	case "splice":
	case "buffer":
		cfg.shaperBuffered = true
	default:
		return cfg, fmt.Errorf("--shaper-copy %q: want splice or buffer", *shaperCopy)
	}
	var err error
	if cfg.cases, err = parseCases(*cases); err != nil {
		return cfg, err
	}
	if cfg.profile, err = shaper.ParseProfile(*profile); err != nil {
		return cfg, err
	}
	switch {
	case cfg.maxFetches < 1 || cfg.maxFetches > 1024:
		return cfg, fmt.Errorf("--max-fetches %d: must be in [1,1024]", cfg.maxFetches)
	case cfg.reads < 1:
		return cfg, fmt.Errorf("--reads %d: must be positive", cfg.reads)
	case cfg.readSize < 1 || cfg.readSize > 1<<20:
		return cfg, fmt.Errorf("--read-size %d: must be in [1,1MiB]", cfg.readSize)
	}
	return cfg, nil
}

func run(ctx context.Context, cfg config) (err error) {
	bins, err := harness.FindBinaries()
	if err != nil {
		return fmt.Errorf("%w\n(run `make deps build` first, or `make bench`)", err)
	}
	mode := "full"
	if cfg.quick {
		mode = "quick"
	}
	if cfg.cacheDir == "" {
		cfg.cacheDir = filepath.Join(bins.Root, ".cache", "bench-shard")
	}
	if cfg.out == "" {
		name := "results.json"
		if cfg.quick {
			name = "results-quick.json"
		}
		cfg.out = filepath.Join(bins.Root, ".cache", "bench", name)
	}
	mach := machine()
	fmt.Printf("segfs bench (%s mode), %s\n", mode, time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("  machine  %d CPUs (%s), %.1f GiB memory, Linux %s, %s\n", mach.CPUs, mach.CPUModel, float64(mach.MemBytes)/(1<<30), mach.Kernel, mach.Go)
	fmt.Printf("  load     %s (1, 5, 15 min averages; other work on the machine skews every figure)\n", mach.LoadStart)
	fmt.Printf("  profile  %s\n", cfg.profile)
	segfsSum, _, err := shard.HashFile(bins.Segfs)
	if err != nil {
		return fmt.Errorf("hash %s: %w", bins.Segfs, err)
	}
	fmt.Printf("  segfs    %s (sha256 %.12s) --max-fetches %d --part-size %s %s\n", bins.Segfs, segfsSum, cfg.maxFetches, partSizeFlag, strings.Join(cfg.segfsArgs, " "))
	if os.Geteuid() != 0 {
		fmt.Println("  WARNING  not root: the page cache cannot be dropped, so \"cold\" cases may read cached pages")
	}

	if err := os.MkdirAll(filepath.Join(bins.Root, ".cache"), 0o755); err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	work, err := os.MkdirTemp(filepath.Join(bins.Root, ".cache"), "bench-run-")
	if err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	defer addErr(&err, func() error { return os.RemoveAll(work) })

	b := &bench{cfg: cfg, bins: bins, work: work, mode: mode}
	res := Results{
		Date:      time.Now().UTC(),
		Args:      os.Args[1:],
		Profile:   cfg.profile.String(),
		Quick:     cfg.quick,
		Machine:   mach,
		Segfs:     SegfsInfo{Path: bins.Segfs, SHA256: segfsSum, MaxFetches: cfg.maxFetches, PartSize: partSizeFlag, ExtraArgs: cfg.segfsArgs},
		MBDefined: "MB = 10^6 bytes; MiB = 2^20 bytes",
	}
	runErr := b.run(ctx)
	res.Machine.LoadEnd = loadAvg()
	res.Shard, res.Sanity, res.Records = b.shardInfo, b.sanity, b.recs
	for _, e := range b.errs {
		res.Errors = append(res.Errors, e.Error())
	}
	ApplyRatios(res.Records)
	res.Records = append(res.Records, b.resourcesRecord(res.Records)...)
	SortRecords(res.Records)
	b.print(res.Records)
	fmt.Printf("\nload average at the end: %s\n", res.Machine.LoadEnd)
	if ctx.Err() != nil {
		// A partial run must not replace the results of a complete one.
		fmt.Printf("\ninterrupted: %s not written\n", cfg.out)
		return runErr
	}
	if len(res.Records) > 0 {
		if werr := writeJSON(cfg.out, res); werr != nil {
			return errors.Join(runErr, werr)
		}
		fmt.Printf("\nresults: %s\n", cfg.out)
	}
	if runErr == nil && len(b.errs) > 0 {
		runErr = fmt.Errorf("%d case(s) failed: %w", len(b.errs), errors.Join(b.errs...))
	}
	return runErr
}

// addErr runs f and joins its error, if any, into *err.
func addErr(err *error, f func() error) {
	if ferr := f(); ferr != nil {
		*err = errors.Join(*err, ferr)
	}
}

// parseCases parses a comma-separated list of case numbers 1 to 11.
func parseCases(s string) (map[int]bool, error) {
	cases := map[int]bool{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 11 {
			return nil, fmt.Errorf("--cases %q: %q is not a case number from 1 to 11", s, f)
		}
		cases[n] = true
	}
	return cases, nil
}
