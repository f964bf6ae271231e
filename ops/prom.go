package ops

import (
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/stats"
)

// promSources are what /metrics reads at each scrape: the structs of
// counters that /stats serves (stats.Each), read afresh each time, and
// the structs holding live histograms (stats.Histograms).
type promSources struct {
	counters    func() []any
	histograms  []any
	passthrough func() bool
	// shards are a repository mount's read counters of each shard it
	// shows (at most --max-shards); nil for another mount.
	shards func() map[string]*segfs.DirCounters
	// build is segfs's version and VCS revision (segfs_build_info).
	build [2]string
}

// histogramHelp describes each histogram family; a family missing here
// is a programming error caught by TestPromNames.
var histogramHelp = map[string]string{
	"get_first_byte_seconds":   "Time from sending a ranged GET to its first body byte, per attempt.",
	"get_seconds":              "Time from sending a ranged GET to its last body byte, per attempt.",
	"read_seconds":             "Time segfs took to serve a read of a file, by the slowest tier its bytes came from.",
	"fetch_queue_wait_seconds": "Time a fetch waited in the fetch pool's queue, by the priority it ran at.",
}

// promRenames gives a few /stats names the unit suffix Prometheus names
// carry; the rest follow the rules of promName alone.
var promRenames = map[string]string{
	"decode_memory_peak": "decode_memory_peak_bytes",
}

// promName is the Prometheus name of a /stats value: segfs_ before it,
// nanoseconds as seconds, and _total after a counter.
func promName(c stats.Counter) string {
	name := c.Name
	if r, ok := promRenames[name]; ok {
		name = r
	}
	if c.Nanos {
		name = strings.TrimSuffix(name, "_ns") + "_seconds"
	}
	if c.Kind == stats.CounterKind && !strings.HasSuffix(name, "_total") {
		name += "_total"
	}
	return "segfs_" + name
}

// promCollector turns the sources into Prometheus metrics at each
// scrape. It is unchecked (Describe sends nothing): the set of metrics
// is fixed by the structs' tags, and TestPromNames checks it.
type promCollector struct{ src promSources }

func (promCollector) Describe(chan<- *prometheus.Desc) {}

func (p promCollector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range p.src.counters() {
		stats.Each(v, func(c stats.Counter) {
			typ := prometheus.CounterValue
			if c.Kind == stats.GaugeKind {
				typ = prometheus.GaugeValue
			}
			val := float64(c.Value)
			if c.Nanos {
				val /= float64(time.Second)
			}
			desc := prometheus.NewDesc(promName(c), "segfs "+c.Name+" (as in /stats).", nil, nil)
			ch <- prometheus.MustNewConstMetric(desc, typ, val)
		})
	}
	if p.src.passthrough != nil {
		ch <- prometheus.MustNewConstMetric(
			prometheus.NewDesc("segfs_passthrough", "1 while opens of fully cached files are handed to the kernel (--passthrough).", nil, nil),
			prometheus.GaugeValue, b2f(p.src.passthrough()))
	}
	if p.src.shards != nil {
		for dir, c := range p.src.shards() {
			// A label must be UTF-8; a local directory's name may not be.
			shard := strings.ToValidUTF8(strings.TrimSuffix(dir, "/"), "\uFFFD")
			for _, m := range []struct {
				name, help string
				v          int64
			}{
				{"segfs_shard_reads_total", "Reads of the files of one shard of a repository mount.", c.Reads.Load()},
				{"segfs_shard_read_bytes_total", "Bytes read from the files of one shard of a repository mount.", c.ReadBytes.Load()},
				{"segfs_shard_read_errors_total", "Reads of one shard of a repository mount that failed.", c.ReadErrors.Load()},
			} {
				ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(m.name, m.help, []string{"shard"}, nil), prometheus.CounterValue, float64(m.v), shard)
			}
		}
	}
	bounds := make([]float64, len(stats.Bounds))
	for i, b := range stats.Bounds {
		bounds[i] = b.Seconds()
	}
	for _, v := range p.src.histograms {
		stats.Histograms(v, func(name, label, value string, h *stats.Histogram) {
			var labels []string
			var values []string
			if label != "" {
				labels, values = []string{label}, []string{value}
			}
			s := h.Snapshot()
			buckets := make(map[float64]uint64, len(bounds))
			for i, b := range bounds {
				buckets[b] = s.Cumulative[i]
			}
			desc := prometheus.NewDesc("segfs_"+name, histogramHelp[name], labels, nil)
			ch <- prometheus.MustNewConstHistogram(desc, s.Count, s.Sum.Seconds(), buckets, values...)
		})
	}
}

// promHandler serves the sources, segfs's build and the Go runtime's
// and process's standard metrics in the Prometheus text format.
func promHandler(src promSources) http.Handler {
	reg := prometheus.NewRegistry()
	buildGauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "segfs_build_info",
		Help:        "segfs's version, VCS commit and Go version; always 1.",
		ConstLabels: prometheus.Labels{"version": src.build[0], "revision": src.build[1], "goversion": runtime.Version()},
	})
	buildGauge.Set(1)
	reg.MustRegister(promCollector{src}, buildGauge,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
