package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/segfs/segfs/tests/harness"
)

// segfsCmd runs the segfs binary with args and returns its stdout,
// stderr and exit code, within the hang guard.
func segfsCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, needSegfs(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("segfs %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String(), code
}

// fileStatusOf is one file of `segfs status --json`.
type fileStatusOf struct {
	Name     string  `json:"name"`
	Size     int64   `json:"size"`
	Cached   int64   `json:"cached"`
	Fraction float64 `json:"fraction"`
}

type statusOf struct {
	Source        string           `json:"source"`
	Mountpoint    string           `json:"mountpoint"`
	PID           int              `json:"pid"`
	CacheMaxBytes int64            `json:"cache_max_bytes"`
	CacheBytes    int64            `json:"cache_bytes"`
	FileCount     int              `json:"file_count"`
	Files         []fileStatusOf   `json:"files"`
	Counters      map[string]int64 `json:"counters"`
}

func status(t *testing.T, m *harness.Mount) statusOf {
	t.Helper()
	out, errs, code := segfsCmd(t, "status", "--json", "--all", m.Dir)
	if code != 0 {
		t.Fatalf("segfs status: exit %d: %s", code, errs)
	}
	var s statusOf
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("segfs status --json: %v\n%s", err, out)
	}
	return s
}

func fraction(t *testing.T, s statusOf, name string) float64 {
	t.Helper()
	for _, f := range s.Files {
		if f.Name == name {
			return f.Fraction
		}
	}
	t.Fatalf("status lists no %s: %+v", name, s.Files)
	return 0
}

// /metrics is Prometheus text that the Prometheus parser reads; after a
// known workload its counters equal /stats's, and the GET, read and
// queue histograms have observations.
func TestMetricsPrometheus(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := map[string][]byte{"a": randomBytes(1, 3<<20), "b": randomBytes(2, 100<<10)}
	putObjects(t, srv, bucket, objs)
	m := mountCached(t, srv, bucket, filepath.Join(t.TempDir(), "cache"), "--prefetch", "none", "--part-size", "1MiB")
	checkObjects(t, m.Dir, objs)
	stats := harness.WaitIdle(t, m)

	body := metricsText(t, m)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	value := func(name string) float64 {
		f := fams[name]
		if f == nil || len(f.Metric) != 1 {
			t.Fatalf("%s: %v", name, f)
		}
		return f.Metric[0].GetCounter().GetValue() + f.Metric[0].GetGauge().GetValue()
	}
	for prom, js := range map[string]string{
		"segfs_gets_total": "gets", "segfs_get_bytes_total": "get_bytes", "segfs_reads_total": "reads",
		"segfs_read_bytes_total": "read_bytes", "segfs_parts_fetched_total": "parts_fetched",
		"segfs_cache_parts": "cache_parts", "segfs_cache_bytes": "cache_bytes", "segfs_cache_max_bytes": "cache_max_bytes",
	} {
		if got, want := value(prom), float64(stats[js]); got != want {
			t.Errorf("%s = %v, /stats %s = %v", prom, got, js, want)
		}
	}
	if stats["gets"] == 0 || stats["reads"] == 0 {
		t.Fatalf("the workload made no GET or read: %v", stats)
	}
	count := func(name string) (n uint64) {
		f := fams[name]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			t.Fatalf("%s is not a histogram: %v", name, f)
		}
		for _, s := range f.Metric {
			n += s.GetHistogram().GetSampleCount()
		}
		return n
	}
	if n := count("segfs_get_seconds"); n < uint64(stats["gets"]) {
		t.Errorf("segfs_get_seconds has %d observations for %d GETs", n, stats["gets"])
	}
	if n := count("segfs_get_first_byte_seconds"); n == 0 {
		t.Error("segfs_get_first_byte_seconds has no observation")
	}
	if n := count("segfs_read_seconds"); n == 0 {
		t.Error("segfs_read_seconds has no observation")
	}
	if n := count("segfs_fetch_queue_wait_seconds"); n == 0 {
		t.Error("segfs_fetch_queue_wait_seconds has no observation")
	}
}

