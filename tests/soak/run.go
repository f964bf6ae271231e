package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/shard"
)

// run sets everything up, runs the workload for cfg.duration (or until
// ctx ends or something hangs), shuts down, checks, and prints the report
// to w. An error means the soak could not run; what it found is in the
// results.
func run(ctx context.Context, cfg config, w io.Writer) (res *results, err error) {
	bins, err := harness.FindBinaries()
	if err != nil {
		return nil, fmt.Errorf("%w\n(run `make deps build` first, or `make soak`)", err)
	}
	if cfg.shardDir == "" {
		cfg.shardDir = filepath.Join(bins.Root, ".cache", "soak-shard")
	}
	if err := os.MkdirAll(filepath.Join(bins.Root, ".cache"), 0o755); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	work, err := os.MkdirTemp(filepath.Join(bins.Root, ".cache"), "soak-run-")
	if err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(work); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	sum, _, err := shard.HashFile(bins.Segfs)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "segfs soak, %s: %v, seed %d, %d CPUs, Go %s\n", time.Now().UTC().Format(time.RFC3339),
		cfg.duration, cfg.seed, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(w, "  command  %s\n", strings.Join(os.Args, " "))

	// This process's goroutines before anything started: once everything
	// is closed again, the final check wants them back to this.
	baseline := goroutines()
	rem, closeRemote, err := setupRemote(ctx, cfg, bins, work, w)
	closed := false
	defer func() {
		if closed {
			return
		}
		if cerr := closeRemote(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err != nil {
		return nil, err
	}
	res = newResults()
	s, err := newSoak(cfg, bins, rem, work, res)
	if err != nil {
		return nil, err
	}
	defer s.closeLocals()

	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = s.startMount(mctx, false)
	cancel()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "  segfs    %s (sha256 %.12s) %s\n", bins.Segfs, sum, strings.Join(s.mountOptions().Args, " "))
	var rotation []string
	for _, md := range modes {
		rotation = append(rotation, strings.Join(md.args, " "))
	}
	fmt.Fprintf(w, "  modes    in turn: %s\n", strings.Join(rotation, " | "))
	fmt.Fprintf(w, "  workers  %d copying, %d reading at random, %d opening; remount every %v (every second after kill -9)\n",
		cfg.copiers, cfg.readers, cfg.openers, cfg.remountInterval().Round(time.Millisecond))

	start := time.Now()
	s.workload(ctx, w)
	res.duration = time.Since(start)

	// The final unmount, then the checks.
	m := s.currentMount()
	res.mountDone(idleStats(m))
	if err := m.Unmount(); err != nil {
		res.unmountFailed(err)
	}
	res.segfsLog(m.Log())
	res.faults = rem.faults.Stats()
	checkMounts(work, res)
	s.checkCache()
	closed = true
	if err := closeRemote(); err != nil {
		res.fatal(fmt.Errorf("closing the remote: %w", err))
	}
	checkGoroutines(baseline, 30*time.Second, res)
	res.print(w)
	return res, nil
}

// workload runs the workers, the remount controller, the hang monitor,
// the sampler and a progress line per minute until cfg.duration passes
// and the rotation of mount modes has gone round once, or ctx ends, or an
// operation hangs; then it waits for all of them.
func (s *soak) workload(ctx context.Context, w io.Writer) {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var bg, workers sync.WaitGroup
	bg.Go(func() {
		select {
		case <-runCtx.Done():
			return
		case <-time.After(s.cfg.duration):
		}
		select {
		case <-runCtx.Done():
		case <-s.rotated:
		}
		stop()
	})
	bg.Go(func() { s.monitorHangs(runCtx, stop) })
	bg.Go(func() { s.sampleLoop(runCtx, 500*time.Millisecond) })
	bg.Go(func() { s.controller(runCtx, stop) })
	bg.Go(func() { s.progress(runCtx, w) })
	id := 0
	for kind, n := range map[string]int{"copy": s.cfg.copiers, "pread": s.cfg.readers, "open": s.cfg.openers} {
		for range n {
			id++
			wid := id
			workers.Go(func() { s.worker(runCtx, kind, wid) })
		}
	}
	<-runCtx.Done()

	// Each worker ends after its operation in flight. One that does not
	// is hung (the monitor has said so): kill segfs, which fails its
	// read, and wait again.
	done := make(chan struct{})
	go func() { workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.cfg.opTimeout + 30*time.Second):
		s.res.hang("workers still busy after the run ended; killing segfs")
		if err := s.currentMount().Kill(); err != nil {
			s.res.fatal(err)
		}
		<-done
	}
	bg.Wait()
}

// progress prints a line a minute.
func (s *soak) progress(ctx context.Context, w io.Writer) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := s.res
		r.mu.Lock()
		var ops, failed int64
		for _, n := range r.ops {
			ops += n
		}
		for _, n := range r.failedBy {
			failed += n
		}
		line := fmt.Sprintf("  %6v  %d operations, %.2f GB verified, %d failed, %d wrong, %d mounts",
			time.Since(start).Round(time.Second), ops, float64(r.bytes)/1e9, failed, r.wrongN, r.mounts)
		r.mu.Unlock()
		fmt.Fprintf(w, "%s, %d faults injected\n", line, s.rem.faults.Stats().TotalFaults())
	}
}
