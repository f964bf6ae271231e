package shaper

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Shaper is a TCP proxy, run in this process, in front of the S3 server.
// On the server-to-client direction it delays every byte by the profile's
// latency (± jitter) and caps each connection at the profile's rate; with
// upload, the client-to-server direction is capped at the rate too. The
// cap is per connection, as on a real object store.
//
// It stands for a network, which costs the client's host only its socket
// reads, so it is built to cost little CPU: each direction is a reader
// goroutine that takes in what the socket has (up to 256 KiB) and stamps
// it with the time it arrived, and a writer goroutine that sends each
// chunk when its delay is up, in slices paced as a link of the rate. The
// bytes wait in pipes (8 MiB per direction), moved in and out by splice(2)
// without a copy through this process; where pipes cannot be made, in
// pooled buffers. A direction with neither delay nor cap is a plain
// io.Copy, which Linux runs as splice between the two sockets.
type Shaper struct {
	// Immutable after Start.
	ln       net.Listener
	upstream string // 127.0.0.1:PORT
	profile  Profile
	upload   bool
	pipeSize int    // the size of each pipe that holds bytes; 0: buffers
	copying  string // how it copies, for the bench's output
	endpoint string // http://127.0.0.1:PORT

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // guarded by mu
	closed bool                  // guarded by mu

	wg sync.WaitGroup // the accept loop and every connection's goroutines

	// fallbacks counts directions that held their bytes in buffers
	// because their pipes could not be made (an unprivileged user past
	// its pipe quota: 64 MiB by default).
	fallbacks atomic.Int64
	warnOnce  sync.Once
}

const (
	// shapeChunk is the most one socket read takes in.
	shapeChunk = 256 << 10
	// shapeQueued bounds the bytes a direction holds between reading and
	// writing. It is several times the default profile's bandwidth-delay
	// product (64 MB/s x 25 ms = 1.6 MB), so the queue never caps a
	// connection below its rate; the server waits on TCP beyond it.
	shapeQueued = 8 << 20
	// shapeBurst is the most a paced writer may run ahead after the
	// client held it back (a full socket, as a closed TCP window).
	shapeBurst = 2 * time.Millisecond
	// shapeSlice is the pacing granularity: a write is at most this much
	// of the rate's time.
	shapeSlice = 2 * time.Millisecond
)

var shapeBufs = sync.Pool{New: func() any { b := make([]byte, shapeChunk); return &b }}

// Options are Start's choices beside the profile.
type Options struct {
	// Upload caps the client-to-server direction at the profile's rate too.
	Upload bool
	// Buffered holds the bytes in this process's buffers even where
	// pipes can be made.
	Buffered bool
	// pipeSize, if not 0, is used instead of the probed pipe size.
	pipeSize int
}

