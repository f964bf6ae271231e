package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/shaper"
	"github.com/segfs/segfs/tests/shard"
)

const (
	bucket      = "soak"
	shardPrefix = "shard"
	zstPrefix   = "zst"
)

// file is one file the mount shows, and where its true content is.
type file struct {
	name  string // path in the mount
	local string // local file holding exactly what the mount must show
	size  int64
}

// remote is the server, the shaping proxy and the fault proxy, in that
// order from the server out, and what was uploaded.
type remote struct {
	srv    *harness.Server
	shaper *shaper.Shaper
	faults *faults.Proxy
	files  []file
	// objects maps each object key to a local file with its bytes as
	// stored (compressed for the seekable zstd object), for checking the
	// part cache, whose parts hold stored bytes.
	objects map[string]string
	shardMB float64
}

// setupRemote generates or reuses the shard, packs its largest stored
// fields file as a seekable zstd object, starts the server, uploads, and
// starts both proxies. closeAll undoes what was started, in reverse.
func setupRemote(ctx context.Context, cfg config, bins harness.Binaries, work string, out io.Writer) (rem *remote, closeAll func() error, err error) {
	var closers []func() error
	closeAll = func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	rem = &remote{objects: map[string]string{}}

	start := time.Now()
	spec := shard.Spec{Seed: cfg.seed, Scale: cfg.scale, Segments: 3, JSONStoredFields: true}
	man, err := shard.Generate(cfg.shardDir, spec)
	if err != nil {
		return nil, closeAll, err
	}
	for _, f := range man.Files {
		key := path.Join(shardPrefix, f.Name)
		local := filepath.Join(cfg.shardDir, f.Name)
		rem.files = append(rem.files, file{name: key, local: local, size: f.Size})
		rem.objects[key] = local
	}
	rem.shardMB = float64(man.TotalSize()) / 1e6
	// The largest stored-fields file, also as a seekable zstd object.
	var fdt shard.File
	for _, f := range man.Files {
		if strings.HasSuffix(f.Name, ".fdt") && f.Size > fdt.Size {
			fdt = f
		}
	}
	if fdt.Name == "" {
		return nil, closeAll, errors.New("the shard has no .fdt file to compress")
	}
	packed := filepath.Join(work, fdt.Name+".zst")
	csize, err := pack(ctx, filepath.Join(cfg.shardDir, fdt.Name), packed)
	if err != nil {
		return nil, closeAll, err
	}
	zkey := path.Join(zstPrefix, fdt.Name+".zst")
	rem.files = append(rem.files, file{name: path.Join(zstPrefix, fdt.Name), local: filepath.Join(cfg.shardDir, fdt.Name), size: fdt.Size})
	rem.objects[zkey] = packed
	fmt.Fprintf(out, "  shard    %s: %d files, %.0f MB; %s also as %s (%.1f MB seekable zstd); ready in %v\n",
		cfg.shardDir, len(man.Files), rem.shardMB, fdt.Name, zkey, float64(csize)/1e6, time.Since(start).Round(time.Millisecond))

	rem.srv, err = harness.StartServer(ctx, harness.Options{Bin: bins.Versitygw, Dir: work})
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, rem.srv.Stop)
	if err := rem.srv.CreateBucket(ctx, bucket); err != nil {
		return nil, closeAll, err
	}
	if err := rem.srv.UploadFiles(ctx, bucket, shardPrefix, cfg.shardDir, man.Names()); err != nil {
		return nil, closeAll, err
	}
	if _, err := rem.srv.PutFile(ctx, bucket, zkey, packed); err != nil {
		return nil, closeAll, err
	}

	shape := shapeProfile(cfg.latency, cfg.rate)
	rem.shaper, err = shaper.Start(rem.srv.Endpoint(), shape, shaper.Options{})
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, rem.shaper.Close)
	rem.faults, err = faults.New(faults.Config{
		Upstream:  rem.shaper.Endpoint(),
		Seed:      uint64(cfg.seed),
		AccessKey: rem.srv.AccessKey(),
		SecretKey: rem.srv.SecretKey(),
		Region:    harness.Region,
	})
	if err != nil {
		return nil, closeAll, err
	}
	closers = append(closers, rem.faults.Close)
	if err := rem.faults.SetRules(faultRules(cfg.faultRate)...); err != nil {
		return nil, closeAll, err
	}
	shaping := "none"
	if cfg.latency > 0 || cfg.rate > 0 {
		shaping = fmt.Sprintf("%v ± %v first-byte latency, %.0f MB/s per connection", shape.Latency, shape.Jitter, float64(shape.Rate)/1e6)
	}
	fmt.Fprintf(out, "  remote   segfs -> fault proxy %s (seed %d, rate %.3f per kind) -> shaper %s (%s) -> versitygw %s\n",
		rem.faults.URL(), cfg.seed, cfg.faultRate, rem.shaper.Endpoint(), shaping, rem.srv.Endpoint())
	return rem, closeAll, nil
}

// pack writes src in the seekable zstd format to dst and returns its size.
func pack(ctx context.Context, src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	_, csize, err := compress.Encode(ctx, out, in, compress.EncoderOptions{FrameSize: 256 << 10})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("pack %s: %w", src, err)
	}
	return csize, nil
}

// shapeProfile is the soak's shape of the remote: a first-byte latency
// varied by up to a quarter of it (whole milliseconds), and, if rate > 0, a
// cap of rate bytes per second on each connection, both on the
// server-to-client direction only.
func shapeProfile(latency time.Duration, rate int64) shaper.Profile {
	return shaper.Profile{
		Name:    "soak",
		Latency: latency,
		Jitter:  (latency / 4).Truncate(time.Millisecond),
		Rate:    rate,
	}
}

// faultRules are the soak's steady faults: each main kind at rate per
// request, the rarer and slower ones at a fraction of it. Errors before
// the headers hit each request at most once (the SDK retries them);
// errors in the body may hit every attempt.
func faultRules(rate float64) []faults.Rule {
	if rate == 0 {
		return nil
	}
	return []faults.Rule{
		{Ops: faults.OpList, Fault: faults.InternalError, Prob: 0.3, Times: 1, PerRequest: true}, // segfs sends no HEAD
		{Fault: faults.SlowDown, Prob: rate, Times: 1, PerRequest: true},
		{Fault: faults.InternalError, Prob: rate, Times: 1, PerRequest: true},
		{Fault: faults.Reset, Bytes: -1, Prob: rate},
		{Fault: faults.Short, Bytes: -1, Prob: rate},
		{Fault: faults.WholeObject, Prob: rate / 2},
		{Fault: faults.ShiftRange, Bytes: -1, Prob: rate / 2},
		{Fault: faults.ErrorBody200, Prob: rate / 2},
		{Fault: faults.Stall, Bytes: -1, Prob: rate / 4},
		{Fault: faults.StallHeaders, Prob: rate / 4, Times: 1, PerRequest: true},
	}
}
