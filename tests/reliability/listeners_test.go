package reliability

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segfs/segfs/ops"
	"github.com/segfs/segfs/tests/harness"
)

// What the daemon holds --metrics-addr to: its cap of connections and
// its idle timeout.
var (
	metricsConns = ops.MetricsLimits().MaxConns
	listenIdle   = ops.MetricsLimits().IdleTimeout
)

// The shape of the flood.
const (
	floodConns = 500 // keep-alive connections, each sending one GET /stats and reading nothing
	// floodHeadroom is the descriptors left to the daemon, besides its
	// idle ones and the cap of --metrics-addr, for the reads of the
	// test: the fetch pool's connections (16 in use, 32 idle), the cache
	// subdirectories and writers' files, the part files being read.
	floodHeadroom = 192
	floodFiles    = 8
	floodFileSize = 3<<20 + 100 // four parts
)

// TestPlan25IdleMetricsConnections: 500 clients connect to
// --metrics-addr, each sends one GET /stats and reads nothing, with the
// daemon's open-file limit lowered to what it holds idle, the cap of
// that listener and the headroom reads need. segfs must hold no more
// than the cap of them at once, in goroutines, descriptors and memory;
// reads of the mount meanwhile must return the right bytes; and every
// client must in the end be answered and closed by the server, those
// beyond the cap once the idle timeout frees their slots. The daemon's
// goroutines are read from --pprof-addr, a listener of its own.
func TestPlan25IdleMetricsConnections(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{}
	for i := range floodFiles {
		objs[fmt.Sprintf("flood/f%d.bin", i)] = randomBytes(2531+uint64(i), floodFileSize)
	}
	e := newEnv(t, nil, 2531, objs)
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", port)
	m := e.mount(t, cacheDir(t), "--part-size", partSizeFlag, "--pprof-addr", pprofAddr)
	pid := m.Pid()
	base := harness.WaitIdle(t, m)
	baseFds := openFiles(t, pid)
	baseStatus, err := harness.ReadProcStatus(pid)
	if err != nil {
		t.Fatal(err)
	}
	limit := uint64(baseFds + metricsConns + floodHeadroom)
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Fatalf("lower segfs's open-file limit to %d: %v", limit, err)
	}
	t.Logf("idle mount: %d goroutines, %d descriptors, %d bytes resident; open-file limit set to %d",
		base["goroutines"], baseFds, baseStatus.VmRSS, limit)

	start := time.Now()
	clients := make([]net.Conn, 0, floodConns)
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	for range floodConns {
		c, err := net.DialTimeout("tcp", m.MetricsAddr(), 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", len(clients), err)
		}
		clients = append(clients, c)
		if _, err := io.WriteString(c, "GET /stats HTTP/1.1\r\nHost: segfs\r\n\r\n"); err != nil {
			t.Fatalf("connection %d: %v", len(clients), err)
		}
	}
	// The harness's keep-alive connection to /stats, counted in baseFds,
	// may hold a slot of the cap.
	fds := settledFiles(t, pid, baseFds+metricsConns-1)
	goroutines, gerr := pprofGoroutines(pprofAddr)
	st, err := harness.ReadProcStatus(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d connections open (%v): segfs holds %d goroutines (%v), %d descriptors, %d bytes resident (+%d)",
		floodConns, time.Since(start).Round(time.Millisecond), goroutines, gerr, fds, st.VmRSS, st.VmRSS-baseStatus.VmRSS)
	if bound := baseFds + metricsConns + 8; fds > bound {
		t.Errorf("%d descriptors with %d connections waiting, more than %d (the idle mount's, the cap of %d and 8)", fds, floodConns, bound, metricsConns)
	}
	// Each connection served has its goroutine, and one more for
	// net/http's background read while a handler runs; a few more come
	// and go (the pprof request, the pool's connections).
	if bound := base["goroutines"] + int64(2*metricsConns) + 16; gerr != nil || goroutines > bound {
		t.Errorf("%d goroutines (%v) with %d connections waiting, more than %d (the idle mount's, two per connection of the cap and 16)",
			goroutines, gerr, floodConns, bound)
	}
	// The memory bound segfs logged counts its listeners' connections at
	// their caps.
	if match := listenersTermRE.FindStringSubmatch(m.Log()); match == nil {
		t.Errorf("the memory bound segfs logged has no term for its listeners")
	} else if grown, bound := st.VmRSS-baseStatus.VmRSS, mustInt(t, match[1]); grown > bound {
		t.Errorf("the resident set grew by %d bytes, more than the %d the memory bound counts for the listeners", grown, bound)
	}

	reads := readFlood(t, m.Dir, objs)
	read, rerr := pprofGoroutines(pprofAddr)
	t.Logf("reads meanwhile: %s; then %d goroutines (%v)", reads, read, rerr)
	if reads.failures() != 0 || reads.ok != len(objs) {
		t.Errorf("reads of the mount with the connections waiting: %s, want %d exact", reads, len(objs))
	}

	// Every client is answered and then closed by the server: the cap's
	// worth at a time, each after the idle timeout.
	waves := (floodConns + metricsConns - 2) / (metricsConns - 1) // one slot may be the harness's own
	deadline := start.Add(time.Duration(waves+1)*(listenIdle+time.Second) + 10*time.Second)
	answered, closed, last := awaitClosed(clients, start, deadline)
	t.Logf("%d of %d answered, %d closed by segfs, the last %v after they connected (%d waves of the idle timeout %v)",
		answered, floodConns, closed, last.Round(time.Millisecond), waves, listenIdle)
	if answered != floodConns || closed != floodConns {
		t.Errorf("%d of %d connections answered and %d closed by segfs by %v, want all", answered, floodConns, closed, deadline.Sub(start).Round(time.Second))
	}
	// The served connections' goroutines are gone with them; those of
	// the fetch pool's connections, opened by the reads, stay.
	after := harness.WaitStats(t, m, "the goroutines of the flood gone", func(s map[string]int64) bool {
		return rerr == nil && s["goroutines"] <= read-int64(metricsConns)+8
	})
	t.Logf("after: %d goroutines, %d descriptors", after["goroutines"], openFiles(t, pid))
}

