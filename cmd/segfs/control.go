package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
	"golang.org/x/sys/unix"
)

// The control socket: `segfs status` and `segfs warm` reach the daemon
// serving a mount through a unix socket it owns, named after the
// mountpoint, in a directory only the mounting user can write (mode
// 0700; the socket 0600). Never a file inside the mount, which a copy of
// the mount would copy. The protocol is HTTP: GET /status answers one
// JSON object; POST /warm streams one JSON event a line until the warm
// ends, and the warm stops when the client goes away.

// controlFlags name the directory of control sockets; the mount and
// the commands that reach it share them.
type controlFlags struct {
	ControlDir string `name:"control-dir" placeholder:"DIR" help:"Directory of the control sockets through which segfs status and segfs warm reach a running mount (created 0700; refused unless owned by the user and closed to others). Default: /run/segfs as root, else $XDG_RUNTIME_DIR/segfs, else segfs-UID in the temporary directory."`
}

// dir returns the control directory.
func (f controlFlags) dir() string {
	switch {
	case f.ControlDir != "":
		return f.ControlDir
	case os.Geteuid() == 0:
		return "/run/segfs"
	case os.Getenv("XDG_RUNTIME_DIR") != "":
		return filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "segfs")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("segfs-%d", os.Geteuid()))
}

// socketPath is the control socket of the mount at mountpoint: named by
// a hash of its absolute path, so that any path length fits a socket
// address.
func (f controlFlags) socketPath(mountpoint string) (string, error) {
	abs, err := canonicalMountpoint(mountpoint)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(f.dir(), hex.EncodeToString(sum[:8])+".sock"), nil
}

// canonicalMountpoint is mountpoint as the kernel names it
// (segfs.CanonicalMountpoint): a mount on a symlink's target is found by
// either name.
func canonicalMountpoint(mountpoint string) (string, error) {
	p, err := segfs.CanonicalMountpoint(mountpoint)
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

// controlServer serves a mount's control socket.
type controlServer struct {
	// Immutable after startControl.
	path     string
	srv      *http.Server
	wg       sync.WaitGroup // Serve
	handlers sync.WaitGroup // requests being served; Add under mu while !closed
	mu       sync.Mutex
	closed   bool // guarded by mu: no request is served after it is set
	started  time.Time
	src      string
	mnt      string
	store    fetcher.Store
	rd       *reader.Reader
	root     *segfs.Root
	sched    *prefetch.Scheduler
	pc       *cache.Cache
	log      *slog.Logger
	ctx      context.Context // cancelled by Close: ends warms
	cancel   context.CancelFunc
}

// startControl listens on the mount's control socket, held to lim
// (controlLimits but in tests). A socket left by a segfs that was killed
// is replaced; one a live daemon answers on is an error (its mount is
// there).
func startControl(f controlFlags, mountpoint string, lim listenLimits, store fetcher.Store, rd *reader.Reader, root *segfs.Root, sched *prefetch.Scheduler, pc *cache.Cache, log *slog.Logger) (*controlServer, error) {
	path, err := f.socketPath(mountpoint)
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
	mnt, _ := canonicalMountpoint(mountpoint)
	ctx, cancel := context.WithCancel(context.Background())
	c := &controlServer{path: path, started: time.Now(), src: store.String(), mnt: mnt,
		store: store, rd: rd, root: root, sched: sched, pc: pc, log: log, ctx: ctx, cancel: cancel}
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
	c.srv = lim.server(counted)
	c.srv.BaseContext = func(net.Listener) context.Context { return ctx }
	limited := lim.listener(ln)
	c.wg.Go(func() {
		if err := c.srv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("control socket stopped", "path", path, "err", err)
		}
	})
	log.Debug("control socket", "path", path)
	return c, nil
}

