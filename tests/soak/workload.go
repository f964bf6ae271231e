package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// soak is one run: the remote, the mount, the workers and what they found.
type soak struct {
	// Immutable after newSoak.
	cfg      config
	bins     harness.Binaries
	rem      *remote
	cacheDir string
	mnt      string
	files    []file
	locals   map[string]*os.File // local content by mount path; ReadAt only
	dirs     map[string][]string // directory in the mount to the names it must list
	res      *results

	// opMu is held for reading by every operation and for writing by a
	// remount, which so waits for the operations in flight and holds
	// back new ones.
	opMu sync.RWMutex

	mountMu sync.Mutex
	mount   *harness.Mount // guarded by mountMu; replaced under opMu too
	mountN  int            // guarded by mountMu: mounts started, for the rotation

	// rotated is closed once the rotation has gone round once: every
	// mode mounted, and a kill -9 done.
	rotated chan struct{}

	ops    sync.Map // op id to *opInfo: operations in flight, for the hang monitor
	nextOp atomic.Int64
}

// opInfo is an operation in flight.
type opInfo struct {
	what  string
	start time.Time
	hung  atomic.Bool
}

func newSoak(cfg config, bins harness.Binaries, rem *remote, work string, res *results) (*soak, error) {
	s := &soak{
		cfg: cfg, bins: bins, rem: rem, res: res,
		cacheDir: filepath.Join(work, "segfs-cache"),
		mnt:      filepath.Join(work, "mnt"),
		files:    rem.files,
		locals:   map[string]*os.File{},
		dirs:     map[string][]string{},
		rotated:  make(chan struct{}),
	}
	if err := os.Mkdir(s.mnt, 0o755); err != nil {
		return nil, err
	}
	for _, f := range s.files {
		lf, err := os.Open(f.local)
		if err != nil {
			s.closeLocals()
			return nil, err
		}
		s.locals[f.name] = lf
		dir, base := path.Split(f.name)
		dir = path.Clean("/" + dir)
		s.dirs[dir] = append(s.dirs[dir], base)
		for d := dir; d != "/"; d = path.Dir(d) {
			parent := path.Dir(d)
			if !slices.Contains(s.dirs[parent], path.Base(d)) {
				s.dirs[parent] = append(s.dirs[parent], path.Base(d))
			}
		}
	}
	for _, names := range s.dirs {
		slices.Sort(names)
	}
	return s, nil
}

func (s *soak) closeLocals() {
	for _, f := range s.locals {
		f.Close()
	}
}

// mode is one way of mounting segfs. The mounts of a run take the modes
// in turn, and every second remount comes after kill -9, so that each
// mode is both killed and unmounted cleanly within six remounts.
type mode struct {
	name string
	args []string
}

var modes = []mode{
	{"prefetch open", []string{"--prefetch", "open"}},
	{"passthrough", []string{"--prefetch", "open", "--passthrough"}},
	{"prefetch all", []string{"--prefetch", "all"}},
}

// crashBefore reports whether remount n (from 1) kills segfs first.
func crashBefore(n int) bool { return n%2 == 1 }

// rotationRemounts is how many remounts make the rotation go round once:
// every mode mounted, the first remount after kill -9.
var rotationRemounts = len(modes) - 1

// remountInterval is the time between remounts: --remount-every, or less
// in a run too short to go round the rotation at that pace.
func (c config) remountInterval() time.Duration {
	return min(c.remountEvery, c.duration/time.Duration(rotationRemounts+1))
}

// mountOptions mounts the bucket through the fault proxy on s.mnt, with
// the flags every mode shares.
func (s *soak) mountOptions() harness.MountOptions {
	return harness.MountOptions{
		Bin:      s.bins.Segfs,
		Source:   "s3://" + bucket,
		Server:   s.rem.srv,
		Endpoint: s.rem.faults.URL(),
		Dir:      s.mnt,
		Args: []string{
			"--cache-dir", s.cacheDir, "--cache-size", s.cfg.cacheSize, "--part-size", s.cfg.partSize,
			"--max-fetches", fmt.Sprint(s.cfg.maxFetches), "--idle-timeout", s.cfg.idleTimeout.String(),
		},
		TempDir:      filepath.Dir(s.mnt),
		ReadyTimeout: 2 * time.Minute,
	}
}

