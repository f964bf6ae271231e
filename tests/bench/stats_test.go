package main

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted on purpose
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 50, 7 * time.Millisecond},
		{"one p99", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 4 is the 2nd", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p50 of 5 is the 3rd", ms(5, 4, 3, 2, 1), 50, 3 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is the max", ms(hundred...), 100, 100 * time.Millisecond},
		{"p1 of 100 is the min", ms(hundred...), 1, time.Millisecond},
		{"tiny q is the min", ms(3, 1, 2), 0.0001, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			if got := Percentile(tc.in, tc.q); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.in, tc.q, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("Percentile modified its input")
			}
		})
	}
}

// TestPercentileInvariants checks, on random inputs, that percentiles are
// members of the input, monotone in q, and bounded by min and max.
func TestPercentileInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 1 + rng.IntN(300)
		ds := make([]time.Duration, n)
		for i := range ds {
			ds[i] = time.Duration(rng.Int64N(1e9))
		}
		prev := time.Duration(-1)
		for _, q := range []float64{1, 10, 50, 90, 99, 99.9, 100} {
			p := Percentile(ds, q)
			if !slices.Contains(ds, p) {
				t.Fatalf("p%v = %v is not one of the values", q, p)
			}
			if p < prev {
				t.Fatalf("p%v = %v below the previous percentile %v", q, p, prev)
			}
			prev = p
		}
		if prev != slices.Max(ds) {
			t.Fatalf("p100 = %v, max %v", prev, slices.Max(ds))
		}
	}
}

func TestSummarize(t *testing.T) {
	if got := Summarize(nil); !reflect.DeepEqual(got, Latencies{}) {
		t.Errorf("Summarize(nil) = %+v", got)
	}
	got := Summarize([]time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 1500 * time.Microsecond})
	want := Latencies{Count: 4, P50: 10, P99: 30, Max: 30, Mean: 15.375,
		Slowest: []Sample{{0, 30}, {2, 20}, {1, 10}, {3, 1.5}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
}

func TestMBpsAndRatio(t *testing.T) {
	if got := MBps(64_000_000, 2*time.Second); got != 32 {
		t.Errorf("MBps = %v, want 32", got)
	}
	if got := MBps(1, 0); got != 0 {
		t.Errorf("MBps over no time = %v, want 0", got)
	}
	if r := Ratio(3, 2); r == nil || *r != 1.5 {
		t.Errorf("Ratio(3, 2) = %v", r)
	}
	for _, c := range [][2]float64{{0, 1}, {1, 0}, {-1, 2}} {
		if r := Ratio(c[0], c[1]); r != nil {
			t.Errorf("Ratio(%v, %v) = %v, want missing", c[0], c[1], *r)
		}
	}
}