// Start listens on a free loopback port and forwards to upstream
// (http://127.0.0.1:PORT) with the profile's shape. Stop it with Close.
func Start(upstream string, p Profile, o Options) (*Shaper, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		return nil, fmt.Errorf("shaper: upstream %q is not http://127.0.0.1:PORT", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("shaper: listen: %w", err)
	}
	s := &Shaper{
		ln:       ln,
		upstream: u.Host,
		profile:  p,
		upload:   o.Upload,
		endpoint: "http://" + ln.Addr().String(),
		conns:    make(map[net.Conn]struct{}),
		copying:  "buffered (--shaper-copy buffer)",
	}
	if !o.Buffered {
		size, err := o.pipeSize, error(nil)
		if size == 0 {
			size, err = probePipeSize()
		}
		if err != nil {
			s.copying = fmt.Sprintf("buffered (%v)", err)
		} else {
			s.pipeSize = size
			s.copying = fmt.Sprintf("spliced through %d pipes of %d KiB per direction", max(1, shapeQueued/size), size>>10)
		}
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Endpoint is the proxy's base URL.
func (s *Shaper) Endpoint() string { return s.endpoint }

// Copying says how the proxy holds the bytes it delays.
func (s *Shaper) Copying() string { return s.copying }

// Close stops accepting, closes every proxied connection and waits for
// all of the proxy's goroutines to end. It is safe to call more than once.
func (s *Shaper) Close() error {
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
func (s *Shaper) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Shaper) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *Shaper) accept() {
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
func (s *Shaper) serve(client net.Conn) {
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
		if err := s.shapeCopy(server.(*net.TCPConn), client.(*net.TCPConn), 0, 0, rate); err != nil {
			abort()
		}
	}()
	if err := s.shapeCopy(client.(*net.TCPConn), server.(*net.TCPConn), p.Latency, p.Jitter, p.Rate); err != nil {
		abort()
	}
	wg.Wait()
}

// shapeCopy copies src to dst until src ends, then half-closes dst, so
// that an HTTP peer sees the end as it would without the proxy. Every
// chunk is held until latency (± jitter) after it was read, never
// overtaking the chunk before it, and the bytes leave at no more than rate
// bytes per second (0: no cap). With s.pipeSize > 0, the bytes wait in
// pipes of that size and never enter this process (splice(2) from socket
// to pipe to socket); otherwise, or if the pipes cannot be made, in pooled
// buffers. It returns nil when src ended cleanly.
func (s *Shaper) shapeCopy(dst, src *net.TCPConn, latency, jitter time.Duration, rate int64) error {
	if latency == 0 && rate == 0 {
		_, err := io.Copy(dst, src)
		if err != nil {
			return err
		}
		return dst.CloseWrite()
	}
	var m mover = bufferMover{dst: dst, src: src}
	if s.pipeSize > 0 {
		sm, err := newSpliceMover(dst, src, s.pipeSize, max(1, shapeQueued/s.pipeSize))
		if err == nil {
			defer sm.close()
			m = sm
		} else {
			s.fallbacks.Add(1)
			s.warnOnce.Do(func() {
				fmt.Printf("  WARNING  shaper: a connection holds its bytes in buffers, at more CPU: %v\n", err)
			})
		}
	}
	if err := shapeWith(m, func() { src.Close() }, newPacer(latency, jitter, rate)); err != nil {
		return err
	}
	return dst.CloseWrite()
}

// A mover moves a direction's bytes: read takes in up to room bytes from
// the source (blocking until some arrive) and holds them; write sends n
// of a chunk's held bytes from off on, and says whether it waited for the
// destination to take them; release drops a chunk's hold.
type mover interface {
	read(room int) (h held, n int, err error)
	write(h held, off, n int) (waited bool, err error)
	release(h held)
}

// held is where a chunk's bytes wait: a buffer, or one of a direction's
// pipes.
type held struct {
	buf  *[]byte
	pipe int
}

// errPipeFull is a spliced read that found bytes waiting but no free slot
// in any pipe: the reader waits for the writer to drain some.
var errPipeFull = errors.New("shaper: pipe full")

// shapeWith runs one direction: a reader goroutine that takes in chunks,
// stamped on arrival, while fewer than shapeQueued bytes are held, and
// this goroutine, which sends each chunk when p allows. After a failed
// write it calls closeSrc, which must end a read blocked in m.
func shapeWith(m mover, closeSrc func(), p *pacer) error {
	type chunk struct {
		h  held
		n  int
		at time.Time
	}
	q := make(chan chunk, shapeQueued/(16<<10))
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	queued, drains, stopped := 0, 0, false // guarded by mu
	var readErr error                      // set before q is closed

	go func() {
		defer close(q)
		for {
			mu.Lock()
			for queued >= shapeQueued && !stopped {
				cond.Wait()
			}
			done, room, seen := stopped, shapeQueued-queued, drains
			mu.Unlock()
			if done {
				return
			}
			h, n, err := m.read(room)
			if errors.Is(err, errPipeFull) {
				mu.Lock()
				for drains == seen && queued > 0 && !stopped {
					cond.Wait()
				}
				mu.Unlock()
				continue
			}
			if n > 0 {
				mu.Lock()
				queued += n
				mu.Unlock()
				q <- chunk{h: h, n: n, at: time.Now()}
			} else {
				m.release(h)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				return
			}
		}
	}()

	var werr error
	for c := range q {
		sent := 0
		if werr == nil {
			p.waitChunk(c.at)
			for sent < c.n && werr == nil {
				n := p.waitSlice(c.n - sent)
				var waited bool
				waited, werr = m.write(c.h, sent, n)
				if waited {
					p.heldBack()
				}
				sent += n
				mu.Lock()
				queued -= n
				drains++
				cond.Broadcast()
				mu.Unlock()
			}
			if werr != nil {
				closeSrc()
			}
		}
		m.release(c.h)
		mu.Lock()
		queued -= c.n - sent
		if werr != nil {
			stopped = true
		}
		cond.Broadcast()
		mu.Unlock()
	}
	if werr != nil {
		return werr
	}
	return readErr
}

// pacer holds a direction's chunks for their delay and paces its bytes as
// a link of the rate would carry them: each slice leaves once the link has
// carried the slices before it, counted from when the first of them was
// due (the link idles only while nothing is due). A writer that wakes late
// (this process short of CPU) sends what was due at once, as a link would
// have delivered it meanwhile, so the rate a client sees does not depend
// on how busy its own host is; the bytes sent never exceed the rate's
// share of the time since the link last idled. A write the client held
// back (heldBack) restarts the link's clock then, less shapeBurst: no
// catch-up for time the client's window was closed. Used by one
// goroutine.
type pacer struct {
	latency, jitter time.Duration
	rate            int64
	slice           int       // the most bytes sent in one write
	due, next       time.Time // due: the last chunk's send time; next: when the link has carried what was sent
	now             func() time.Time
	sleep           func(time.Duration)
}

func newPacer(latency, jitter time.Duration, rate int64) *pacer {
	slice := shapeChunk
	if rate > 0 {
		slice = max(16<<10, int(float64(rate)*shapeSlice.Seconds()))
	}
	return &pacer{latency: latency, jitter: jitter, rate: rate, slice: slice, now: time.Now, sleep: time.Sleep}
}

// waitChunk sleeps until a chunk that arrived at at may leave: latency
// (± jitter) after it arrived, and not before the chunk before it.
func (p *pacer) waitChunk(at time.Time) {
	d := p.latency
	if p.jitter > 0 {
		d += time.Duration(rand.Int64N(int64(2*p.jitter)+1)) - p.jitter
	}
	if t := at.Add(d); t.After(p.due) {
		p.due = t
	}
	if wait := p.due.Sub(p.now()); wait > 0 {
		p.sleep(wait)
	}
}

// waitSlice returns how many of left bytes of the current chunk to send
// next, after sleeping until the link has carried them.
func (p *pacer) waitSlice(left int) int {
	n := min(left, p.slice)
	if p.rate > 0 {
		if p.next.Before(p.due) {
			p.next = p.due // the link was idle until this chunk was due
		}
		p.next = p.next.Add(time.Duration(float64(n) / float64(p.rate) * float64(time.Second)))
		if wait := p.next.Sub(p.now()); wait > 0 {
			p.sleep(wait)
		}
	}
	return n
}

// heldBack restarts the link's clock after the client held a write back.
func (p *pacer) heldBack() {
	if floor := p.now().Add(-shapeBurst); p.next.Before(floor) {
		p.next = floor
	}
}

// bufferMover holds chunks in pooled buffers: a socket read in, a socket
// write out, two copies of every byte through this process.
type bufferMover struct{ dst, src *net.TCPConn }

func (m bufferMover) read(int) (held, int, error) {
	b := shapeBufs.Get().(*[]byte)
	n, err := m.src.Read(*b)
	return held{buf: b}, n, err
}

// write takes a write that lasted longer than shapeSlice as held back by
// the client: a write into a socket with room returns in microseconds.
func (m bufferMover) write(h held, off, n int) (bool, error) {
	start := time.Now()
	_, err := m.dst.Write((*h.buf)[off : off+n])
	return time.Since(start) > shapeSlice, err
}

func (m bufferMover) release(h held) {
	if h.buf != nil {
		shapeBufs.Put(h.buf)
	}
}