// startMount mounts in the next mode of the rotation; overDead says a
// killed segfs left its mount behind.
func (s *soak) startMount(ctx context.Context, overDead bool) error {
	s.mountMu.Lock()
	md := modes[s.mountN%len(modes)]
	s.mountMu.Unlock()
	opts := s.mountOptions()
	opts.Args = append(opts.Args, md.args...)
	opts.OverDeadMount = overDead
	m, err := harness.StartMount(ctx, opts)
	if err != nil {
		return fmt.Errorf("mount (%s): %w", md.name, err)
	}
	s.mountMu.Lock()
	s.mount = m
	s.mountN++
	s.mountMu.Unlock()
	passthroughOff := false
	if slices.Contains(md.args, "--passthrough") {
		st, err := m.Stats(ctx)
		if err != nil {
			return fmt.Errorf("mount (%s): %w", md.name, err)
		}
		// Where the kernel or the privileges do not allow passthrough,
		// segfs says so and serves every read itself.
		passthroughOff = st["passthrough"] != 1
	}
	s.res.addMount(md.name, passthroughOff)
	return nil
}

func (s *soak) currentMount() *harness.Mount {
	s.mountMu.Lock()
	defer s.mountMu.Unlock()
	return s.mount
}

// worker runs operations of one kind until ctx ends.
func (s *soak) worker(ctx context.Context, kind string, id int) {
	rng := rand.New(rand.NewPCG(uint64(s.cfg.seed), uint64(id)))
	buf := make([]byte, 1<<20)
	want := make([]byte, 1<<20)
	for n := 0; ctx.Err() == nil; n++ {
		f := s.files[rng.IntN(len(s.files))]
		s.opMu.RLock()
		if ctx.Err() != nil {
			s.opMu.RUnlock()
			return
		}
		op := s.begin(fmt.Sprintf("%s %s", kind, f.name))
		switch kind {
		case "copy":
			s.copyFile(f, rng, buf, want)
		case "pread":
			s.pread(f, rng, buf, want)
		case "open":
			s.open(f, buf, want, n%8 == 0)
		}
		s.end(op)
		s.opMu.RUnlock()
	}
}

func (s *soak) begin(what string) int64 {
	id := s.nextOp.Add(1)
	s.ops.Store(id, &opInfo{what: what, start: time.Now()})
	return id
}

func (s *soak) end(id int64) { s.ops.Delete(id) }

// monitorHangs reports every operation that runs longer than the
// operation timeout, once, and calls stop on the first.
func (s *soak) monitorHangs(ctx context.Context, stop func()) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.ops.Range(func(_, v any) bool {
			op := v.(*opInfo)
			if el := time.Since(op.start); el > s.cfg.opTimeout && !op.hung.Swap(true) {
				s.res.hang(fmt.Sprintf("%s: still running after %v", op.what, el.Round(time.Second)))
				stop()
			}
			return true
		})
	}
}