// Close ends the warms in progress, stops serving and removes the socket.
func (c *controlServer) Close() {
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

// fileStatus is one file of a status report.
type fileStatus struct {
	Name     string  `json:"name"`
	Size     int64   `json:"size"`   // stored bytes (compressed for a seekable zstd object)
	Cached   int64   `json:"cached"` // of those, cached
	Fraction float64 `json:"fraction"`
}

// statusReport is what GET /status answers and `segfs status --json`
// prints.
type statusReport struct {
	Source        string           `json:"source"`
	Mountpoint    string           `json:"mountpoint"`
	PID           int              `json:"pid"`
	Version       string           `json:"version"`
	Started       time.Time        `json:"started"`
	UptimeSeconds float64          `json:"uptime_seconds"`
	CacheDir      string           `json:"cache_dir"`
	CacheBytes    int64            `json:"cache_bytes"`
	CacheMaxBytes int64            `json:"cache_max_bytes"`
	CacheParts    int64            `json:"cache_parts"`
	HitRatio      float64          `json:"hit_ratio"`    // part reads served without waiting for the store, of all part reads
	DiskHitRatio  float64          `json:"disk_ratio"`   // of those, by the disk cache
	PartReads     int64            `json:"part_reads"`   // the denominator of both
	Files         []fileStatus     `json:"files"`        // largest first; all with ?all=1, else the largest 20
	FileCount     int              `json:"file_count"`   // files in the mount
	CachedBytes   int64            `json:"cached_bytes"` // summed over every file
	TotalBytes    int64            `json:"total_bytes"`
	Counters      map[string]int64 `json:"counters"` // everything /stats serves
}

// warmWriteTimeout is how long a warm's client may leave a line of its
// answer unread before the warm is stopped.
const warmWriteTimeout = 30 * time.Second

// statusFiles is how many files a status lists without --all.
const statusFiles = 20

func (c *controlServer) status(w http.ResponseWriter, req *http.Request) {
	m := statsSnapshot(c.store, c.rd, c.root, c.sched, c.pc)
	rep := statusReport{
		Source: c.src, Mountpoint: c.mnt, PID: os.Getpid(), Version: versionString(),
		Started: c.started, UptimeSeconds: time.Since(c.started).Seconds(),
		CacheDir: c.pc.Dir(), CacheBytes: m["cache_bytes"], CacheMaxBytes: m["cache_max_bytes"], CacheParts: m["cache_parts"],
		Counters: m,
	}
	hits := m["memory_hits"] + m["held_hits"] + m["disk_hits"] + m["range_tier_hits"]
	rep.PartReads = hits + m["started_demand"] + m["joins"] + m["range_reads"]
	if rep.PartReads > 0 {
		rep.HitRatio = float64(hits) / float64(rep.PartReads)
		rep.DiskHitRatio = float64(m["disk_hits"]) / float64(rep.PartReads)
	}
	entries := c.root.Entries()
	rep.FileCount = len(entries)
	files := make([]fileStatus, 0, len(entries))
	for _, e := range entries {
		cached, total := c.rd.Cached(e)
		fs := fileStatus{Name: e.Name, Size: total, Cached: cached, Fraction: 1}
		if total > 0 {
			fs.Fraction = float64(cached) / float64(total)
		}
		rep.CachedBytes += cached
		rep.TotalBytes += total
		files = append(files, fs)
	}
	slices.SortStableFunc(files, func(a, b fileStatus) int {
		if c := cmp.Compare(b.Size, a.Size); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if req.URL.Query().Get("all") == "" && len(files) > statusFiles {
		files = files[:statusFiles]
	}
	rep.Files = files
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rep)
}

// warmRequest is the body of POST /warm: paths relative to the
// mountpoint, each a file or a directory; none, or ".", is every file.
type warmRequest struct {
	Paths []string `json:"paths"`
}

// warmEvent is one line of a warm's answer. The first names the files
// and bytes to warm; then Bytes grows (cached bytes of all the files,
// those cached before the warm included) and each file that is cached
// or fails has a line; the last has Done.
type warmEvent struct {
	Files      int    `json:"files,omitempty"`       // files to warm (first line)
	TotalBytes int64  `json:"total_bytes,omitempty"` // their stored bytes (first line)
	Bytes      int64  `json:"bytes"`                 // cached so far
	File       string `json:"file,omitempty"`        // a file that is now cached, or failed
	Error      string `json:"error,omitempty"`       // why File failed
	Done       bool   `json:"done,omitempty"`        // the warm is over
	Failed     int    `json:"failed,omitempty"`      // files that failed (last line)
}

// selectEntries returns the entries under paths, or an error naming a
// path that is no file or directory of the mount.
func selectEntries(entries []entry.Entry, paths []string) ([]entry.Entry, error) {
	if len(paths) == 0 {
		return entries, nil
	}
	seen := make(map[string]bool)
	var out []entry.Entry
	for _, p := range paths {
		p = filepath.ToSlash(filepath.Clean(p))
		if p == "." {
			p = ""
		}
		if strings.HasPrefix(p, "../") || p == ".." || strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("%s is outside the mount", p)
		}
		found := false
		for _, e := range entries {
			if p == "" || e.Name == p || strings.HasPrefix(e.Name, p+"/") {
				found = true
				if !seen[e.Name] {
					seen[e.Name] = true
					out = append(out, e)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("%s: no such file or directory in the mount", p)
		}
	}
	return out, nil
}

func (c *controlServer) warm(w http.ResponseWriter, req *http.Request) {
	var wr warmRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&wr); err != nil {
		http.Error(w, "bad warm request: "+err.Error(), http.StatusBadRequest)
		return
	}
	entries, err := selectEntries(c.root.Entries(), wr.Paths)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	rc := http.NewResponseController(w)
	// The warm ends with its client: gone, or not reading for
	// warmWriteTimeout (its writes would hold the warm's workers). Each
	// line sets its own write deadline, which replaces the server's
	// WriteTimeout: that bounds an answer, and a warm's lines go on.
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	var mu sync.Mutex // the writer, and the counts below
	enc := json.NewEncoder(w)
	emit := func(ev warmEvent) {
		_ = rc.SetWriteDeadline(time.Now().Add(warmWriteTimeout))
		if enc.Encode(ev) != nil || rc.Flush() != nil {
			cancel()
		}
	}
	var total, cached int64
	parts := make(map[string]int64, len(entries)) // parts of each file not yet reported
	for _, e := range entries {
		got, size := c.rd.Cached(e)
		total += size
		cached += got
		parts[e.Name] = c.rd.Parts(e)
	}
	failed := 0
	emit(warmEvent{Files: len(entries), TotalBytes: total, Bytes: cached})
	start := time.Now()
	c.log.Info("warm started", "files", len(entries), "bytes", total, "cached", cached)
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	ticker.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				emit(warmEvent{Bytes: cached})
				mu.Unlock()
			}
		}
	})
	err = c.rd.Warm(ctx, entries, func(p reader.WarmProgress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Err != nil {
			failed++
			emit(warmEvent{Bytes: cached, File: p.File, Error: p.Err.Error()})
			return
		}
		if !p.WasCached {
			cached += p.Bytes // a part found cached was counted above
		}
		if parts[p.File]--; parts[p.File] == 0 {
			emit(warmEvent{Bytes: cached, File: p.File})
		}
	})
	close(stop)
	ticker.Wait()
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		c.log.Info("warm stopped", "err", err, "cached", cached, "took", time.Since(start).Round(time.Millisecond))
		return // the client is gone, or the mount is closing
	}
	// The running sum misses parts other readers cached meanwhile and
	// counts twice a part evicted and fetched again: the last word is
	// the cache's.
	cached = 0
	for _, e := range entries {
		got, _ := c.rd.Cached(e)
		cached += got
	}
	c.log.Info("warm done", "files", len(entries), "failed", failed, "cached", cached, "took", time.Since(start).Round(time.Millisecond))
	emit(warmEvent{Bytes: cached, Done: true, Failed: failed})
}

// controlClient reaches the daemon of a mount.
func controlClient(f controlFlags, mountpoint string) (*http.Client, error) {
	path, err := f.socketPath(mountpoint)
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
