package e2e

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowProxy forwards loopback TCP connections to an upstream address and
// caps the client-to-server rate of each connection, so that an upload
// through it takes long enough to be interrupted midway.
type slowProxy struct {
	ln       net.Listener
	upstream string
	rate     int // bytes per second per connection, client to server

	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn // guarded by mu
	closed bool       // guarded by mu
}

// startSlowProxy listens on a loopback port in front of upstream
// (http://host:port) and stops at the test's cleanup.
func startSlowProxy(t *testing.T, upstream string, rate int) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, upstream: strings.TrimPrefix(upstream, "http://"), rate: rate}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Endpoint is the proxy's base URL.
func (p *slowProxy) Endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *slowProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.throttledCopy(up, c)
			up.(*net.TCPConn).CloseWrite()
		}()
		go func() {
			defer p.wg.Done()
			io.Copy(c, up)
			c.(*net.TCPConn).CloseWrite()
		}()
	}
}

// throttledCopy copies src to dst in 16 KiB chunks, no faster than rate.
func (p *slowProxy) throttledCopy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 16<<10)
	start := time.Now()
	var sent int
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			sent += n
			if ahead := time.Duration(sent)*time.Second/time.Duration(p.rate) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
		if err != nil {
			return // EOF or a closed connection: both end the copy
		}
	}
}

// close stops accepting, closes every connection and waits for the
// copies to end.
func (p *slowProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