// listenersTermRE finds the listeners' term of the memory bound segfs
// logs (cmd/segfs/memory.go).
var listenersTermRE = regexp.MustCompile(`msg="memory bound" .*Listeners:(\d+)`)

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// openFiles counts the descriptors process pid holds.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// settledFiles waits until process pid holds at least least descriptors
// and that count has not moved for half a second, or 10 s have passed,
// and returns the count.
func settledFiles(t *testing.T, pid, least int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	n, since := openFiles(t, pid), time.Now()
	for time.Now().Before(deadline) && (n < least || time.Since(since) < 500*time.Millisecond) {
		time.Sleep(50 * time.Millisecond)
		if m := openFiles(t, pid); m != n {
			n, since = m, time.Now()
		}
	}
	return n
}

// pprofGoroutines reads the number of goroutines from the goroutine
// profile at addr.
func pprofGoroutines(addr string) (int64, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return -1, fmt.Errorf("goroutine profile: %w", err)
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "goroutine profile: total ")
	if !ok {
		return -1, fmt.Errorf("goroutine profile begins %q", line)
	}
	return strconv.ParseInt(rest, 10, 64)
}

// readFlood reads every object through the mount at dir, all at once,
// and tallies the outcomes.
func readFlood(t *testing.T, dir string, objs map[string][]byte) *tally {
	t.Helper()
	var res tally
	var wg sync.WaitGroup
	for key, want := range objs {
		wg.Go(func() {
			got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
			switch errno := errnoOf(err); {
			case err != nil && errno != 0:
				res.add(errno)
			case err != nil:
				t.Errorf("read %s: %v", key, err)
			case !bytes.Equal(got, want):
				t.Errorf("read %s: %d bytes, not the object's %d", key, len(got), len(want))
			default:
				res.add(0)
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatalf("reads of the mount still running after %v", hangGuard)
	}
	return &res
}

// awaitClosed reads every client until the server closes it or deadline
// passes; it returns how many were answered 200, how many the server
// closed, and when the last was closed after start.
func awaitClosed(clients []net.Conn, start, deadline time.Time) (answered, closed int, last time.Duration) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			got, err := io.ReadAll(c)
			mu.Lock()
			defer mu.Unlock()
			if bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
				answered++
			}
			if err == nil || errors.Is(err, unix.ECONNRESET) {
				closed++
				last = max(last, time.Since(start))
			}
		})
	}
	wg.Wait()
	return answered, closed, last
}
