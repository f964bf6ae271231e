package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/shard"
)

// demo runs the measured steps against one mount.
type demo struct {
	m       *harness.Mount
	man     shard.Manifest
	local   string // the generated shard
	copyDir string // where the shard is copied out to

	rows []row // appended by steps, read by printTable after steps returns
}

// row is one line of the result table.
type row struct {
	step    string
	bytes   int64
	elapsed time.Duration
	remote  bool             // whether it reads through the mount
	before  map[string]int64 // segfs stats around the step; nil if unavailable
	after   map[string]int64
	check   string // what was verified, or why it failed
	ok      bool
}

// steps runs every step; a failed check does not stop the later steps,
// an error does.
func (d *demo) steps(ctx context.Context) error {
	bySize := d.man.BySize()
	seqFile, randFile := bySize[1], bySize[0]
	for _, s := range []struct {
		name   string
		remote bool
		run    func(context.Context) (int64, string, error)
	}{
		{fmt.Sprintf("sequential read of %s (%s)", seqFile.Name, mb(seqFile.Size)), true,
			func(ctx context.Context) (int64, string, error) { return d.sequential(ctx, seqFile) }},
		{fmt.Sprintf("50 random 4 KiB preads of %s", randFile.Name), true,
			func(ctx context.Context) (int64, string, error) { return d.preads(ctx, randFile, 50, 4096) }},
		{"copy the whole shard out (cp -r)", true, d.copyOut},
		{"verify the copy by sha256", false, d.verifyCopy},
	} {
		if err := d.step(ctx, s.name, s.remote, s.run); err != nil {
			return err
		}
	}
	return nil
}

// errCheck marks a failed check: the step is reported as failed and the
// demo goes on.
var errCheck = errors.New("check failed")

func (d *demo) step(ctx context.Context, name string, remote bool, run func(context.Context) (int64, string, error)) error {
	fmt.Printf("  running: %s ...\n", name)
	r := row{step: name, remote: remote}
	if remote {
		r.before = d.stats()
	}
	start := time.Now()
	n, check, err := run(ctx)
	r.elapsed = time.Since(start)
	r.bytes = n
	if remote {
		r.after = d.stats()
	}
	r.check, r.ok = check, err == nil
	switch {
	case errors.Is(err, errCheck):
		err = nil
	case errors.Is(err, context.Canceled):
		r.check = "interrupted"
	case err != nil:
		r.check = "error: " + err.Error()
	}
	d.rows = append(d.rows, r)
	return err
}

// stats returns segfs's counters, or nil if they cannot be had. It does
// not take the demo's context: the counters are wanted after an interrupt
// too.
func (d *demo) stats() map[string]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := d.m.Stats(ctx)
	if err != nil {
		return nil
	}
	return st
}

// sequential reads f start to end through the mount and checks its sha256.
func (d *demo) sequential(ctx context.Context, f shard.File) (int64, string, error) {
	in, err := os.Open(filepath.Join(d.m.Dir, f.Name))
	if err != nil {
		return 0, "", err
	}
	defer in.Close()
	sum, n, err := shard.HashReader(ctxReader{ctx, in})
	if err != nil {
		return n, "", err
	}
	if sum != f.SHA256 || n != f.Size {
		return n, fmt.Sprintf("FAILED: %d bytes with sha256 %.12s…, want %d bytes with %.12s…", n, sum, f.Size, f.SHA256), errCheck
	}
	return n, "sha256 matches", nil
}

// preads reads count blocks of size bytes at seeded offsets of f and
// compares each with the local copy.
func (d *demo) preads(ctx context.Context, f shard.File, count, size int) (int64, string, error) {
	remote, err := os.Open(filepath.Join(d.m.Dir, f.Name))
	if err != nil {
		return 0, "", err
	}
	defer remote.Close()
	local, err := os.Open(filepath.Join(d.local, f.Name))
	if err != nil {
		return 0, "", err
	}
	defer local.Close()
	rng := rand.New(rand.NewPCG(42, uint64(f.Size)))
	got, want := make([]byte, size), make([]byte, size)
	var n int64
	bad := 0
	for range count {
		if err := ctx.Err(); err != nil {
			return n, "", err
		}
		off := rng.Int64N(f.Size - int64(size))
		if _, err := remote.ReadAt(got, off); err != nil {
			return n, "", fmt.Errorf("pread %s at %d: %w", f.Name, off, err)
		}
		if _, err := local.ReadAt(want, off); err != nil {
			return n, "", err
		}
		n += int64(size)
		if !bytes.Equal(got, want) {
			bad++
		}
	}
	if bad > 0 {
		return n, fmt.Sprintf("FAILED: %d of %d reads differ", bad, count), errCheck
	}
	return n, fmt.Sprintf("%d/%d reads match", count, count), nil
}

