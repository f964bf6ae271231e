package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
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
	body := make([]byte, 4<<20)
	rand.NewChaCha8([32]byte{1}).Read(body)
	srv := shaperServer(t, body)
	before := runtime.NumGoroutine()

	p := Profile{Latency: 40 * time.Millisecond, Jitter: 10 * time.Millisecond, Rate: 16_000_000}
	sh, err := startShaper(srv.URL, p, true)
	if err != nil {
		t.Fatal(err)
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
	sh, err := startShaper(srv.URL, Profile{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	resp, err := http.Get(sh.Endpoint() + "/obj")
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
		if sh, err := startShaper(u, Profile{}, false); err == nil {
			sh.Close()
			t.Errorf("startShaper(%q): no error", u)
		}
	}
}
