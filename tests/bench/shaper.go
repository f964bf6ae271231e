package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// shaper is a TCP proxy, run in this process, in front of the S3 server.
// On the server-to-client direction it delays every byte by the profile's
// latency (± jitter) and caps each connection at the profile's rate; with
// upload, the client-to-server direction is capped at the rate too. The
// cap is per connection, as on a real object store.
//
// It stands for a network, which costs the client's host only its socket
// reads, so it is built to cost little CPU: each direction is a reader
// goroutine that reads from one socket into pooled 256 KiB buffers and
// stamps each chunk with the time it arrived, and a writer goroutine that
// sends each chunk when its delay is up, in slices paced by a token
// bucket. A direction with neither delay nor cap is a plain io.Copy,
// which Linux runs as splice between the two sockets.
type shaper struct {
	// Immutable after startShaper.
	ln       net.Listener
	upstream string // 127.0.0.1:PORT
	profile  Profile
	upload   bool
	endpoint string // http://127.0.0.1:PORT

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // guarded by mu
	closed bool                  // guarded by mu

	wg sync.WaitGroup // the accept loop and every connection's goroutines
}

const (
	// shapeChunk is the most one socket read takes in.
	shapeChunk = 256 << 10
	// shapeQueued bounds the bytes a direction holds between reading and
	// writing. It is several times the default profile's bandwidth-delay
	// product (64 MB/s x 25 ms = 1.6 MB), so the queue never caps a
	// connection below its rate; the server waits on TCP beyond it.
	shapeQueued = 8 << 20
	// shapeBurst is the most a paced writer may run ahead after a late
	// wake-up: it keeps the mean rate without bursts after idle time.
	shapeBurst = 2 * time.Millisecond
	// shapeSlice is the pacing granularity: a write is at most this much
	// of the rate's time.
	shapeSlice = 2 * time.Millisecond
)

var shapeBufs = sync.Pool{New: func() any { b := make([]byte, shapeChunk); return &b }}

// startShaper listens on a free loopback port and forwards to upstream
// (http://127.0.0.1:PORT) with the profile's shape; with upload, the
// client-to-server direction is capped at the profile's rate as well.
// Stop it with Close.
func startShaper(upstream string, p Profile, upload bool) (*shaper, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		return nil, fmt.Errorf("shaper: upstream %q is not http://127.0.0.1:PORT", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("shaper: listen: %w", err)
	}
	s := &shaper{
		ln:       ln,
		upstream: u.Host,
		profile:  p,
		upload:   upload,
		endpoint: "http://" + ln.Addr().String(),
		conns:    make(map[net.Conn]struct{}),
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Endpoint is the proxy's base URL.
func (s *shaper) Endpoint() string { return s.endpoint }

// Close stops accepting, closes every proxied connection and waits for
// all of the proxy's goroutines to end. It is safe to call more than once.
func (s *shaper) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		s.ln.Close()
		for c := range s.conns {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// track adds c to the connections Close closes; false once closed.
func (s *shaper) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *shaper) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *shaper) accept() {
	defer s.wg.Done()
	for {
		client, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.wg.Add(1)
		go s.serve(client)
	}
}

// serve proxies one client connection until both directions end; an error
// on either closes both sockets, as a broken network path would.
func (s *shaper) serve(client net.Conn) {
	defer s.wg.Done()
	server, err := net.Dial("tcp", s.upstream)
	if err != nil {
		client.Close()
		return
	}
	if !s.track(client) || !s.track(server) {
		client.Close()
		server.Close()
		s.untrack(client)
		return
	}
	defer func() {
		client.Close()
		server.Close()
		s.untrack(client)
		s.untrack(server)
	}()
	p := s.profile
	var once sync.Once
	abort := func() { once.Do(func() { client.Close(); server.Close() }) }
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var rate int64
		if s.upload {
			rate = p.Rate
		}
		if err := shapeCopy(server.(*net.TCPConn), client.(*net.TCPConn), 0, 0, rate); err != nil {
			abort()
		}
	}()
	if err := shapeCopy(client.(*net.TCPConn), server.(*net.TCPConn), p.Latency, p.Jitter, p.Rate); err != nil {
		abort()
	}
	wg.Wait()
}

// shapeCopy copies src to dst until src ends, then half-closes dst, so
// that an HTTP peer sees the end as it would without the proxy. Every
// chunk is held until latency (± jitter) after it was read, never
// overtaking the chunk before it, and the bytes leave at no more than rate
// bytes per second (0: no cap). It returns nil when src ended cleanly.
func shapeCopy(dst, src *net.TCPConn, latency, jitter time.Duration, rate int64) error {
	if latency == 0 && rate == 0 {
		_, err := io.Copy(dst, src)
		if err != nil {
			return err
		}
		return dst.CloseWrite()
	}
	type chunk struct {
		buf *[]byte
		n   int
		at  time.Time
	}
	q := make(chan chunk, shapeQueued/(16<<10))
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	queued, stopped := 0, false // guarded by mu
	var readErr error           // set before q is closed

	// The reader: one socket read per chunk, stamped on arrival.
	go func() {
		defer close(q)
		for {
			mu.Lock()
			for queued >= shapeQueued && !stopped {
				cond.Wait()
			}
			done := stopped
			mu.Unlock()
			if done {
				return
			}
			b := shapeBufs.Get().(*[]byte)
			n, err := src.Read(*b)
			if n > 0 {
				mu.Lock()
				queued += n
				mu.Unlock()
				q <- chunk{buf: b, n: n, at: time.Now()}
			} else {
				shapeBufs.Put(b)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				return
			}
		}
	}()

	// The writer: each chunk when it is due, paced in slices.
	var werr error
	var due, next time.Time // due: the last chunk's send time; next: the bucket's clock
	slice := shapeChunk
	if rate > 0 {
		slice = max(16<<10, int(float64(rate)*shapeSlice.Seconds()))
	}
	for c := range q {
		if werr == nil {
			d := latency
			if jitter > 0 {
				d += time.Duration(rand.Int64N(int64(2*jitter)+1)) - jitter
			}
			if at := c.at.Add(d); at.After(due) {
				due = at
			}
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
			data := (*c.buf)[:c.n]
			for len(data) > 0 && werr == nil {
				n := min(len(data), slice)
				if rate > 0 {
					now := time.Now()
					if floor := now.Add(-shapeBurst); next.Before(floor) {
						next = floor
					}
					next = next.Add(time.Duration(float64(n) / float64(rate) * float64(time.Second)))
					if wait := next.Sub(now); wait > 0 {
						time.Sleep(wait)
					}
				}
				_, werr = dst.Write(data[:n])
				data = data[n:]
			}
			if werr != nil {
				src.Close() // ends a read the reader may be blocked in
			}
		}
		shapeBufs.Put(c.buf)
		mu.Lock()
		queued -= c.n
		if werr != nil {
			stopped = true
		}
		cond.Signal()
		mu.Unlock()
	}
	if werr != nil {
		return werr
	}
	if readErr != nil {
		return readErr
	}
	return dst.CloseWrite()
}