// copyOut copies every file of the mount into copyDir, one after the
// other, as cp -r does.
func (d *demo) copyOut(ctx context.Context) (int64, string, error) {
	if err := os.MkdirAll(d.copyDir, 0o755); err != nil {
		return 0, "", err
	}
	ents, err := os.ReadDir(d.m.Dir)
	if err != nil {
		return 0, "", err
	}
	buf := make([]byte, 1<<20)
	var total int64
	for _, e := range ents {
		n, err := copyFile(ctx, filepath.Join(d.m.Dir, e.Name()), filepath.Join(d.copyDir, e.Name()), buf)
		total += n
		if err != nil {
			return total, "", err
		}
	}
	return total, fmt.Sprintf("%d files copied", len(ents)), nil
}

func copyFile(ctx context.Context, src, dst string, buf []byte) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	// Plain reads and writes of len(buf), as cp does: no ReadFrom shortcut.
	n, err := io.CopyBuffer(struct{ io.Writer }{out}, ctxReader{ctx, in}, buf)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("copy %s: %w", src, err)
	}
	return n, nil
}

// verifyCopy checks that the copy holds exactly the shard's files, each
// with its sha256.
func (d *demo) verifyCopy(ctx context.Context) (int64, string, error) {
	ents, err := os.ReadDir(d.copyDir)
	if err != nil {
		return 0, "", err
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, d.man.Names()) {
		return 0, fmt.Sprintf("FAILED: the mount listed %d files, want %d", len(names), len(d.man.Files)), errCheck
	}
	if err := shard.Verify(d.copyDir, d.man); err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		return d.man.TotalSize(), "FAILED: " + msg, errCheck
	}
	return d.man.TotalSize(), fmt.Sprintf("%d/%d files match", len(d.man.Files), len(d.man.Files)), nil
}

// failed returns an error naming the failed steps, or nil.
func (d *demo) failed() error {
	var bad []string
	for _, r := range d.rows {
		if !r.ok {
			bad = append(bad, r.step)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(bad, "; "))
	}
	return nil
}

func (d *demo) printTable() {
	if len(d.rows) == 0 {
		return
	}
	width := len("step")
	for _, r := range d.rows {
		width = max(width, len(r.step))
	}
	line := func(step, bytes, elapsed, rate, gets, fetched, result string) {
		fmt.Printf("  %-*s  %10s  %8s  %8s  %5s  %10s  %s\n", width, step, bytes, elapsed, rate, gets, fetched, result)
	}
	fmt.Println()
	line("step", "bytes", "time", "MB/s", "GETs", "fetched", "result")
	var last row
	for _, r := range d.rows {
		gets, fetched := "-", "-"
		if r.remote {
			gets, fetched = "n/a", "n/a"
			if r.before != nil && r.after != nil {
				gets = fmt.Sprint(r.after["gets"] - r.before["gets"])
				fetched = mb(r.after["get_bytes"] - r.before["get_bytes"])
				last = r
			}
		}
		result := "ok    " + r.check
		if !r.ok {
			result = "FAIL  " + r.check
		}
		line(r.step, mb(r.bytes), r.elapsed.Round(time.Millisecond).String(), mbps(r.bytes, r.elapsed), gets, fetched, result)
	}
	fmt.Println("\n  GETs and fetched are segfs's own counters (its /stats endpoint), taken before and after each step.")
	if last.after != nil {
		fmt.Printf("  segfs totals: %d GETs, %s fetched from S3, %d retries.\n", last.after["gets"], mb(last.after["get_bytes"]), last.after["retries"])
	}
}

// ctxReader stops a copy between reads once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// mb formats a byte count in decimal megabytes.
func mb(n int64) string {
	if n < 1e6 {
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

func mbps(n int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(n)/1e6/d.Seconds())
}

func rate(n int64, d time.Duration) string { return mbps(n, d) + " MB/s" }
