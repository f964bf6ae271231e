package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
)

// metricsServer serves the mount's counters as one JSON object of integers
// at /stats.
type metricsServer struct {
	srv  *http.Server
	done chan struct{}
}

func startMetrics(addr string, store fetcher.Store, reader *segfs.Reader, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(statsSnapshot(store, reader))
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

func statsSnapshot(store fetcher.Store, reader *segfs.Reader) map[string]int64 {
	c := store.Counters()
	rs := reader.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return map[string]int64{
		"gets":              c.Gets.Load(),
		"get_bytes":         c.GetBytes.Load(),
		"retries":           c.Retries.Load(),
		"lists":             c.Lists.Load(),
		"changed":           c.Changed.Load(),
		"read_errors":       c.ReadErrors.Load(),
		"reads":             rs.Reads,
		"read_bytes":        rs.ReadBytes,
		"part_hits":         rs.PartHits,
		"part_joins":        rs.PartJoins,
		"parts_fetched":     rs.PartsFetched,
		"part_fetch_errors": rs.PartFetchErrors,
		"memory_part_bytes": rs.MemoryBytes,
		"goroutines":        int64(runtime.NumGoroutine()),
		"heap_bytes":        int64(ms.HeapAlloc),
		"sys_bytes":         int64(ms.Sys),
	}
}
