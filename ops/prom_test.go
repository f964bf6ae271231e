package ops

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/stats"
)

// scrape returns the families /metrics serves for src.
func scrape(t *testing.T, src promSources) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	promHandler(src).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, rec.Body)
	}
	return fams
}

// Every value of the real counter structs is served under a name that
// follows Prometheus's conventions, once, with the type its kind says;
// every histogram family has help, buckets and the observations made.
func TestPromNames(t *testing.T) {
	var (
		fc    fetcher.Counters
		rs    reader.Stats
		es    segfs.Stats
		sched = prefetch.New(prefetch.Config{Workers: 2})
	)
	defer sched.Close()
	fc.Gets.Add(3)
	fc.GetTime.Observe(20 * time.Millisecond)
	rs.FetchNanos.Add(int64(1500 * time.Millisecond))
	rs.ReadLatency[reader.TierDisk].Observe(time.Millisecond)
	src := promSources{
		counters:    func() []any { return []any{&fc, &rs, &es, sched.Stats(), cache.Stats{Bytes: 42}} },
		histograms:  []any{&fc, &rs, sched.Histograms()},
		passthrough: func() bool { return false },
		build:       [2]string{"0.1.0+git1.abc", "abcdef"},
	}
	fams := scrape(t, src)
	m := map[string]int64{}
	for _, v := range src.counters() {
		stats.Collect(m, v)
	}
	for name := range m {
		found := false
		for fam := range fams {
			if strings.HasPrefix(fam, "segfs_"+strings.TrimSuffix(name, "_ns")) {
				found = true
			}
		}
		if !found {
			t.Errorf("/stats %s has no metric", name)
		}
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "segfs_") {
			continue // the Go runtime's and the process's
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			if !strings.HasSuffix(name, "_total") {
				t.Errorf("counter %s does not end in _total", name)
			}
		case dto.MetricType_GAUGE:
			if strings.HasSuffix(name, "_total") || strings.HasSuffix(name, "_ns") {
				t.Errorf("gauge %s is named like a counter or in nanoseconds", name)
			}
		case dto.MetricType_HISTOGRAM:
			if f.GetHelp() == "" || !strings.HasSuffix(name, "_seconds") {
				t.Errorf("histogram %s: help %q; want help and a _seconds name", name, f.GetHelp())
			}
		}
	}
	want := map[string]float64{"segfs_gets_total": 3, "segfs_fetch_seconds_total": 1.5, "segfs_cache_bytes": 42}
	for name, v := range want {
		f := fams[name]
		if f == nil || len(f.Metric) != 1 {
			t.Fatalf("%s missing: %v", name, f)
		}
		got := f.Metric[0].GetCounter().GetValue() + f.Metric[0].GetGauge().GetValue()
		if got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	if fams["segfs_cache_bytes"].GetType() != dto.MetricType_GAUGE {
		t.Error("segfs_cache_bytes is not a gauge")
	}
	reads := fams["segfs_read_seconds"]
	if reads == nil || len(reads.Metric) != 4 {
		t.Fatalf("segfs_read_seconds: %v, want one series per tier", reads)
	}
	for _, s := range reads.Metric {
		tier := s.Label[0].GetValue()
		n := s.GetHistogram().GetSampleCount()
		if (tier == "disk") != (n == 1) {
			t.Errorf("read_seconds{tier=%s} has %d observations", tier, n)
		}
	}
	if h := fams["segfs_get_seconds"].Metric[0].GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 0.02 {
		t.Errorf("segfs_get_seconds: count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	if q := fams["segfs_fetch_queue_wait_seconds"]; q == nil || len(q.Metric) != 3 {
		t.Errorf("segfs_fetch_queue_wait_seconds: %v, want one series per priority", q)
	}
	if fams["segfs_build_info"] == nil || fams["go_goroutines"] == nil {
		t.Fatal("build info or Go runtime metrics missing")
	}
	labels := map[string]string{}
	for _, l := range fams["segfs_build_info"].Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != "0.1.0+git1.abc" || labels["revision"] != "abcdef" {
		t.Errorf("segfs_build_info labels %v, want the version alone and the revision", labels)
	}
}
