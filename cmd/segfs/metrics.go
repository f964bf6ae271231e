package main

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

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/stats"
)

// metricsServer serves the mount's counters as one JSON object of
// integers at /stats and in the Prometheus text format, with
// histograms, at /metrics on --metrics-addr and, only with --pprof-addr, Go
// profiles at /debug/pprof/ on a listener of their own: a scraper let in
// to read counters must not also get heap dumps and on-demand CPU
// profiling.
type metricsServer struct {
	// Immutable after serveMetrics.
	servers     []*http.Server
	metricsAddr string // host:port of /stats, "" if not served
	pprofAddr   string // host:port of /debug/pprof/, "" if not served
	wg          sync.WaitGroup
}

// startMetrics serves the mount's counters on addr and its profiles on
// pprofAddr; either may be "" (not served).
func startMetrics(addr, pprofAddr string, store fetcher.Store, rd *reader.Reader, root *segfs.Root, sched *prefetch.Scheduler, pc *cache.Cache, log *slog.Logger) (*metricsServer, error) {
	prom := promHandler(promSources{
		counters:    func() []any { return counterStructs(store, rd, root, sched, pc) },
		histograms:  []any{store.Counters(), rd.Stats(), sched.Histograms()},
		passthrough: rd.Passthrough,
	})
	return serveMetrics(addr, pprofAddr, func() map[string]int64 {
		return statsSnapshot(store, rd, root, sched, pc)
	}, prom, log)
}

// serveMetrics serves stats() at http://addr/stats and the Go profiles at
// http://pprofAddr/debug/pprof/; an empty address serves nothing. Both
// listeners are open when it returns, or neither.
func serveMetrics(addr, pprofAddr string, stats func() map[string]int64, prom http.Handler, log *slog.Logger) (*metricsServer, error) {
	m := &metricsServer{}
	var lns []net.Listener
	var muxes []*http.ServeMux
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(stats())
		})
		if prom != nil {
			mux.Handle("GET /metrics", prom)
		}
		lns, muxes = append(lns, ln), append(muxes, mux)
		m.metricsAddr = ln.Addr().String()
	}
	if pprofAddr != "" {
		ln, err := net.Listen("tcp", pprofAddr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("--pprof-addr %s: %w", pprofAddr, err)
		}
		// Profiles of the running mount, for operators chasing CPU or
		// memory: the index serves the named profiles (heap, goroutine,
		// ...), /profile a CPU profile on demand.
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		lns, muxes = append(lns, ln), append(muxes, mux)
		m.pprofAddr = ln.Addr().String()
	}
	for i, ln := range lns {
		srv := &http.Server{Handler: muxes[i], ReadHeaderTimeout: 5 * time.Second}
		m.servers = append(m.servers, srv)
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
func (m *metricsServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, srv := range m.servers {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close() // a CPU profile still being taken
		}
	}
	m.wg.Wait()
}

// statsSnapshot collects every package's counters (each declared once,
// with its /stats name in a tag; package stats) and the process's.
func statsSnapshot(store fetcher.Store, rd *reader.Reader, root *segfs.Root, sched *prefetch.Scheduler, pc *cache.Cache) map[string]int64 {
	m := make(map[string]int64, 96)
	for _, v := range counterStructs(store, rd, root, sched, pc) {
		stats.Collect(m, v)
	}
	m["passthrough"] = b2i(rd.Passthrough())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m["goroutines"] = int64(runtime.NumGoroutine())
	m["heap_bytes"] = int64(ms.HeapAlloc)
	m["sys_bytes"] = int64(ms.Sys)
	return m
}

// counterStructs are the structs of counters of every package, as
// /stats and /metrics read them.
// root and pc may be nil (segfs restore has no tree, and maybe no
// cache): their counters are then left out.
func counterStructs(store fetcher.Store, rd *reader.Reader, root *segfs.Root, sched *prefetch.Scheduler, pc *cache.Cache) []any {
	out := []any{store.Counters(), rd.Stats(), sched.Stats()}
	if root != nil {
		out = append(out, root.Stats())
	}
	if pc != nil {
		out = append(out, pc.Stats())
	}
	return out
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