// copyFile reads a whole file from start to end, as cp does (with
// O_DIRECT half of the time, so that the page cache does not serve it),
// comparing each chunk with the local copy.
func (s *soak) copyFile(f file, rng *rand.Rand, buf, want []byte) {
	flag := 0
	if rng.IntN(2) == 0 {
		flag = syscall.O_DIRECT
	}
	fd, err := os.OpenFile(filepath.Join(s.mnt, filepath.FromSlash(f.name)), os.O_RDONLY|flag, 0)
	if err != nil {
		s.res.failed("copy", f.name, 0, err)
		return
	}
	defer fd.Close()
	var off int64
	for {
		n, err := io.ReadFull(fd, buf)
		if n > 0 {
			if !s.check("copy", f, off, buf[:n], want) {
				return
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			s.res.failed("copy", f.name, off, err)
			return
		}
	}
	if off != f.size {
		s.res.wrong(fmt.Sprintf("copy %s: %d bytes before EOF, want %d", f.name, off, f.size))
		return
	}
	s.res.op("copy")
}

// pread reads a random range, O_DIRECT half of the time.
func (s *soak) pread(f file, rng *rand.Rand, buf, want []byte) {
	flag := 0
	if rng.IntN(2) == 0 {
		flag = syscall.O_DIRECT
	}
	fd, err := os.OpenFile(filepath.Join(s.mnt, filepath.FromSlash(f.name)), os.O_RDONLY|flag, 0)
	if err != nil {
		s.res.failed("pread", f.name, 0, err)
		return
	}
	defer fd.Close()
	var n int
	switch r := rng.IntN(10); {
	case r < 4:
		n = 4096
	case r < 7:
		n = 1 + rng.IntN(64<<10)
	default:
		n = 1 + rng.IntN(len(buf))
	}
	off := rng.Int64N(f.size)
	got, err := fd.ReadAt(buf[:n], off)
	if err != nil && !(errors.Is(err, io.EOF) && off+int64(got) == f.size) {
		s.res.failed("pread", f.name, off, err)
		return
	}
	if wantN := min(int64(n), f.size-off); int64(got) != wantN {
		s.res.wrong(fmt.Sprintf("pread %s at %d: %d bytes, want %d", f.name, off, got, wantN))
		return
	}
	if s.check("pread", f, off, buf[:got], want) {
		s.res.op("pread")
	}
}

// open opens a file, checks its size, reads its first and last 4 KiB and
// closes it; with list, it also lists the file's directory.
func (s *soak) open(f file, buf, want []byte, list bool) {
	p := filepath.Join(s.mnt, filepath.FromSlash(f.name))
	if list {
		dir := path.Dir("/" + f.name)
		ents, err := os.ReadDir(filepath.Join(s.mnt, filepath.FromSlash(dir)))
		if err != nil {
			s.res.failed("list", dir, 0, err)
			return
		}
		names := make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
		if !slices.Equal(names, s.dirs[dir]) {
			s.res.wrong(fmt.Sprintf("list %s: %q, want %q", dir, names, s.dirs[dir]))
			return
		}
		s.res.op("list")
	}
	fd, err := os.Open(p)
	if err != nil {
		s.res.failed("open", f.name, 0, err)
		return
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		s.res.failed("open", f.name, 0, err)
		return
	}
	if st.Size() != f.size {
		s.res.wrong(fmt.Sprintf("stat %s: size %d, want %d", f.name, st.Size(), f.size))
		return
	}
	for _, off := range []int64{0, max(0, f.size-4096)} {
		n := int(min(4096, f.size-off))
		got, err := fd.ReadAt(buf[:n], off)
		if err != nil && !(errors.Is(err, io.EOF) && got == n) {
			s.res.failed("open", f.name, off, err)
			return
		}
		if got != n || !s.check("open", f, off, buf[:n], want) {
			if got != n {
				s.res.wrong(fmt.Sprintf("open %s: read %d bytes at %d, want %d", f.name, got, off, n))
			}
			return
		}
	}
	s.res.op("open")
}

// check compares got, read at off in f, with the local copy, and records
// a wrong byte. It reports whether the bytes were right.
func (s *soak) check(kind string, f file, off int64, got, want []byte) bool {
	want = want[:len(got)]
	if _, err := s.locals[f.name].ReadAt(want, off); err != nil && !errors.Is(err, io.EOF) {
		s.res.wrong(fmt.Sprintf("%s %s: reading the local copy at %d: %v", kind, f.name, off, err))
		return false
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		s.res.wrong(fmt.Sprintf("%s %s: %d bytes at %d differ from the shard, first at %d", kind, f.name, len(got), off, off+int64(i)))
		return false
	}
	s.res.verified(len(got))
	return true
}

// controller remounts every cfg.remountInterval(), going round the modes
// (every second time after kill -9), and, as root, drops the page cache
// now and then so that buffered reads keep reaching segfs. It closes
// s.rotated once the rotation has gone round. It returns when ctx ends or
// a remount fails, calling stop then.
func (s *soak) controller(ctx context.Context, stop func()) {
	remount := time.NewTicker(s.cfg.remountInterval())
	defer remount.Stop()
	drop := time.NewTicker(20 * time.Second)
	defer drop.Stop()
	for n := 1; ; {
		select {
		case <-ctx.Done():
			return
		case <-drop.C:
			if os.Geteuid() == 0 {
				_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("1\n"), 0)
			}
			continue
		case <-remount.C:
		}
		if err := s.remount(ctx, crashBefore(n)); err != nil {
			s.res.fatal(err)
			stop()
			return
		}
		if n == rotationRemounts && ctx.Err() == nil {
			close(s.rotated)
		}
		n++
	}
}

// remount waits for the operations in flight, unmounts (or kills segfs)
// and mounts again on the same mountpoint and cache.
func (s *soak) remount(ctx context.Context, crash bool) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	m := s.currentMount()
	s.res.mountDone(idleStats(m))
	if crash {
		if err := m.Crash(); err != nil {
			return fmt.Errorf("kill -9: %w", err)
		}
		s.res.op("kill -9 + remount")
	} else {
		if err := m.Unmount(); err != nil {
			s.res.unmountFailed(err)
		}
		s.res.op("remount")
	}
	s.res.segfsLog(m.Log())
	// Not ctx: a run that ends meanwhile still needs a mount to unmount.
	mctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.startMount(mctx, crash); err != nil {
		return fmt.Errorf("mount again: %w", err)
	}
	return nil
}

// idleStats waits (up to a while) until the mount has no fetch queued or
// running, as after its readers stopped, and returns its counters then, or
// nil if they cannot be read. Their goroutine count is segfs's at rest,
// which must not grow from mount to mount.
func idleStats(m *harness.Mount) map[string]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		st, err := m.Stats(ctx)
		if err != nil {
			return nil
		}
		idle := st["inflight_parts"] == 0 &&
			st["queued_demand"]+st["queued_readahead"]+st["queued_background"] == 0 &&
			st["running_demand"]+st["running_readahead"]+st["running_background"] == 0
		if idle {
			st["idle"] = 1
			return st
		}
		select {
		case <-ctx.Done():
			return st
		case <-time.After(100 * time.Millisecond):
		}
	}
}
