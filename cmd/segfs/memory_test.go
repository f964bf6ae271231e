package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/ops"
	"github.com/segfs/segfs/reader"
)

// Each flag that lets segfs hold memory moves its own term of the bound,
// and the memory cache and the frame memory are counted apart: both are
// spent.
func TestMemoryBoundTerms(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off") // the test process keeps its own memory limit
	store, err := fetcher.Open(context.Background(), fileURL(t.TempDir()), fetcher.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// memoryBoundOf is the bound of the engine a mount of c builds.
	memoryBoundOf := func(c *mountCmd, keys int) memoryBound {
		c.CacheDir = t.TempDir()
		e, err := newEngine(c.engineConfig(store, keys), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return e.bound
	}
	base := defaultMountCmd(t)
	b := memoryBoundOf(&base, 0)
	if got, want := b.Parts, int64(3*16+reader.DefaultWriters+1)*8<<20; got != want {
		t.Errorf("parts %d, want %d", got, want)
	}
	if b.Memory != 64<<20 || b.Frames != 128<<20 {
		t.Errorf("memory cache %d and frames %d; want 64 MiB and 128 MiB counted apart", b.Memory, b.Frames)
	}
	keyed := memoryBoundOf(&base, 1_000_000)
	if got, want := keyed.Total()-b.Total(), int64(1_000_000)*(segfs.TreeBytesPerKey+indexBytesPerPart); got != want {
		t.Errorf("a million keys add %d bytes, want %d", got, want)
	}
	for _, tc := range []struct {
		name string
		set  func(c *mountCmd)
	}{
		{"part-size", func(c *mountCmd) { c.PartSize *= 2 }},
		{"max-fetches", func(c *mountCmd) { c.MaxFetches *= 2 }},
		{"memory-cache", func(c *mountCmd) { c.MemoryCache *= 2 }},
		{"frame-cache", func(c *mountCmd) { c.FrameCache *= 2 }},
		{"decode-memory", func(c *mountCmd) { c.DecodeMemory *= 2 }},
		{"cache-size", func(c *mountCmd) { c.CacheSize *= 1024 }},
	} {
		c := base
		tc.set(&c)
		if memoryBoundOf(&c, 0).Total() <= b.Total() {
			t.Errorf("doubling --%s did not raise the bound", tc.name)
		}
	}
	// --memory-cache 0 keeps none, and counts none: not the engine's
	// default.
	none := base
	none.MemoryCache = 0
	if got := memoryBoundOf(&none, 0).Memory; got > 1 {
		t.Errorf("--memory-cache 0 counts %d bytes of memory tier, want none", got)
	}
	// The control socket is always served; each listener flag adds its
	// connections at the cap.
	if b.Listeners != ops.ControlLimits().Memory() {
		t.Errorf("listeners %d without --metrics-addr, want the control socket's %d", b.Listeners, ops.ControlLimits().Memory())
	}
	c := base
	c.MetricsAddr, c.PprofAddr = "127.0.0.1:9100", "127.0.0.1:6060"
	if got, want := memoryBoundOf(&c, 0).Total()-b.Total(), ops.MetricsLimits().Memory()+ops.PprofLimits().Memory(); got != want {
		t.Errorf("--metrics-addr and --pprof-addr add %d bytes, want %d", got, want)
	}
}
