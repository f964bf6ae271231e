package ops

import (
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/leakcheck"
)

// get returns the status and body of a GET of url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// metricsAt is the metrics server's configuration for addr and
// pprofAddr, with the daemon's limits.
func metricsAt(addr, pprofAddr string) metricsConfig {
	return metricsConfig{Addr: addr, PprofAddr: pprofAddr, Limits: MetricsLimits(), PprofLimits: PprofLimits()}
}

// TestMetricsPprofApart checks that --metrics-addr serves /stats and no
// profile, and that profiles are served only with --pprof-addr, on their
// own listener.
func TestMetricsPprofApart(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { leakcheck.Settle(t, before, 5*time.Second) })
	stats := func() map[string]int64 { return map[string]int64{"gets": 7} }
	log := slog.New(slog.DiscardHandler)
	profiles := []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=2", "/debug/pprof/profile?seconds=1"}

	t.Run("metrics only", func(t *testing.T) {
		m, err := serveMetrics(metricsAt("127.0.0.1:0", ""), stats, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if m.pprofAddr != "" {
			t.Errorf("profiles served at %s without --pprof-addr", m.pprofAddr)
		}
		if code, body := get(t, "http://"+m.metricsAddr+"/stats"); code != http.StatusOK || !strings.Contains(body, `"gets":7`) {
			t.Errorf("GET /stats = %d %q, want 200 with the counters", code, body)
		}
		for _, p := range profiles {
			if code, _ := get(t, "http://"+m.metricsAddr+p); code != http.StatusNotFound {
				t.Errorf("GET %s on --metrics-addr = %d, want 404", p, code)
			}
		}
	})

	t.Run("metrics and pprof", func(t *testing.T) {
		m, err := serveMetrics(metricsAt("127.0.0.1:0", "127.0.0.1:0"), stats, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if m.pprofAddr == "" || m.pprofAddr == m.metricsAddr {
			t.Fatalf("pprof at %q, metrics at %q: want a listener of its own", m.pprofAddr, m.metricsAddr)
		}
		if code, body := get(t, "http://"+m.pprofAddr+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
			t.Errorf("GET /debug/pprof/ on --pprof-addr = %d, want 200 with the index", code)
		}
		if code, body := get(t, "http://"+m.pprofAddr+"/debug/pprof/heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile") {
			t.Errorf("GET /debug/pprof/heap on --pprof-addr = %d, want 200 with a heap profile", code)
		}
		if code, _ := get(t, "http://"+m.pprofAddr+"/stats"); code != http.StatusNotFound {
			t.Errorf("GET /stats on --pprof-addr = %d, want 404", code)
		}
		for _, p := range profiles {
			if code, _ := get(t, "http://"+m.metricsAddr+p); code != http.StatusNotFound {
				t.Errorf("GET %s on --metrics-addr = %d, want 404", p, code)
			}
		}
	})

	t.Run("pprof only", func(t *testing.T) {
		m, err := serveMetrics(metricsAt("", "127.0.0.1:0"), stats, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if m.metricsAddr != "" {
			t.Errorf("metrics served at %s without --metrics-addr", m.metricsAddr)
		}
		if code, _ := get(t, "http://"+m.pprofAddr+"/debug/pprof/"); code != http.StatusOK {
			t.Errorf("GET /debug/pprof/ = %d, want 200", code)
		}
	})

	t.Run("pprof address taken", func(t *testing.T) {
		m, err := serveMetrics(metricsAt("127.0.0.1:0", "127.0.0.1:0"), stats, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		m2, err := serveMetrics(metricsAt("127.0.0.1:0", m.pprofAddr), stats, nil, log)
		if err == nil {
			m2.Close()
			t.Fatalf("a second server took --pprof-addr %s", m.pprofAddr)
		}
		if !strings.Contains(err.Error(), "--pprof-addr "+m.pprofAddr) {
			t.Errorf("err = %v, want it to name --pprof-addr", err)
		}
	})
}
