package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// shaper is a toxiproxy proxy, run in this process, in front of the S3
// server: a latency toxic and a bandwidth toxic on the downstream (server
// to client) direction, and for uploads a bandwidth toxic on the upstream
// direction too. Toxiproxy runs the toxic chain per connection, so the
// rate is a per-connection cap, as on a real object store.
type shaper struct {
	// Immutable after startShaper.
	proxy    *toxiproxy.Proxy
	endpoint string // http://127.0.0.1:PORT
}

// startShaper listens on a free loopback port and forwards to upstream
// (http://127.0.0.1:PORT) with the profile's toxics; with upload, the
// client-to-server direction is capped at the profile's rate as well.
// Stop it with Close.
func startShaper(upstream string, p Profile, upload bool) (*shaper, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") {
		return nil, fmt.Errorf("shaper: upstream %q is not http://127.0.0.1:PORT", upstream)
	}
	// The toxics log through zerolog's global logger; the proxy's own
	// errors show up as failed requests in its clients.
	zerolog.SetGlobalLevel(zerolog.Disabled)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	proxy := toxiproxy.NewProxy(srv, "s3", "127.0.0.1:0", u.Host)
	var toxics []string
	if p.Latency > 0 {
		toxics = append(toxics, fmt.Sprintf(
			`{"name":"latency","type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d,"jitter":%d}}`,
			p.Latency.Milliseconds(), p.Jitter.Milliseconds()))
	}
	if p.Rate > 0 {
		toxics = append(toxics, fmt.Sprintf(
			`{"name":"bandwidth","type":"bandwidth","stream":"downstream","toxicity":1,"attributes":{"rate":%d}}`,
			p.Rate/1000))
		if upload {
			toxics = append(toxics, fmt.Sprintf(
				`{"name":"upload-bandwidth","type":"bandwidth","stream":"upstream","toxicity":1,"attributes":{"rate":%d}}`,
				p.Rate/1000))
		}
	}
	for _, t := range toxics {
		if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(t)); err != nil {
			return nil, fmt.Errorf("shaper: add toxic %s: %w", t, err)
		}
	}
	if err := proxy.Start(); err != nil {
		return nil, fmt.Errorf("shaper: start proxy to %s: %w", u.Host, err)
	}
	return &shaper{proxy: proxy, endpoint: "http://" + proxy.Listen}, nil
}

// Endpoint is the proxy's base URL.
func (s *shaper) Endpoint() string { return s.endpoint }

// Close stops accepting, closes every proxied connection and waits for the
// accept loop to end. It is safe to call more than once.
func (s *shaper) Close() error {
	s.proxy.Stop()
	return nil
}
