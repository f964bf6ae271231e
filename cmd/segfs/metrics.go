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
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/prefetch"
)

// metricsServer serves the mount's counters as one JSON object of integers
// at /stats, and Go profiles at /debug/pprof/.
type metricsServer struct {
	srv  *http.Server
	done chan struct{}
}

func startMetrics(addr string, store fetcher.Store, reader *segfs.Reader, frames *segfs.FrameReader, sched *prefetch.Scheduler, pc *cache.Cache, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	// Profiles of the running mount, for operators chasing CPU or memory.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(statsSnapshot(store, reader, frames, sched, pc))
	})
	m := &metricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/stats")
	return m, nil
}

// Close stops the server and waits for it.
func (m *metricsServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
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
