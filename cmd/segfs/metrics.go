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
)

// metricsServer serves the mount's counters as one JSON object of
// integers at /stats on --metrics-addr and, only with --pprof-addr, Go
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
func startMetrics(addr, pprofAddr string, store fetcher.Store, reader *segfs.Reader, frames *segfs.FrameReader, sched *prefetch.Scheduler, pc *cache.Cache, log *slog.Logger) (*metricsServer, error) {
	return serveMetrics(addr, pprofAddr, func() map[string]int64 {
		return statsSnapshot(store, reader, frames, sched, pc)
	}, log)
}

// serveMetrics serves stats() at http://addr/stats and the Go profiles at
// http://pprofAddr/debug/pprof/; an empty address serves nothing. Both
// listeners are open when it returns, or neither.
func serveMetrics(addr, pprofAddr string, stats func() map[string]int64, log *slog.Logger) (*metricsServer, error) {
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
		log.Info("serving metrics", "url", "http://"+m.metricsAddr+"/stats")
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

func statsSnapshot(store fetcher.Store, reader *segfs.Reader, frames *segfs.FrameReader, sched *prefetch.Scheduler, pc *cache.Cache) map[string]int64 {
	c := store.Counters()
	rs := reader.Stats()
	fs := frames.Stats()
	ss := sched.Stats()
	cs := pc.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	loaded := int64(0)
	if cs.IndexLoaded {
		loaded = 1
	}
	return map[string]int64{
		// Remote requests.
		"gets":        c.Gets.Load(),
		"get_bytes":   c.GetBytes.Load(),
		"retries":     c.Retries.Load(),
		"lists":       c.Lists.Load(),
		"changed":     c.Changed.Load(),
		"read_errors": c.ReadErrors.Load(),
		// Reads through the mount.
		"reads":              rs.Reads,
		"read_bytes":         rs.ReadBytes,
		"memory_hits":        rs.MemoryHits,
		"held_hits":          rs.HeldHits,
		"fill_paused":        rs.FillPaused,
		"idle_streams":       rs.IdleStreams,
		"fills_abandoned":    rs.FillsAbandoned,
		"page_cache_drops":   rs.PageDrops,
		"open_handles":       rs.OpenHandles,
		"held_bytes":         rs.HeldBytes,
		"disk_hits":          rs.DiskHits,
		"joins":              rs.Joins,
		"range_reads":        rs.RangeReads,
		"parts_fetched":      rs.PartsFetched,
		"parts_split":        rs.PartsSplit,
		"split_gets":         rs.SplitGets,
		"fetched_bytes":      rs.FetchedBytes,
		"fetch_errors":       rs.FetchErrors,
		"no_space":           rs.NoSpace,
		"started_demand":     rs.StartedDemand,
		"started_readahead":  rs.StartedAhead,
		"started_background": rs.StartedBack,
		"memory_part_bytes":  rs.MemoryBytes,
		"fetch_ns":           rs.FetchNanos,
		"cache_put_ns":       rs.PutNanos,
		"inflight_parts":     rs.InflightParts,
		// Seekable zstd frames: decoded, served from memory, and the wall
		// time spent decoding (summed over concurrent decodes).
		"frame_decodes":       fs.Decodes,
		"frame_decoded_bytes": fs.DecodedBytes,
		"frame_decode_ns":     int64(fs.DecodeTime),
		"frame_hits":          fs.Hits,
		"frame_shared":        fs.Shared,
		"frame_rejected":      fs.Rejected,
		"decode_waits":        fs.DecodeWaits,
		"decode_memory_bytes": fs.DecodeMemory,
		"decode_memory_peak":  fs.DecodeMemoryPeak,
		// The fetch pool.
		"workers":            int64(ss.Workers),
		"queued_demand":      int64(ss.Queued[prefetch.Demand]),
		"queued_readahead":   int64(ss.Queued[prefetch.Readahead]),
		"queued_background":  int64(ss.Queued[prefetch.Background]),
		"running_demand":     int64(ss.Running[prefetch.Demand]),
		"running_readahead":  int64(ss.Running[prefetch.Readahead]),
		"running_background": int64(ss.Running[prefetch.Background]),
		"raised":             ss.Raised,
		// The disk cache.
		"cache_hits":              cs.Hits,
		"cache_misses":            cs.Misses,
		"cache_puts":              cs.Puts,
		"cache_put_errors":        cs.PutErrors,
		"cache_evictions":         cs.Evictions,
		"cache_corrupt_removed":   cs.CorruptRemoved,
		"cache_bad_files_removed": cs.BadFilesRemoved,
		"cache_no_space":          cs.NoSpace,
		"cache_bytes":             cs.Bytes,
		"cache_direct_bytes":      cs.DirectBytes,
		"cache_direct_read_bytes": cs.DirectReadBytes,
		"cache_parts":             cs.Parts,
		"cache_index_loaded":      loaded,
		"cache_index_load_ns":     int64(cs.IndexLoadTime),
		// Whole-object files and passthrough opens (--passthrough).
		"passthrough":       b2i(reader.Passthrough()),
		"passthrough_opens": rs.PassthroughOpens,
		"promote_pending":   rs.PromotePending,
		"whole_objects":     cs.WholeObjects,
		"promotions":        cs.Promotions,
		"promoted_bytes":    cs.PromotedBytes,
		"promote_errors":    cs.PromoteErrors,
		"bad_whole_objects": cs.BadObjects,
		// The process.
		"goroutines": int64(runtime.NumGoroutine()),
		"heap_bytes": int64(ms.HeapAlloc),
		"sys_bytes":  int64(ms.Sys),
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
