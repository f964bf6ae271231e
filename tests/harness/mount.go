package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segfs/segfs/mountinfo"
)

// UnmountGrace is how long Unmount waits for segfs to exit after SIGTERM.
const UnmountGrace = 30 * time.Second

// MountOptions configure StartMount.
type MountOptions struct {
	// Bin is the segfs binary. Empty means FindBinaries().Segfs.
	Bin string
	// Source is s3://bucket[/prefix] or file:///dir.
	Source string
	// Server, when set, adds --endpoint, --path-style and --region for it
	// and gives segfs the server's Env.
	Server *Server
	// Endpoint, when set with Server, is the --endpoint given instead of
	// the server's own (a proxy in front of it, say).
	Endpoint string
	// Env, when not nil, replaces the server's Env (for example to pass a
	// wrong secret). It is always appended to ChildEnv.
	Env []string
	// Dir is the mountpoint, used as given even if it does not exist.
	// Empty means a new directory inside the mount's temporary directory.
	Dir string
	// Args are extra flags, placed before SOURCE (e.g. "--part-size", "1MiB").
	Args []string
	// TempDir is where the mount's temporary directory (log, XDG cache
	// home, default mountpoint) is created. Empty means os.TempDir().
	TempDir string
	// ReadyTimeout bounds the wait for the mount to appear. Zero means 30s.
	ReadyTimeout time.Duration
	// OverDeadMount lets Dir hold the dead FUSE mount of a segfs that was
	// killed (see Crash): segfs is expected to clear it and mount anew.
	OverDeadMount bool
}

// Mount is a running `segfs mount` process and its FUSE mount. Its methods
// may be called concurrently.
type Mount struct {
	// Immutable after StartMount.

	// Dir is the absolute mountpoint.
	Dir         string
	metricsAddr string
	tmp         string // log, cache home, default mountpoint
	args        []string
	proc        *child
	http        *http.Client

	stopOnce sync.Once
	stopErr  error // set inside stopOnce

	mu       sync.Mutex
	finalLog string // guarded by mu; the log, kept once tmp is removed
	stopped  bool   // guarded by mu
}

// ExitError is the error StartMount returns when segfs exits before the
// mount appears, as it should for a bad source, bad credentials or a
// missing mountpoint.
type ExitError struct {
	// Code is the exit status, -1 if a signal ended the process.
	Code int
	// Log is everything segfs wrote to stdout and stderr.
	Log string
	// Args are the arguments segfs ran with.
	Args []string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("segfs %s exited with status %d before mounting; output:\n%s",
		strings.Join(e.Args, " "), e.Code, indent(e.Log))
}

// StartMount runs `segfs mount [flags] SOURCE MOUNTPOINT` and waits until
// the mountpoint shows in /proc/self/mountinfo. If segfs exits first the
// error is an *ExitError. ctx bounds the start only; the process runs until
// Unmount, Kill, or `segfs unmount`. On error nothing is left running,
// mounted or on disk.
func StartMount(ctx context.Context, opts MountOptions) (*Mount, error) {
	bin := opts.Bin
	if bin == "" {
		b, err := FindBinaries()
		if !isExecutable(b.Segfs) {
			return nil, fmt.Errorf("mount %s: %w", opts.Source, err)
		}
		bin = b.Segfs
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	tmp, err := os.MkdirTemp(opts.TempDir, "segfs-mount-")
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", opts.Source, err)
	}
	m, err := startMount(ctx, bin, tmp, opts)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	return m, nil
}