// status reports a file 0% cached before a read of it and 100% after;
// warm of a directory caches every file in it, so that reading them
// takes no GET; a warm whose object is gone exits 1 naming it.
func TestStatusAndWarm(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	objs := map[string][]byte{
		"idx/a":   randomBytes(1, 5<<20+17),
		"idx/b":   randomBytes(2, 300<<10),
		"other/c": randomBytes(3, 2<<20),
		"other/d": randomBytes(4, 1<<20),
	}
	putObjects(t, srv, bucket, objs)
	m := mountCached(t, srv, bucket, filepath.Join(t.TempDir(), "cache"), "--prefetch", "none", "--part-size", "1MiB")

	s := status(t, m)
	if s.FileCount != 4 || s.Source == "" || s.PID != m.Pid() || s.CacheMaxBytes <= 0 {
		t.Errorf("status: %+v", s)
	}
	if f := fraction(t, s, "idx/a"); f != 0 {
		t.Errorf("idx/a %.2f cached before any read", f)
	}
	if s.Files[0].Name != "idx/a" {
		t.Errorf("status lists %s first, not the largest file", s.Files[0].Name)
	}
	got, err := os.ReadFile(filepath.Join(m.Dir, "idx/a"))
	if err != nil || !bytes.Equal(got, objs["idx/a"]) {
		t.Fatalf("read idx/a: %v", err)
	}
	harness.WaitIdle(t, m)
	s = status(t, m)
	if f := fraction(t, s, "idx/a"); f != 1 {
		t.Errorf("idx/a %.2f cached after a read of it", f)
	}
	if f := fraction(t, s, "other/c"); f != 0 {
		t.Errorf("other/c %.2f cached before any read", f)
	}
	text, _, code := segfsCmd(t, "status", m.Dir)
	if code != 0 || !strings.Contains(text, "idx/a") || !strings.Contains(text, "100.0%") {
		t.Errorf("segfs status: exit %d\n%s", code, text)
	}

	out, errs, code := segfsCmd(t, "warm", m.Dir, filepath.Join(m.Dir, "other"))
	if code != 0 {
		t.Fatalf("segfs warm other: exit %d\n%s%s", code, out, errs)
	}
	for _, name := range []string{"other/c", "other/d"} {
		if !strings.Contains(out, "cached "+name) {
			t.Errorf("warm printed no line for %s:\n%s", name, out)
		}
	}
	s = status(t, m)
	for _, name := range []string{"other/c", "other/d"} {
		if f := fraction(t, s, name); f != 1 {
			t.Errorf("%s %.2f cached after warm", name, f)
		}
	}
	if f := fraction(t, s, "idx/b"); f != 0 {
		t.Errorf("idx/b, not asked for, is %.2f cached", f)
	}
	before := harness.MustStats(t, m)
	checkObjects(t, filepath.Join(m.Dir), map[string][]byte{"other/c": objs["other/c"], "other/d": objs["other/d"]})
	after := harness.WaitIdle(t, m)
	if n := after["gets"] - before["gets"]; n != 0 {
		t.Errorf("reading the warmed files took %d GETs", n)
	}

	// An object deleted since the mount listed it fails the warm.
	if err := srv.Delete(context.Background(), bucket, "idx/b"); err != nil {
		t.Fatal(err)
	}
	out, errs, code = segfsCmd(t, "warm", m.Dir)
	if code != 1 || !strings.Contains(errs, "idx/b") {
		t.Errorf("warm with a missing object: exit %d, want 1 naming idx/b\n%s%s", code, out, errs)
	}
	if _, errs, code := segfsCmd(t, "warm", m.Dir, "no/such"); code != 2 || !strings.Contains(errs, "no/such") {
		t.Errorf("warm of a path not in the mount: exit %d, want 2 naming it: %s", code, errs)
	}
	dir := t.TempDir()
	if _, errs, code := segfsCmd(t, "status", dir); code == 0 || !strings.Contains(errs, "no segfs serves") {
		t.Errorf("status of a directory no segfs serves: exit %d: %s", code, errs)
	}
}

