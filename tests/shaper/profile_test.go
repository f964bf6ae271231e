package shaper

import (
	"testing"
	"time"
)

func TestParseProfile(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Profile
		wantErr bool
	}{
		{in: "default", want: Profile{Name: "default", Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Rate: 64_000_000}},
		{in: "loopback", want: Profile{Name: "loopback", Direct: true}},
		{in: "latency=50ms,jitter=10ms,rate=32MB/s", want: Profile{Name: "latency=50ms,jitter=10ms,rate=32MB/s", Latency: 50 * time.Millisecond, Jitter: 10 * time.Millisecond, Rate: 32_000_000}},
		{in: "rate=1.5GB/s", want: Profile{Name: "rate=1.5GB/s", Rate: 1_500_000_000}},
		{in: "latency=5ms", want: Profile{Name: "latency=5ms", Latency: 5 * time.Millisecond}},
		{in: "fast", wantErr: true},
		{in: "latency=20", wantErr: true},             // no unit
		{in: "latency=1500us", wantErr: true},         // not whole milliseconds
		{in: "latency=5ms,jitter=6ms", wantErr: true}, // jitter above latency
		{in: "rate=64MB", wantErr: true},              // no /s
		{in: "rate=500B/s", wantErr: true},            // below 1 KB/s
		{in: "rate=1500B/s", wantErr: true},           // not whole KB/s
		{in: "rate=-1MB/s", wantErr: true},
		{in: "speed=1MB/s", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseProfile(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseProfile(%q) = %+v, want an error", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseProfile(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestExpectedGet(t *testing.T) {
	p, err := ParseProfile("default")
	if err != nil {
		t.Fatal(err)
	}
	// 64 MB at 64 MB/s is one second, plus the first-byte latency.
	if got, want := p.ExpectedGet(64_000_000), time.Second+20*time.Millisecond; got != want {
		t.Errorf("ExpectedGet(64 MB) = %v, want %v", got, want)
	}
	if got := (Profile{Direct: true}).ExpectedGet(1 << 30); got != 0 {
		t.Errorf("loopback ExpectedGet = %v, want 0", got)
	}
}
