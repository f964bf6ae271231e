package ops

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// The daemon's HTTP listeners (--metrics-addr, --pprof-addr and the
// control socket) are each held to a Limits: a cap on the
// connections served at once, and timeouts so that a connection that
// sends nothing, reads nothing or dribbles gives its slot back. A
// connection beyond the cap waits in the kernel's accept backlog, where
// it holds no descriptor, goroutine or memory of segfs. So what the
// listeners may hold is fixed by the caps: the memory bound counts it
// (memoryBound.Listeners) and the open-file check too (fileNeed).

// Limits bound one HTTP listener.
type Limits struct {
	MaxConns          int           // connections served at once
	ReadHeaderTimeout time.Duration // to read a request's headers, from its first byte or the connection's start
	ReadTimeout       time.Duration // to read a whole request, body included
	WriteTimeout      time.Duration // to answer, from the end of the request's headers
	IdleTimeout       time.Duration // a kept-alive connection waiting for its next request
	MaxHeaderBytes    int           // of a request's headers (net/http reads 4 KiB past it)
	// AnswerBytes is what one request may allocate while its answer is
	// built, for the memory bound.
	AnswerBytes int64
}

// What every listener shares.
const (
	// listenIdle is both the header and the idle timeout: a connection
	// without a request in progress keeps its slot that long at most,
	// so a scraper that finds the cap taken by idle connections gets in
	// well within Prometheus's default scrape timeout (10 s). Clients
	// that keep connections alive (Prometheus, curl, segfs status) dial
	// again at no cost.
	listenIdle = 5 * time.Second
	// listenMaxHeaderBytes: segfs's clients send a request line and a few
	// headers; a bearer token that a proxy adds fits. Go's default
	// (1 MiB) would let each connection make the server hold that much.
	listenMaxHeaderBytes = 16 << 10
	// connStateBytes is what a connection holds besides its headers and
	// its answer: the stack of its goroutine, as a handler grows it, and
	// of net/http's background read (32 + 8 KiB), and net/http's reader,
	// writer and response buffers (4 + 4 + 2 KiB).
	connStateBytes = 50 << 10
)

// metricsLimits hold --metrics-addr.
func MetricsLimits() Limits {
	return Limits{
		// A few Prometheus servers and agents, and people with curl:
		// far fewer scrape at once.
		MaxConns:          64,
		ReadHeaderTimeout: listenIdle,
		// Scrapes are GETs with no body; a body dribbled to a handler
		// that never reads it holds its slot no longer than this.
		ReadTimeout: 10 * time.Second,
		// Prometheus gives up on a scrape after its scrape timeout (10 s
		// by default): an answer nobody reads frees its slot then.
		WriteTimeout:   10 * time.Second,
		IdleTimeout:    listenIdle,
		MaxHeaderBytes: listenMaxHeaderBytes,
		// The largest answer, /metrics: the gathered metric families and
		// their text (docs/DESIGN.md, "Memory", has the measure).
		AnswerBytes: 512 << 10,
	}
}

// pprofTimeout bounds a request to --pprof-addr in all: a CPU or delta
// profile runs for its ?seconds= (30 by default) before it answers, and
// net/http/pprof refuses a duration past the server's WriteTimeout.
const pprofTimeout = 2 * time.Minute

// pprofLimits hold --pprof-addr.
func PprofLimits() Limits {
	return Limits{
		// An operator chasing a problem takes a few profiles at a time
		// (the runtime takes one CPU profile at a time anyway).
		MaxConns:          8,
		ReadHeaderTimeout: listenIdle,
		// GETs, as on --metrics-addr. Once a request's body is read,
		// net/http lifts the read deadline while the handler runs, so a
		// long profile is not cut short by it.
		ReadTimeout:    10 * time.Second,
		WriteTimeout:   pprofTimeout,
		IdleTimeout:    listenIdle,
		MaxHeaderBytes: listenMaxHeaderBytes,
		// A heap profile or a goroutine dump, which grow with the
		// allocation sites and the goroutines, not with a flag.
		AnswerBytes: 4 << 20,
	}
}

// controlLimits hold the control socket, which only the mounting user
// reaches (mode 0600 in a directory of theirs).
func ControlLimits() Limits {
	return Limits{
		// segfs status and segfs warm, one connection each.
		MaxConns:          16,
		ReadHeaderTimeout: listenIdle,
		// A warm's body (1 MiB at most) or a status request. A warm
		// outlasts it: once the body is read, net/http lifts the read
		// deadline and reads the connection in the background only to
		// learn that the client has gone, which ends the warm.
		ReadTimeout: 10 * time.Second,
		// A status answer. Each line of a warm sets its own write
		// deadline (warmWriteTimeout), which replaces this one, so a
		// long warm is not cut short.
		WriteTimeout:   warmWriteTimeout,
		IdleTimeout:    listenIdle,
		MaxHeaderBytes: listenMaxHeaderBytes,
		// A status of statusFiles files and the counters, or a warm's
		// line. Not counted: the list of every file a status sorts, and
		// the answer of status --all, which grow with the files.
		AnswerBytes: 64 << 10,
	}
}

// server returns an HTTP server of h held to lim's timeouts; serve it
// on lim.Listener(ln) for the cap.
func (lim Limits) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
	}
}

// listener returns ln held to lim.MaxConns connections at once.
func (lim Limits) Listener(ln net.Listener) net.Listener {
	return newLimitListener(ln, lim.MaxConns)
}

// memory is what the listener may hold with every slot taken: each
// connection's state, headers (and the 4 KiB net/http reads past
// MaxHeaderBytes) and the answer of its one request in flight (HTTP/1.1:
// net/http serves a connection's requests one at a time).
func (lim Limits) Memory() int64 {
	return int64(lim.MaxConns) * (connStateBytes + int64(lim.MaxHeaderBytes) + 4<<10 + lim.AnswerBytes)
}

// files is the descriptors the listener may hold: its socket and one
// per connection.
func (lim Limits) Files() int { return 1 + lim.MaxConns }

// limitListener accepts at most cap(slots) connections at a time: Accept
// takes a slot before it accepts, and a connection gives its slot back
// when it is closed. While every slot is taken, new connections wait in
// the kernel's accept backlog. Accept and Close may be called
// concurrently.
type limitListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{} // closed by Close: an Accept waiting for a slot returns
	once  sync.Once
}

// newLimitListener returns ln held to n connections at once (n > 0).
func newLimitListener(ln net.Listener, n int) *limitListener {
	if n <= 0 {
		panic("segfs: newLimitListener: the cap must be positive")
	}
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection. After Close it
// returns an error that is net.ErrClosed.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, slots: l.slots}, nil
}

// Close closes the listener; connections accepted keep their slots
// until they are closed.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn is a connection holding a slot of its limitListener.
type limitConn struct {
	net.Conn
	slots chan struct{}
	once  sync.Once
}

// Close closes the connection and gives its slot back, once.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.slots })
	return err
}

// CloseWrite half-closes the connection where it can be (TCP, unix):
// net/http does so before it closes a connection, so that the client
// reads the whole answer before the close.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