// --background-bandwidth holds a warm to the cap, while a read beside
// it is not held: it completes while the warm still runs.
func TestBackgroundBandwidth(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	const capBps = 4 << 20
	objs := map[string][]byte{"bulk/a": randomBytes(1, 12<<20), "bulk/b": randomBytes(2, 12<<20), "hot": randomBytes(3, 8<<20)}
	putObjects(t, srv, bucket, objs)
	m := mountCached(t, srv, bucket, filepath.Join(t.TempDir(), "cache"), "--prefetch", "none",
		"--background-bandwidth", fmt.Sprint(capBps))

	before := harness.MustStats(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	warm := exec.CommandContext(ctx, needSegfs(t), "warm", "--quiet", m.Dir, "bulk")
	var wout bytes.Buffer
	warm.Stdout, warm.Stderr = &wout, &wout
	start := time.Now()
	if err := warm.Start(); err != nil {
		t.Fatal(err)
	}
	warmDone := make(chan error, 1)
	go func() { warmDone <- warm.Wait() }()

	// Once the warm is under way, read another file whole.
	harness.WaitStats(t, m, "the warm's first bytes", func(s map[string]int64) bool { return s["get_bytes"] > before["get_bytes"] })
	got, err := os.ReadFile(filepath.Join(m.Dir, "hot"))
	if err != nil || !bytes.Equal(got, objs["hot"]) {
		t.Fatalf("read hot: %v", err)
	}
	select {
	case err := <-warmDone:
		t.Fatalf("the warm ended (%v) before a read beside it: the read was held to the cap, or the warm was not\n%s", err, wout.String())
	default:
	}
	if err := <-warmDone; err != nil {
		t.Fatalf("warm: %v\n%s", err, wout.String())
	}
	took := time.Since(start)
	after := harness.WaitIdle(t, m)
	warmed := after["get_bytes"] - before["get_bytes"] - int64(len(objs["hot"]))
	if want := int64(len(objs["bulk/a"]) + len(objs["bulk/b"])); warmed < want {
		t.Fatalf("the warm fetched %d bytes, want at least %d", warmed, want)
	}
	rate := float64(warmed) / took.Seconds()
	t.Logf("warm: %d bytes in %v: %.2f MiB/s under a cap of %d MiB/s; throttled %v", warmed, took.Round(time.Millisecond),
		rate/(1<<20), capBps>>20, time.Duration(after["background_throttle_ns"]))
	// The cap allows a tenth of a second's burst on top; a noisy host
	// only makes the warm slower.
	if rate > 1.25*capBps {
		t.Errorf("the warm ran at %.2f MiB/s, above the %d MiB/s cap", rate/(1<<20), capBps>>20)
	}
	if rate < 0.5*capBps {
		t.Errorf("the warm ran at %.2f MiB/s, half the %d MiB/s cap or less", rate/(1<<20), capBps>>20)
	}
}

// --version prints the module version, the VCS commit the binary was
// built from (when the build recorded one) and the Go version;
// --log-format json logs one JSON object a line.
func TestVersionAndLogFormat(t *testing.T) {
	out, errs, code := segfsCmd(t, "--version")
	if code != 0 || !regexp.MustCompile(`^segfs \S+ \(commit \S+, go1\.\S+, `+runtime.GOOS+`/`+runtime.GOARCH+`\)\n$`).MatchString(out) {
		t.Fatalf("segfs --version: exit %d %q %s", code, out, errs)
	}
	info, err := exec.Command("go", "version", "-m", needSegfs(t)).Output()
	if err == nil {
		if m := regexp.MustCompile(`(?m)^\s+build\s+vcs\.revision=(\S+)`).FindSubmatch(info); m != nil && !strings.Contains(out, string(m[1])) {
			t.Errorf("--version %q does not name the commit %s the binary records", out, m[1])
		}
	}

	srv := needServer(t)
	bucket := newBucket(t, srv)
	putObjects(t, srv, bucket, map[string][]byte{"a": []byte("x")})
	m := mountS3(t, srv, "s3://"+bucket, "--log-format", "json")
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(m.Log()), "\n")
	mounted := false
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("log line is not JSON: %q", l)
			continue
		}
		if rec["msg"] == "mounted" {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("no JSON line says mounted:\n%s", m.Log())
	}
}

// metricsText returns the mount's /metrics.
func metricsText(t *testing.T, m *harness.Mount) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}).Get("http://" + m.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}
