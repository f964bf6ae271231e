package ops

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/leakcheck"
)

// A limited listener accepts no more than its cap at once; closing a
// connection, even twice, gives back one slot; Close ends an Accept
// waiting for a slot.
func TestLimitListener(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { leakcheck.Settle(t, before, 5*time.Second) })
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(inner, 2)
	accepted := make(chan net.Conn, 8)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
				}
				return
			}
			accepted <- c
		}
	})
	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range 5 {
		c, err := net.DialTimeout("tcp", inner.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	next := func(what string) net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no connection accepted", what)
			return nil
		}
	}
	none := func(what string) {
		t.Helper()
		select {
		case c := <-accepted:
			c.Close()
			t.Fatalf("%s: a connection was accepted past the cap", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
	a, b := next("first"), next("second")
	none("two held")
	a.Close()
	a.Close() // a second Close gives no second slot back
	c := next("one closed")
	none("one closed twice")
	b.Close()
	c.Close()
	next("two more closed").Close()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// idleClient is a connection that sent one request and has read
// nothing of its own accord; poll reads what arrived since.
type idleClient struct {
	conn net.Conn
	got  []byte
	eof  bool // the server closed the connection
}

// dialIdle dials addr and sends req.
func dialIdle(t *testing.T, network, addr, req string) *idleClient {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return &idleClient{conn: c}
}

// poll reads what arrives for d, or until the connection's end.
func (c *idleClient) poll(d time.Duration) {
	if c.eof {
		return
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		n, err := c.conn.Read(buf)
		c.got = append(c.got, buf[:n]...)
		if err != nil {
			c.eof = errors.Is(err, io.EOF)
			return
		}
	}
}

// answered reports whether the server's answer began with status.
func (c *idleClient) answered(status string) bool {
	return strings.HasPrefix(string(c.got), "HTTP/1.1 "+status)
}

// pollAll waits for d, then reads what arrived at every client, and
// counts those answered and those closed by the server.
func pollAll(clients []*idleClient, d time.Duration) (answered, closed int) {
	time.Sleep(d)
	for _, c := range clients {
		c.poll(5 * time.Millisecond)
		if c.answered("200") {
			answered++
		}
		if c.eof {
			closed++
		}
	}
	return answered, closed
}

const statsRequest = "GET /stats HTTP/1.1\r\nHost: segfs\r\n\r\n"

// The metrics listener serves at most its cap of connections at once:
// clients that each send one request and read nothing get no more than
// that many answers, the rest wait until the idle timeout closes those
// served; every one is answered and closed in the end. Headers past
// MaxHeaderBytes are refused.
func TestMetricsListenerLimits(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { leakcheck.Settle(t, before, 5*time.Second) })
	stats := func() map[string]int64 { return map[string]int64{"gets": 7} }
	log := slog.New(slog.DiscardHandler)
	const conns, clients = 4, 12
	// idleClients serves stats with a cap of conns and idle, and dials
	// clients idle clients to it, each having sent one request.
	idleClients := func(t *testing.T, idle time.Duration) []*idleClient {
		lim := MetricsLimits()
		lim.MaxConns, lim.IdleTimeout = conns, idle
		m, err := serveMetrics(metricsConfig{Addr: "127.0.0.1:0", Limits: lim}, stats, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		var cs []*idleClient
		for range clients {
			cs = append(cs, dialIdle(t, "tcp", m.metricsAddr, statsRequest))
		}
		return cs
	}

	t.Run("cap", func(t *testing.T) {
		cs := idleClients(t, time.Minute) // nothing times out here
		deadline := time.Now().Add(10 * time.Second)
		answered, _ := pollAll(cs, 50*time.Millisecond)
		for answered < conns && time.Now().Before(deadline) {
			answered, _ = pollAll(cs, 50*time.Millisecond)
		}
		if answered != conns {
			t.Fatalf("%d of %d idle clients answered, want the cap, %d", answered, clients, conns)
		}
		if answered, _ = pollAll(cs, 300*time.Millisecond); answered != conns {
			t.Fatalf("%d idle clients answered with the cap of %d taken", answered, conns)
		}
		// One client going frees one slot.
		for _, c := range cs {
			if c.answered("200") {
				c.conn.Close()
				c.eof = true
				break
			}
		}
		answered, _ = pollAll(cs, 50*time.Millisecond)
		for answered < conns+1 && time.Now().Before(deadline) {
			answered, _ = pollAll(cs, 50*time.Millisecond)
		}
		if answered != conns+1 {
			t.Errorf("%d answered once a served client left, want %d", answered, conns+1)
		}
	})

	t.Run("idle timeout", func(t *testing.T) {
		cs := idleClients(t, 200*time.Millisecond)
		deadline := time.Now().Add(20 * time.Second)
		answered, closed := pollAll(cs, 50*time.Millisecond)
		for closed < clients && time.Now().Before(deadline) {
			answered, closed = pollAll(cs, 50*time.Millisecond)
		}
		if answered != clients || closed != clients {
			t.Errorf("of %d idle clients, %d answered and %d closed by the server, want all", clients, answered, closed)
		}
	})

	t.Run("profile outlasts the read timeout", func(t *testing.T) {
		plim := PprofLimits()
		plim.ReadTimeout = 300 * time.Millisecond
		m, err := serveMetrics(metricsConfig{PprofAddr: "127.0.0.1:0", PprofLimits: plim}, stats, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		start := time.Now()
		code, body := get(t, "http://"+m.pprofAddr+"/debug/pprof/profile?seconds=1")
		if took := time.Since(start); code != http.StatusOK || len(body) == 0 || took < time.Second {
			t.Errorf("a CPU profile of 1 s: %d, %d bytes after %v; want 200, a profile, after 1 s", code, len(body), took)
		}
		// An execution trace, as docs/BENCH.md takes of an open.
		code, body = get(t, "http://"+m.pprofAddr+"/debug/pprof/trace?seconds=1")
		if code != http.StatusOK || !strings.HasPrefix(body, "go 1.") {
			t.Errorf("an execution trace of 1 s: %d, %.20q; want 200 and a trace", code, body)
		}
	})

	t.Run("headers", func(t *testing.T) {
		m, err := serveMetrics(metricsAt("127.0.0.1:0", ""), stats, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		big := "GET /stats HTTP/1.1\r\nHost: segfs\r\nX-Big: " + strings.Repeat("a", 2*listenMaxHeaderBytes) + "\r\n\r\n"
		c := dialIdle(t, "tcp", m.metricsAddr, big)
		c.poll(5 * time.Second)
		if !c.answered("431") {
			t.Errorf("headers of %d bytes: answer %.40q, want 431", 2*listenMaxHeaderBytes, c.got)
		}
	})
}

// The memory and descriptors the listeners may hold follow their caps.
func TestListenLimitsCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  Limits
	}{{"metrics", MetricsLimits()}, {"pprof", PprofLimits()}, {"control", ControlLimits()}} {
		lim := tc.lim
		switch {
		case lim.MaxConns <= 0 || lim.ReadHeaderTimeout <= 0 || lim.ReadTimeout <= 0 || lim.WriteTimeout <= 0 || lim.IdleTimeout <= 0 || lim.MaxHeaderBytes <= 0:
			t.Errorf("%s: %+v: every limit must be set", tc.name, lim)
		case lim.ReadTimeout < lim.ReadHeaderTimeout:
			t.Errorf("%s: ReadTimeout %v is shorter than ReadHeaderTimeout %v", tc.name, lim.ReadTimeout, lim.ReadHeaderTimeout)
		}
		if lim.Files() != lim.MaxConns+1 {
			t.Errorf("%s: %d descriptors for %d connections", tc.name, lim.Files(), lim.MaxConns)
		}
		doubled := lim
		doubled.MaxConns *= 2
		if doubled.Memory() != 2*lim.Memory() || lim.Memory() < int64(lim.MaxConns)*(connStateBytes+int64(lim.MaxHeaderBytes)) {
			t.Errorf("%s: memory %d for %d connections", tc.name, lim.Memory(), lim.MaxConns)
		}
	}
	// pprof refuses a profile longer than the WriteTimeout: it must let
	// the default 30 s through.
	if p := PprofLimits(); p.WriteTimeout <= 30*time.Second {
		t.Errorf("pprof limits %+v cut a default CPU profile short", p)
	}
}
