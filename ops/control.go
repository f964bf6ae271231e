package ops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segfs/segfs/mountinfo"
	"golang.org/x/sys/unix"
)

// The control socket: `segfs status` and `segfs warm` reach the daemon
// serving a mount through a unix socket it owns, named after the
// mountpoint, in a directory only the mounting user can write (mode
// 0700; the socket 0600). Never a file inside the mount, which a copy of
// the mount would copy. The protocol is HTTP: GET /status answers one
// JSON object; POST /warm streams one JSON event a line until the warm
// ends, and the warm stops when the client goes away.

// DefaultDir is the control directory when none is named: /run/segfs
// as root, else $XDG_RUNTIME_DIR/segfs, else segfs-UID in the
// temporary directory.
func DefaultDir() string {
	switch {
	case os.Geteuid() == 0:
		return "/run/segfs"
	case os.Getenv("XDG_RUNTIME_DIR") != "":
		return filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "segfs")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("segfs-%d", os.Geteuid()))
}

// SocketPath is the control socket, in the control directory dir, of
// the mount at mountpoint: named by a hash of its absolute path, so that
// any path length fits a socket address.
func SocketPath(dir, mountpoint string) (string, error) {
	abs, err := CanonicalMountpoint(mountpoint)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(dir, hex.EncodeToString(sum[:8])+".sock"), nil
}

// CanonicalMountpoint is mountpoint as the kernel names it
// (mountinfo.Canonical): a mount on a symlink's target is found by
// either name.
func CanonicalMountpoint(mountpoint string) (string, error) {
	p, err := mountinfo.Canonical(mountpoint)
	if err != nil {
		return "", fmt.Errorf("mountpoint %s: %w", mountpoint, err)
	}
	return p, nil
}

// ownDir creates dir (0700) if need be and checks that it is the
// user's own: a directory, not a symlink, owned by the effective user,
// with no access for group or others. Another user able to write there
// could put a socket of theirs in place of the daemon's.
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("control directory %s: %w", dir, err)
	}
	return checkOwnDir(dir)
}

// checkOwnDir is ownDir's check, of a directory that exists.
func checkOwnDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("control directory %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("control directory %s is not a directory (a symlink?); pass --control-dir", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("control directory %s is not owned by uid %d; pass --control-dir", dir, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("control directory %s has mode %04o: others may reach it; chmod 700 it or pass --control-dir", dir, fi.Mode().Perm())
	}
	return nil
}

// flock applies how (unix.LOCK_*) to f's flock, again when a signal
// interrupts it.
func flock(f *os.File, how int) error {
	for {
		if err := unix.Flock(int(f.Fd()), how); err != unix.EINTR {
			return err
		}
	}
}

// lockControlDir takes the control directory's lock (an flock on its
// .lock file) and returns its release.
func lockControlDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("control directory %s: lock: %w", dir, err)
	}
	if err := flock(f, syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("control directory %s: lock: %w", dir, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// sweepStaleSockets removes the control sockets in dir that no daemon
// listens on (a connect is refused): those of segfs processes that were
// killed, whose mountpoints may never be mounted again. Only sockets
// named as segfs names them are touched.
func sweepStaleSockets(dir string, log *slog.Logger) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		stem, ok := strings.CutSuffix(name, ".sock")
		if !ok || len(stem) != 16 || strings.Trim(stem, "0123456789abcdef") != "" || e.Type()&os.ModeSocket == 0 {
			continue
		}
		p := filepath.Join(dir, name)
		c, err := net.DialTimeout("unix", p, time.Second)
		if err == nil {
			c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) && os.Remove(p) == nil {
			log.Debug("removed the control socket of a segfs that is gone", "path", p)
		}
	}
}

// Control serves a mount's control socket.
type Control struct {
	// Immutable after StartControl.
	path     string
	srv      *http.Server
	wg       sync.WaitGroup // Serve
	handlers sync.WaitGroup // requests being served; Add under mu while !closed
	mu       sync.Mutex
	closed   bool // guarded by mu: no request is served after it is set
	started  time.Time
	src      string
	mnt      string
	d        Daemon
	log      *slog.Logger
	ctx      context.Context // cancelled by Close: ends warms
	cancel   context.CancelFunc
}

// StartControl listens on the mount's control socket, held to lim
// (ControlLimits but in tests). A socket left by a segfs that was killed
// is replaced; one a live daemon answers on is an error (its mount is
// there).
func StartControl(dir, mountpoint string, lim Limits, d Daemon, log *slog.Logger) (*Control, error) {
	path, err := SocketPath(dir, mountpoint)
	if err != nil {
		return nil, err
	}
	if err := ownDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	// Daemons starting at once take turns from the sweep to the listen:
	// one's sweep could otherwise remove the socket another has just
	// bound in place of a stale one.
	unlock, err := lockControlDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer unlock()
	sweepStaleSockets(filepath.Dir(path), log)
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s: another segfs answers on it", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	mnt, _ := CanonicalMountpoint(mountpoint)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Control{path: path, started: time.Now(), src: d.Store.String(), mnt: mnt,
		d: d, log: log, ctx: ctx, cancel: cancel}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", c.status)
	mux.HandleFunc("POST /warm", c.warm)
	// Every handler is counted, so Close returns only once none runs:
	// no warm outlives the shutdown (the scheduler and the cache are
	// closed after Close; a warm the Reader's Close reaches first ends
	// with ErrClosed).
	counted := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			http.Error(w, "the mount is closing", http.StatusServiceUnavailable)
			return
		}
		c.handlers.Add(1)
		c.mu.Unlock()
		defer c.handlers.Done()
		mux.ServeHTTP(w, req)
	})
	c.srv = lim.Server(counted)
	c.srv.BaseContext = func(net.Listener) context.Context { return ctx }
	limited := lim.Listener(ln)
	c.wg.Go(func() {
		if err := c.srv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("control socket stopped", "path", path, "err", err)
		}
	})
	log.Debug("control socket", "path", path)
	return c, nil
}

// Close ends the warms in progress, stops serving and removes the socket.
func (c *Control) Close() {
	c.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		_ = c.srv.Close() // a handler blocked writing to its client returns
	}
	c.wg.Wait()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.handlers.Wait()
	_ = os.Remove(c.path)
}

// Client reaches the daemon of the mount at mountpoint through its
// socket in the control directory dir.
func Client(dir, mountpoint string) (*http.Client, error) {
	path, err := SocketPath(dir, mountpoint)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("no segfs serves %s: no control socket at %s (is it mounted by this user? a mount of another user needs its --control-dir)", mountpoint, path)
	}
	// What the socket answers is trusted (a warm's paths go to it, its
	// reports are printed), so it must be the user's own daemon's: in a
	// directory only the user can write, and owned by the user. Root may
	// reach any user's, through that user's --control-dir.
	if os.Geteuid() != 0 {
		if err := checkOwnDir(filepath.Dir(path)); err != nil {
			return nil, err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.Mode()&os.ModeSocket == 0:
			return nil, fmt.Errorf("control socket %s is not a socket", path)
		case !ok || int(st.Uid) != os.Geteuid():
			return nil, fmt.Errorf("control socket %s is not owned by uid %d: not this user's segfs", path, os.Geteuid())
		}
	}
	return &http.Client{Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}, nil
}
