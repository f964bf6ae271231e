package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync"
	"time"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/stats"
)

// Metrics serves the mount's counters as one JSON object of
// integers at /stats and in the Prometheus text format, with
// histograms, at /metrics on --metrics-addr and, only with --pprof-addr, Go
// profiles at /debug/pprof/ on a listener of their own: a scraper let in
// to read counters must not also get heap dumps and on-demand CPU
// profiling. Each listener is held to its Limits (listen.go), so a
// flood of one leaves the other, and the mount, untouched.
type Metrics struct {
	// Immutable after serveMetrics.
	servers     []*http.Server
	metricsAddr string // host:port of /stats, "" if not served
	pprofAddr   string // host:port of /debug/pprof/, "" if not served
	wg          sync.WaitGroup
}

// StartMetrics serves the counters of d on addr and its profiles on
// pprofAddr; either may be "" (not served).
func StartMetrics(addr, pprofAddr string, d Daemon, log *slog.Logger) (*Metrics, error) {
	src := promSources{
		counters:    d.counterStructs,
		histograms:  []any{d.Store.Counters(), d.Reader.Stats(), d.Sched.Histograms()},
		passthrough: d.Reader.Passthrough,
		build:       [2]string{d.BuildVersion, d.Revision},
	}
	if d.Root != nil {
		src.shards = d.Root.DirReads
	}
	cfg := metricsConfig{Addr: addr, PprofAddr: pprofAddr, Limits: MetricsLimits(), PprofLimits: PprofLimits()}
	return serveMetrics(cfg, d.stats, promHandler(src), log)
}

// metricsConfig says where the metrics server listens, and the limits of
// each listener.
type metricsConfig struct {
	Addr        string // host:port of /stats and /metrics; "" serves neither
	PprofAddr   string // host:port of /debug/pprof/; "" serves no profile
	Limits      Limits
	PprofLimits Limits
}

// serveMetrics serves stats() at http://cfg.Addr/stats and the Go
// profiles at http://cfg.PprofAddr/debug/pprof/, each listener held to
// its limits. Both listeners are open when it returns, or neither.
func serveMetrics(cfg metricsConfig, stats func() map[string]int64, prom http.Handler, log *slog.Logger) (*Metrics, error) {
	m := &Metrics{}
	type listener struct {
		ln  net.Listener
		mux *http.ServeMux
		lim Limits
	}
	var lns []listener
	if cfg.Addr != "" {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("--metrics-addr %s: %w", cfg.Addr, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(stats())
		})
		if prom != nil {
			mux.Handle("GET /metrics", prom)
		}
		lns = append(lns, listener{ln, mux, cfg.Limits})
		m.metricsAddr = ln.Addr().String()
	}
	if cfg.PprofAddr != "" {
		ln, err := net.Listen("tcp", cfg.PprofAddr)
		if err != nil {
			for _, l := range lns {
				_ = l.ln.Close()
			}
			return nil, fmt.Errorf("--pprof-addr %s: %w", cfg.PprofAddr, err)
		}
		// Profiles of the running mount, for operators chasing CPU or
		// memory: the index serves the named profiles (heap, goroutine,
		// ...), /profile a CPU profile on demand, /trace an execution
		// trace (where each goroutine waited, for the FUSE round trips).
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		lns = append(lns, listener{ln, mux, cfg.PprofLimits})
		m.pprofAddr = ln.Addr().String()
	}
	for _, l := range lns {
		srv := l.lim.Server(l.mux)
		m.servers = append(m.servers, srv)
		ln := l.lim.Listener(l.ln)
		m.wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server stopped", "addr", ln.Addr().String(), "err", err)
			}
		})
	}
	if m.metricsAddr != "" {
		log.Info("serving metrics", "stats", "http://"+m.metricsAddr+"/stats", "prometheus", "http://"+m.metricsAddr+"/metrics")
	}
	if m.pprofAddr != "" {
		log.Info("serving profiles", "url", "http://"+m.pprofAddr+"/debug/pprof/")
	}
	return m, nil
}

// Close stops the servers and waits for them.
func (m *Metrics) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, srv := range m.servers {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close() // a CPU profile still being taken
		}
	}
	m.wg.Wait()
}

// stats collects every package's counters (each declared once, with
// its /stats name in a tag; package stats) and the process's.
func (d Daemon) stats() map[string]int64 {
	m := make(map[string]int64, 96)
	for _, v := range d.counterStructs() {
		stats.Collect(m, v)
	}
	m["passthrough"] = b2i(d.Reader.Passthrough())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m["goroutines"] = int64(runtime.NumGoroutine())
	m["heap_bytes"] = int64(ms.HeapAlloc)
	m["sys_bytes"] = int64(ms.Sys)
	return m
}

// counterStructs are the structs of counters of every package, as
// /stats and /metrics read them. The tree and the cache may be nil
// (segfs restore has no tree, and maybe no cache): their counters are
// then left out.
func (d Daemon) counterStructs() []any {
	out := []any{d.Store.Counters(), d.Reader.Stats(), d.Sched.Stats()}
	if d.Root != nil {
		out = append(out, d.Root.Stats())
	}
	if d.Disk != nil {
		out = append(out, d.Disk.Stats())
	}
	return out
}

// entries are the files of the tree; none without one.
func (d Daemon) entries() []entry.Entry {
	if d.Root == nil {
		return nil
	}
	return d.Root.Entries()
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