func startMount(ctx context.Context, bin, tmp string, opts MountOptions) (*Mount, error) {
	dir := opts.Dir
	if dir == "" {
		dir = filepath.Join(tmp, "mnt")
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("mount %s: %w", opts.Source, err)
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", opts.Source, err)
	}
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved // mountinfo shows the resolved path
	}
	switch mounted, err := IsMounted(dir); {
	case err != nil:
		return nil, fmt.Errorf("mount %s: %w", opts.Source, err)
	case mounted && !opts.OverDeadMount:
		return nil, fmt.Errorf("mount %s: %s is already a FUSE mount", opts.Source, dir)
	}
	port, err := FreePort()
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", opts.Source, err)
	}
	m := &Mount{
		Dir:         dir,
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", port),
		tmp:         tmp,
		http: &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{Proxy: nil, MaxIdleConns: 2},
		},
	}
	m.args = []string{"mount"}
	env := opts.Env
	if opts.Server != nil {
		endpoint := opts.Server.Endpoint()
		if opts.Endpoint != "" {
			endpoint = opts.Endpoint
		}
		m.args = append(m.args, "--endpoint", endpoint, "--path-style", "--region", Region)
		if env == nil {
			env = opts.Server.Env()
		}
	}
	m.args = append(m.args, "--metrics-addr", m.metricsAddr)
	m.args = append(m.args, opts.Args...)
	m.args = append(m.args, opts.Source, dir)
	env = ChildEnv(slices.Concat(env, []string{"XDG_CACHE_HOME=" + filepath.Join(tmp, "cache")})...)

	m.proc, err = startChild(bin, m.args, env, filepath.Join(tmp, "segfs.log"), syscall.SIGTERM)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", opts.Source, err)
	}
	if err := m.waitMounted(ctx, opts.ReadyTimeout); err != nil {
		m.kill()
		if ok, _ := IsMounted(dir); ok {
			if uerr := lazyUnmount(dir); uerr != nil {
				err = errors.Join(err, uerr)
			}
		}
		return nil, err
	}
	return m, nil
}

// waitMounted polls mountinfo until dir is a FUSE mount, segfs exits, or
// the timeout or ctx ends.
func (m *Mount) waitMounted(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := IsMounted(m.Dir)
		if err != nil {
			return err
		}
		// segfs logs "mounted" once go-fuse has finished mounting (it
		// touches the mountpoint itself once more after it appears), in
		// text or, with --log-format json, in JSON.
		if log := m.proc.log(); ok && (strings.Contains(log, "msg=mounted") || strings.Contains(log, `"msg":"mounted"`)) {
			return nil
		}
		select {
		case <-m.proc.exited:
			// It may have mounted and exited in between: look once more.
			if ok, _ := IsMounted(m.Dir); ok {
				return fmt.Errorf("segfs %s mounted and then exited (%v); output:\n%s",
					strings.Join(m.args, " "), m.proc.exitError(), m.proc.logTail(8192))
			}
			return &ExitError{Code: m.proc.exitCode(), Log: m.proc.log(), Args: m.args}
		case <-ctx.Done():
			return fmt.Errorf("segfs %s: no mount at %s after %v: %w; output:\n%s",
				strings.Join(m.args, " "), m.Dir, timeout, ctx.Err(), m.proc.logTail(8192))
		case <-tick.C:
		}
	}
}

// MetricsAddr is the host:port of segfs's metrics endpoint.
func (m *Mount) MetricsAddr() string { return m.metricsAddr }

// Pid is the segfs process id.
func (m *Mount) Pid() int { return m.proc.cmd.Process.Pid }

// Args are the arguments segfs runs with.
func (m *Mount) Args() []string { return append([]string(nil), m.args...) }

// Stats fetches http://METRICS_ADDR/stats, a JSON object of counters. Only
// integer-valued members are returned; others are ignored.
func (m *Mount) Stats(ctx context.Context) (map[string]int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.metricsAddr+"/stats", nil)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("stats: GET %s: %s", req.URL, resp.Status)
	}
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return nil, fmt.Errorf("stats: decode: %w", err)
	}
	out := make(map[string]int64, len(raw))
	for k, v := range raw {
		var n int64
		if json.Unmarshal(v, &n) == nil {
			out[k] = n
		}
	}
	return out, nil
}

// Wait waits until segfs exits on its own (after `segfs unmount`, say) or
// ctx ends. It returns nil for exit status 0, the *exec.ExitError
// otherwise, or ctx's error.
func (m *Mount) Wait(ctx context.Context) error {
	select {
	case <-m.proc.exited:
		return m.proc.exitError()
	case <-ctx.Done():
		return fmt.Errorf("wait for segfs: %w", ctx.Err())
	}
}

// Unmount sends SIGTERM and waits up to UnmountGrace for segfs to exit, then
// kills it. If the mount is still there it detaches it (umount -l) as a last
// resort. It returns an error unless segfs exited with status 0 in time and
// took its mount with it. It removes the temporary directory once nothing is
// mounted. Unmount and Kill are safe to call more than once, in any mix; the
// first call decides the result.
func (m *Mount) Unmount() error { return m.stop(true) }

