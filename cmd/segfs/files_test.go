package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/segfs/segfs/ops"
)

// The open-file need counts every listener's cap and the fetch pool;
// a limit below it gets one warning naming both, a limit at it none.
func TestFileLimitWarning(t *testing.T) {
	c := defaultMountCmd(t)
	base := fileNeedOf(&c)
	c.MetricsAddr, c.PprofAddr = "127.0.0.1:9100", "127.0.0.1:6060"
	c.MaxFetches *= 2
	n := fileNeedOf(&c)
	if got, want := n.Listeners-base.Listeners, ops.MetricsLimits().Files()+ops.PprofLimits().Files(); got != want {
		t.Errorf("the metrics and pprof listeners add %d descriptors, want %d", got, want)
	}
	if n.Fetches != 2*base.Fetches || n.Cache != base.Cache || n.Reserve != base.Reserve {
		t.Errorf("doubling --max-fetches: %+v from %+v", n, base)
	}
	for _, tc := range []struct {
		limit uint64
		warn  bool
	}{
		{uint64(n.Total()) - 1, true},
		{uint64(n.Total()), false},
		{1 << 20, false},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		if got := warnFileLimit(n, tc.limit, log); got != tc.warn {
			t.Errorf("limit %d, need %d: warned %v", tc.limit, n.Total(), got)
		}
		if lines := strings.Count(buf.String(), "\n"); tc.warn && (lines != 1 || !strings.Contains(buf.String(), "limit=") || !strings.Contains(buf.String(), "need=")) {
			t.Errorf("limit %d: logged %q, want one warning with the limit and the need", tc.limit, buf.String())
		} else if !tc.warn && lines != 0 {
			t.Errorf("limit %d: logged %q, want nothing", tc.limit, buf.String())
		}
	}
}
