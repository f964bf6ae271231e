package shaper

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/leakcheck"
)

// The shaper's bounds are checked from below only: a proxy may be late on
// a busy machine, but it must never deliver a byte before its delay is up
// or move bytes faster than the rate, whatever the machine does.

func shaperServer(t *testing.T, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			h := sha256.New()
			n, err := io.Copy(h, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestShaperDelaysAndCaps(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		name := map[bool]string{false: "splice", true: "buffer"}[buffered]
		t.Run(name, func(t *testing.T) { testShaperDelaysAndCaps(t, buffered) })
	}
}

func testShaperDelaysAndCaps(t *testing.T, buffered bool) {
	body := make([]byte, 4<<20)
	rand.NewChaCha8([32]byte{1}).Read(body)
	srv := shaperServer(t, body)
	before := runtime.NumGoroutine()

	p := Profile{Latency: 40 * time.Millisecond, Jitter: 10 * time.Millisecond, Rate: 16_000_000}
	sh, err := Start(srv.URL, p, Options{Upload: true, Buffered: buffered})
	if err != nil {
		t.Fatal(err)
	}
	if !buffered && sh.pipeSize == 0 {
		sh.Close()
		if os.Geteuid() == 0 {
			t.Fatalf("the shaper is not spliced as root: %s", sh.Copying())
		}
		t.Skipf("pipes of %d MiB take root: %s", shapeQueued>>20, sh.Copying())
	}
	client := &http.Client{Transport: &http.Transport{}}

	// Several GETs on one kept-alive connection, then a few at once.
	for i := range 3 {
		start := time.Now()
		resp, err := client.Get(sh.Endpoint() + "/obj")
		if err != nil {
			t.Fatalf("GET %d: %v", i, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("GET %d: %d bytes, err %v; want the %d bytes served", i, len(got), err, len(body))
		}
		// Latency and rate add up on one connection: the body cannot
		// arrive before the first byte's delay plus its time at the rate,
		// less the pacing's burst allowance.
		least := p.Latency - p.Jitter + time.Duration(float64(len(body))/float64(p.Rate)*float64(time.Second)) - shapeBurst
		if took < least {
			t.Errorf("GET %d took %v: faster than the profile allows (%v)", i, took, least)
		}
	}

	// An upload is capped at the rate too.
	up := body[:2<<20]
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPut, sh.Endpoint()+"/obj", bytes.NewReader(up))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("PUT: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if want := fmt.Sprintf("%d %x", len(up), sha256.Sum256(up)); string(got) != want {
		t.Fatalf("PUT: server saw %q, want %q", got, want)
	}
	if least := time.Duration(float64(len(up))/float64(p.Rate)*float64(time.Second)) - shapeBurst; took < least {
		t.Errorf("PUT took %v: faster than the rate allows (%v)", took, least)
	}

	// The cap is per connection: four at once each get the whole body.
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			resp, err := (&http.Client{Transport: &http.Transport{}}).Get(sh.Endpoint() + "/obj")
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err == nil && !bytes.Equal(got, body) {
				err = fmt.Errorf("%d bytes differ from the %d served", len(got), len(body))
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("parallel GET: %v", err)
		}
	}

	// Close ends every connection and goroutine of the proxy, idle
	// kept-alive connections included.
	if err := sh.Close(); err != nil {
		t.Fatal(err)
	}
	client.CloseIdleConnections()
	srv.CloseClientConnections()
	leakcheck.Settle(t, before, 10*time.Second)
}

func TestShaperWithoutShapeIsAPlainProxy(t *testing.T) {
	body := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{2}).Read(body)
	srv := shaperServer(t, body)
	sh, err := Start(srv.URL, Profile{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	getThrough(t, http.DefaultClient, sh, body)
}

// getThrough GETs the server's object through sh and checks its bytes.
func getThrough(t *testing.T, client *http.Client, sh *Shaper, body []byte) {
	t.Helper()
	resp, err := client.Get(sh.Endpoint() + "/obj")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("%d bytes, err %v; want the %d bytes served", len(got), err, len(body))
	}
}