// kill sends SIGKILL and waits for segfs to be gone. A process killed
// while one of its own threads waits on its own mount (go-fuse touches the
// mountpoint once while mounting) cannot finish exiting until that mount's
// connection is aborted, so after a grace period kill aborts it.
func (m *Mount) kill() {
	m.proc.signal(syscall.SIGKILL)
	if m.proc.waitFor(5 * time.Second) {
		return
	}
	_ = mountinfo.Abort(m.Dir)
	<-m.proc.exited
}

// Kill sends SIGKILL, waits for segfs and detaches the orphaned mount. It
// returns an error only if the cleanup failed.
func (m *Mount) Kill() error { return m.stop(false) }

// Crash sends SIGKILL and waits for segfs, and leaves its mount behind,
// dead (ENOTCONN), as a crashed daemon does; a later StartMount with
// OverDeadMount on the same Dir is expected to clear it. The mountpoint
// must be outside the mount's temporary directory (MountOptions.Dir), which
// Crash removes. After Crash, Unmount and Kill do nothing and return
// Crash's result.
func (m *Mount) Crash() error {
	if rel, err := filepath.Rel(m.tmp, m.Dir); err == nil && !strings.HasPrefix(rel, "..") {
		return fmt.Errorf("crash %s: the mountpoint is inside the mount's temporary directory; set MountOptions.Dir", m.Dir)
	}
	m.stopOnce.Do(func() { m.stopErr = m.crash() })
	return m.stopErr
}

func (m *Mount) crash() error {
	m.proc.signal(syscall.SIGKILL)
	if !m.proc.waitFor(5 * time.Second) {
		// A thread of segfs waits on its own mount: abort the
		// connection (the mount stays, dead) so that it can exit.
		_ = mountinfo.Abort(m.Dir)
		<-m.proc.exited
	}
	m.mu.Lock()
	m.finalLog = m.proc.log()
	m.stopped = true
	m.mu.Unlock()
	m.http.CloseIdleConnections()
	if err := os.RemoveAll(m.tmp); err != nil {
		return fmt.Errorf("crash %s: %w", m.Dir, err)
	}
	return nil
}

func (m *Mount) stop(graceful bool) error {
	m.stopOnce.Do(func() { m.stopErr = m.doStop(graceful) })
	return m.stopErr
}

func (m *Mount) doStop(graceful bool) error {
	var errs []error
	if graceful {
		m.proc.signal(syscall.SIGTERM)
		if !m.proc.waitFor(UnmountGrace) {
			m.kill()
			errs = append(errs, fmt.Errorf("segfs did not exit within %v of SIGTERM and was killed", UnmountGrace))
		} else if err := m.proc.exitError(); err != nil {
			errs = append(errs, fmt.Errorf("segfs exited: %w", err))
		}
	} else {
		m.kill()
	}
	mounted, err := IsMounted(m.Dir)
	if err != nil {
		errs = append(errs, err)
	}
	if mounted {
		if graceful {
			errs = append(errs, fmt.Errorf("%s still mounted after segfs exited; detached it with umount -l", m.Dir))
		}
		if err := lazyUnmount(m.Dir); err != nil {
			errs = append(errs, err)
		}
		mounted, _ = IsMounted(m.Dir)
	}
	m.mu.Lock()
	m.finalLog = m.proc.log()
	m.stopped = true
	m.mu.Unlock()
	m.http.CloseIdleConnections()
	if mounted {
		errs = append(errs, fmt.Errorf("%s is still mounted; left %s in place", m.Dir, m.tmp))
	} else if err := os.RemoveAll(m.tmp); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("unmount %s: %w; segfs output:\n%s", m.Dir, errors.Join(errs...), indent(tail(m.finalLog, 8192)))
	}
	return nil
}

// Log returns everything segfs has written to stdout and stderr so far.
func (m *Mount) Log() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return m.finalLog
	}
	return m.proc.log()
}

func tail(s string, max int) string {
	if len(s) > max {
		return s[len(s)-max:]
	}
	return s
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "    (no output)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
