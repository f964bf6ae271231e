package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/segfs/segfs/tests/shaper"
)

// SanityResult is one check that the remote has the profile's shape.
type SanityResult struct {
	What     string  `json:"what"`
	Measured float64 `json:"measured"`
	Unit     string  `json:"unit"`
	// Expected is what the profile predicts, as a bound (">= 15.0") or an
	// approximate value ("~1.07"); empty without a prediction (loopback).
	Expected string `json:"expected,omitempty"`
	OK       bool   `json:"ok"`
}

func (s SanityResult) String() string {
	if s.Expected == "" {
		return fmt.Sprintf("%-40s %8.2f %-4s", s.What, s.Measured, s.Unit)
	}
	verdict := "ok"
	if !s.OK {
		verdict = "OFF PROFILE"
	}
	return fmt.Sprintf("%-40s %8.2f %-4s profile: %-9s %s", s.What, s.Measured, s.Unit, s.Expected, verdict)
}

// within reports whether measured is in [lo, hi] times expected.
func within(measured, expected, lo, hi float64) bool {
	return measured >= lo*expected && measured <= hi*expected
}

// checkShaping measures what the profile promises, through the same
// endpoint the cases use: the first-byte latency of tiny GETs, the rate of
// one connection, and that the cap is per connection (four connections
// move about four times as much). key must be at least 64 MiB long.
func checkShaping(ctx context.Context, r *remote, p shaper.Profile, key string) ([]SanityResult, error) {
	var out []SanityResult

	var small []time.Duration
	for range 10 {
		start := time.Now()
		if _, err := r.get(ctx, key, 0, 1, io.Discard, nil); err != nil {
			return out, err
		}
		small = append(small, time.Since(start))
	}
	slices.Sort(small)
	minMs, medMs := ms(small[0]), ms(small[len(small)/2])
	res := SanityResult{What: "1-byte GET, fastest of 10", Measured: minMs, Unit: "ms"}
	if !p.Direct {
		lo := ms(p.Latency - p.Jitter)
		res.Expected = fmt.Sprintf(">= %.1f", lo)
		res.OK = minMs >= lo-1 && minMs <= ms(p.Latency+p.Jitter)+15
	}
	out = append(out, res)
	res = SanityResult{What: "1-byte GET, median of 10", Measured: medMs, Unit: "ms"}
	if !p.Direct {
		res.Expected = fmt.Sprintf("~%.1f", ms(p.Latency))
		res.OK = within(medMs, ms(p.Latency), 0.75, 1.75)
	}
	out = append(out, res)

	const one = 64 << 20
	start := time.Now()
	if _, err := r.get(ctx, key, 0, one, io.Discard, make([]byte, 256<<10)); err != nil {
		return out, err
	}
	d := time.Since(start)
	res = SanityResult{What: "64 MiB GET on one connection", Measured: d.Seconds(), Unit: "s"}
	if !p.Direct && p.Rate > 0 {
		want := p.ExpectedGet(one).Seconds()
		res.Expected = fmt.Sprintf("~%.2f", want)
		res.OK = within(res.Measured, want, 0.85, 1.3)
	}
	out = append(out, res)

	const conns, each = 4, 16 << 20
	g, gctx := errgroup.WithContext(ctx)
	start = time.Now()
	for i := range conns {
		g.Go(func() error {
			_, err := r.get(gctx, key, int64(i)*each, each, io.Discard, make([]byte, 256<<10))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return out, err
	}
	res = SanityResult{What: "4 connections x 16 MiB at once, total", Measured: MBps(conns*each, time.Since(start)), Unit: "MB/s"}
	if !p.Direct && p.Rate > 0 {
		// A per-connection cap lets four connections move well over
		// what one does; a shared cap would not.
		want := MBps(conns*each, p.ExpectedGet(each))
		res.Expected = fmt.Sprintf("~%.0f", want)
		res.OK = within(res.Measured, want, 0.6, 1.2)
	}
	out = append(out, res)
	return out, nil
}