func TestShaperRejectsUpstream(t *testing.T) {
	for _, u := range []string{"https://127.0.0.1:9000", "http://example.com:80", "::"} {
		if sh, err := Start(u, Profile{}, Options{}); err == nil {
			sh.Close()
			t.Errorf("Start(%q): no error", u)
		}
	}
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// With pipes far smaller than the bytes in flight, the spliced reader
// fills one pipe after another, waits when all are full, and every byte
// still arrives once and in order.
func TestSplicedShaperWithFullPipes(t *testing.T) {
	if _, err := probePipeSize(); err != nil {
		t.Skip(err)
	}
	body := make([]byte, 4<<20)
	rand.NewChaCha8([32]byte{2}).Read(body)
	inW, inR := tcpPair(t)   // the source: written here, read by the mover
	outW, outR := tcpPair(t) // the destination: written by the mover, read here
	m, err := newSpliceMover(outW, inR, os.Getpagesize(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()

	go func() {
		inW.Write(body)
		inW.CloseWrite()
	}()
	done := make(chan error, 1)
	go func() {
		err := shapeWith(m, func() { inR.Close() }, newPacer(time.Millisecond, 0, 0))
		if err == nil {
			err = outW.CloseWrite()
		}
		done <- err
	}()
	got, err := io.ReadAll(outR)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("got %d bytes, not the %d sent in order", len(got), len(body))
	}
	if m.fulls == 0 {
		t.Errorf("no read found both pipes full: the test did not reach the wait it is for")
	}
}

// fakeClock drives a pacer: sleep advances the time by what was asked
// plus late, once, as a writer that wakes late on a busy host.
type fakeClock struct {
	t    time.Time
	late time.Duration
}

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) sleep(d time.Duration) {
	c.t = c.t.Add(d + c.late)
	c.late = 0
}

func fakePacer(rate int64) (*pacer, *fakeClock) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	p := newPacer(0, 0, rate)
	p.now, p.sleep = c.now, c.sleep
	return p, c
}

// The pacer is a link of the rate: never ahead of it, a late wake-up
// caught up (the link would have carried the bytes meanwhile), no
// catch-up for time the client held a write back or the link idled.
func TestPacerIsALinkOfTheRate(t *testing.T) {
	const rate = 1_000_000 // slices of 16 KiB, 16.384 ms each
	at := func(bytes int) time.Duration { return time.Duration(float64(bytes) / rate * float64(time.Second)) }

	p, c := fakePacer(rate)
	start := c.t
	p.waitChunk(start)
	c.late = 100 * time.Millisecond // the first sleep wakes 100 ms late
	sent := 0
	for sent < 1<<20 {
		n := p.waitSlice(1<<20 - sent)
		sent += n
		if ahead := at(sent) - c.t.Sub(start); ahead > 0 {
			t.Fatalf("%d bytes sent %v after the chunk was due: %v ahead of the rate", sent, c.t.Sub(start), ahead)
		}
	}
	if took, want := c.t.Sub(start), at(sent); took > want+at(p.slice) {
		t.Errorf("1 MiB took %v after a 100 ms late wake-up, want about %v: the lost time was not caught up", took, want)
	}

	// The client held a write back for 50 ms: no catch-up for that.
	c.t = c.t.Add(50 * time.Millisecond)
	p.heldBack()
	before := c.t
	p.waitChunk(start) // due long ago: the link is busy
	p.waitSlice(p.slice)
	if got, least := c.t.Sub(before), at(p.slice)-shapeBurst; got < least {
		t.Errorf("a slice after the client held the link back left after %v, want at least %v", got, least)
	}

	// A chunk due after the link idled starts the link's clock at its due time.
	c.t = c.t.Add(time.Second)
	idle := c.t
	p.waitChunk(idle)
	p.waitSlice(p.slice)
	if got := c.t.Sub(idle); got < at(p.slice) {
		t.Errorf("the first slice after idle time left after %v, want at least %v (no burst)", got, at(p.slice))
	}
}

// A connection whose pipes cannot be made (an unprivileged user past its
// pipe quota) is still served, from buffers, and counted.
func TestShaperFallsBackToBuffers(t *testing.T) {
	body := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{3}).Read(body)
	srv := shaperServer(t, body)
	// Larger than any pipe: F_SETPIPE_SZ fails.
	sh, err := Start(srv.URL, Profile{Latency: time.Millisecond, Rate: 64_000_000}, Options{pipeSize: 1<<31 + 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	getThrough(t, client, sh, body)
	if n := sh.fallbacks.Load(); n == 0 {
		t.Errorf("no direction counted as falling back to buffers")
	}
}
