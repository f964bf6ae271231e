package shaper

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Profile is the shape of the simulated remote: what the shaping proxy adds
// between the S3 server and every client (segfs and the baselines alike).
type Profile struct {
	// Name is how the profile was asked for ("default", "loopback", or
	// the key=value form).
	Name string
	// Direct means no proxy at all: clients talk to the server itself.
	Direct bool
	// Latency is added to the first byte of every response (downstream),
	// varied by up to ±Jitter. Whole milliseconds, as results record them.
	Latency, Jitter time.Duration
	// Rate is the bandwidth cap of each connection in bytes per second;
	// 0 means none. A multiple of 1000, as results record it (KB/s).
	Rate int64
}

// Named profiles.
var profiles = map[string]Profile{
	"default":  {Name: "default", Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Rate: 64_000_000},
	"loopback": {Name: "loopback", Direct: true},
}

// ParseProfile returns a named profile, or one written as comma-separated
// key=value pairs: latency=DURATION, jitter=DURATION, rate=N{B,KB,MB,GB}/s
// (decimal units), e.g. "latency=50ms,jitter=10ms,rate=32MB/s". Keys left out
// are zero.
func ParseProfile(s string) (Profile, error) {
	if p, ok := profiles[s]; ok {
		return p, nil
	}
	if !strings.Contains(s, "=") {
		return Profile{}, fmt.Errorf("profile %q: not one of default, loopback, or key=value pairs (latency=20ms,jitter=5ms,rate=64MB/s)", s)
	}
	p := Profile{Name: s}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		var err error
		switch k {
		case "latency":
			p.Latency, err = parseMillis(v)
		case "jitter":
			p.Jitter, err = parseMillis(v)
		case "rate":
			p.Rate, err = ParseRate(v)
		default:
			err = fmt.Errorf("unknown key %q (want latency, jitter or rate)", k)
		}
		if err != nil {
			return Profile{}, fmt.Errorf("profile %q: %w", s, err)
		}
	}
	if p.Jitter > p.Latency {
		return Profile{}, fmt.Errorf("profile %q: jitter %v exceeds latency %v", s, p.Jitter, p.Latency)
	}
	return p, nil
}

func parseMillis(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < 0 || d%time.Millisecond != 0 {
		return 0, fmt.Errorf("%s: want a non-negative whole number of milliseconds", v)
	}
	return d, nil
}

// ParseRate parses a decimal byte rate such as "64MB/s", "500KB/s" or
// "1GB/s" into bytes per second. The result is a multiple of 1000.
func ParseRate(v string) (int64, error) {
	num, ok := strings.CutSuffix(v, "/s")
	if !ok {
		return 0, fmt.Errorf("rate %q: want N{B,KB,MB,GB}/s", v)
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}} {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("rate %q: want a positive number of {B,KB,MB,GB}/s", v)
	}
	r := int64(n * float64(mult))
	if r < 1000 || r%1000 != 0 {
		return 0, fmt.Errorf("rate %q: must be a whole number of KB/s", v)
	}
	return r, nil
}

// String describes the profile for a reader.
func (p Profile) String() string {
	if p.Direct {
		return p.Name + " (no proxy: clients reach the server directly on loopback)"
	}
	rate := "unlimited"
	if p.Rate > 0 {
		rate = fmt.Sprintf("%g MB/s per connection", float64(p.Rate)/1e6)
	}
	return fmt.Sprintf("%s (latency %v ± %v, %s)", p.Name, p.Latency, p.Jitter, rate)
}

// ExpectedGet is how long one GET of n bytes on one connection should
// take under the profile, leaving out the server's own time.
func (p Profile) ExpectedGet(n int64) time.Duration {
	if p.Direct {
		return 0
	}
	d := p.Latency
	if p.Rate > 0 {
		d += time.Duration(float64(n) / float64(p.Rate) * float64(time.Second))
	}
	return d
}
