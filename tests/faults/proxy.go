package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Config configures New.
type Config struct {
	// Upstream is the S3 server's base URL, http://127.0.0.1:PORT.
	// Required.
	Upstream string
	// Seed seeds the generator behind every probability and every random
	// byte count.
	Seed uint64
	// AccessKey, SecretKey and Region re-sign the requests a fault
	// changes (WholeObject, ShiftRange). Rules with those faults are
	// refused without them.
	AccessKey, SecretKey, Region string
}

// Proxy is a running fault-injecting reverse proxy on a loopback port.
// Its methods may be called concurrently.
type Proxy struct {
	// Immutable after New.
	cfg       Config
	upstream  *url.URL
	url       string
	srv       *http.Server
	tr        *http.Transport
	signer    *v4.Signer
	ctx       context.Context // cancelled by Close; ends stalls and upstream requests
	cancel    context.CancelFunc
	serveDone chan struct{} // closed when Serve returns

	active atomic.Int64 // handlers running

	// Guarded by mu.
	mu        sync.Mutex
	closed    bool
	handlers  sync.WaitGroup // Add under mu while !closed
	conns     int            // client connections open
	connsGone chan struct{}  // closed when conns drops to 0 after Close
	rng       *rand.Rand
	rules     []*ruleState
	release   chan struct{} // closed by ReleaseStalls, then replaced
	stats     Stats
	getIDs    map[string]struct{}
}

// Stats are the proxy's counters since New. Maps are keyed by Op.String(),
// Kind.String() and rule name.
type Stats struct {
	// Requests counts requests by operation ("get", "head", "list",
	// "other").
	Requests map[string]int64
	// Faults counts the faults applied, by kind.
	Faults map[string]int64
	// Fired counts the faults applied, by rule name.
	Fired map[string]int64
	// GetsByKey counts GETs of objects, by key.
	GetsByKey map[string]int64
	// DistinctGets is the number of distinct GET requests (key, query and
	// Range): a request and its retries count once.
	DistinctGets int64
	// UpstreamErrors counts requests the upstream could not answer.
	UpstreamErrors int64
}

// TotalFaults is the sum of Faults.
func (s Stats) TotalFaults() int64 {
	var n int64
	for _, v := range s.Faults {
		n += v
	}
	return n
}

func (s Stats) clone() Stats {
	c := s
	c.Requests = cloneMap(s.Requests)
	c.Faults = cloneMap(s.Faults)
	c.Fired = cloneMap(s.Fired)
	c.GetsByKey = cloneMap(s.GetsByKey)
	return c
}

func cloneMap(m map[string]int64) map[string]int64 {
	c := make(map[string]int64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// New starts a proxy on a free 127.0.0.1 port in front of cfg.Upstream,
// with no rules: every request is forwarded.
func New(cfg Config) (*Proxy, error) {
	up, err := url.Parse(cfg.Upstream)
	if err != nil || up.Scheme != "http" || up.Host == "" || (up.Path != "" && up.Path != "/") {
		return nil, fmt.Errorf("faults: upstream %q is not http://HOST:PORT", cfg.Upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faults: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		cfg:      cfg,
		upstream: up,
		url:      "http://" + ln.Addr().String(),
		tr: &http.Transport{
			Proxy:               nil,
			MaxIdleConnsPerHost: 128,
			DisableCompression:  true, // pass bodies and lengths through as they are
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		},
		signer:    v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }),
		ctx:       ctx,
		cancel:    cancel,
		serveDone: make(chan struct{}),
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		release:   make(chan struct{}),
		stats: Stats{
			Requests:  map[string]int64{},
			Faults:    map[string]int64{},
			Fired:     map[string]int64{},
			GetsByKey: map[string]int64{},
		},
		getIDs: map[string]struct{}{},
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: time.Minute,
		ConnState:         p.connState,
		// Clients that go away mid-answer are the point of the proxy;
		// the server's complaints about them are noise.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(p.serveDone)
		_ = p.srv.Serve(ln) // ErrServerClosed after Close
	}()
	return p, nil
}

// URL is the proxy's base URL, http://127.0.0.1:PORT: the endpoint to
// give the client instead of the upstream's.
func (p *Proxy) URL() string { return p.url }

// SetRules replaces the rules, in order: the first rule that fires on a
// request decides its fault. The new rules start with fresh counts (After,
// Times); Stats keep counting. With no rules every request is forwarded.
func (p *Proxy) SetRules(rules ...Rule) error {
	states := make([]*ruleState, len(rules))
	for i, r := range rules {
		if err := r.check(); err != nil {
			return err
		}
		if (r.Fault == WholeObject || r.Fault == ShiftRange) && (p.cfg.AccessKey == "" || p.cfg.SecretKey == "") {
			return fmt.Errorf("faults: rule %q changes the request and needs Config's credentials to re-sign it", r.name())
		}
		states[i] = &ruleState{Rule: r, perSeen: map[string]int{}, perFired: map[string]int{}}
	}
	p.mu.Lock()
	p.rules = states
	p.mu.Unlock()
	return nil
}

// ReleaseStalls ends every stall in progress: stalled bodies go on, and
// requests stalled before their headers are forwarded. Later stalls are
// not affected.
func (p *Proxy) ReleaseStalls() {
	p.mu.Lock()
	close(p.release)
	p.release = make(chan struct{})
	p.mu.Unlock()
}

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats.clone()
}

// CloseIdleConnections closes the idle connections to the upstream (the
// proxy keeps them for reuse, each with its goroutines).
func (p *Proxy) CloseIdleConnections() { p.tr.CloseIdleConnections() }

// Active returns the number of requests being handled now (a stalled one
// counts until its client goes away or the stall ends).
func (p *Proxy) Active() int64 { return p.active.Load() }

// Close stops accepting, ends every stall and connection, waits for every
// handler and connection goroutine, and closes idle upstream connections.
// It is safe to call more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.serveDone
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	err := p.srv.Close()
	<-p.serveDone
	p.handlers.Wait()
	p.mu.Lock()
	var gone chan struct{}
	if p.conns > 0 {
		p.connsGone = make(chan struct{})
		gone = p.connsGone
	}
	p.mu.Unlock()
	if gone != nil {
		<-gone
	}
	p.tr.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("faults: close: %w", err)
	}
	return nil
}

func (p *Proxy) connState(_ net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s {
	case http.StateNew:
		p.conns++
	case http.StateClosed, http.StateHijacked:
		p.conns--
		if p.conns == 0 && p.connsGone != nil {
			close(p.connsGone)
			p.connsGone = nil
		}
	}
}

// ServeHTTP classifies the request, lets the rules decide, and forwards
// it or answers with the fault.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		http.Error(w, "fault proxy closed", http.StatusServiceUnavailable)
		return
	}
	p.handlers.Add(1)
	p.mu.Unlock()
	p.active.Add(1)
	defer func() {
		p.active.Add(-1)
		p.handlers.Done()
	}()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel)
	defer stop()
	r = r.WithContext(ctx)

	req := classify(r)
	rule := p.decide(req)
	if rule == nil {
		p.pass(w, r, nil)
		return
	}
	p.inject(w, r, req, rule)
}

// decide counts the request and returns the first rule that fires on it,
// or nil.
func (p *Proxy) decide(req request) *Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests[req.op.String()]++
	if req.op == OpGet {
		p.stats.GetsByKey[req.key]++
		if _, ok := p.getIDs[req.id]; !ok {
			p.getIDs[req.id] = struct{}{}
			p.stats.DistinctGets++
		}
	}
	for _, s := range p.rules {
		if s.matches(req) && s.decide(req, p.rng.Float64) {
			r := s.Rule
			return &r
		}
	}
	return nil
}

// applied counts a fault that was injected.
func (p *Proxy) applied(rule *Rule) {
	p.mu.Lock()
	p.stats.Faults[rule.Fault.String()]++
	p.stats.Fired[rule.name()]++
	p.mu.Unlock()
	if rule.Then != nil {
		rule.Then()
	}
}

// randInt64 returns a number in [0, n) from the seeded generator.
func (p *Proxy) randInt64(n int64) int64 {
	if n <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Int64N(n)
}

// stallUntil waits for d (0: no limit), the client to go away, ReleaseStalls
// or Close. It reports whether the request should go on.
func (p *Proxy) stallUntil(ctx context.Context, d time.Duration) bool {
	p.mu.Lock()
	release := p.release
	p.mu.Unlock()
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return true
	case <-release:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// errUpstream marks a request the upstream could not answer.
var errUpstream = errors.New("upstream failed")

// roundTrip sends r upstream, changed by change (then re-signed) if not
// nil.
func (p *Proxy) roundTrip(r *http.Request, change func(*http.Request)) (*http.Response, error) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream.Scheme+"://"+p.upstream.Host+r.RequestURI, r.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", errUpstream, r.Method, r.RequestURI, err)
	}
	out.Header = r.Header.Clone()
	removeHopHeaders(out.Header)
	out.Host = r.Host // the client signed this Host
	out.ContentLength = r.ContentLength
	if r.ContentLength == 0 {
		out.Body = nil
	}
	if change != nil {
		change(out)
		if err := p.resign(out); err != nil {
			return nil, err
		}
	}
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		p.mu.Lock()
		p.stats.UpstreamErrors++
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %s %s: %w", errUpstream, r.Method, r.RequestURI, err)
	}
	return resp, nil
}

// resign signs a changed request again with the configured credentials.
func (p *Proxy) resign(out *http.Request) error {
	out.Header.Del("Authorization")
	out.Header.Del("X-Amz-Date")
	hash := out.Header.Get("X-Amz-Content-Sha256")
	if hash == "" {
		hash = emptySHA256
	}
	creds := awsCredentials(p.cfg.AccessKey, p.cfg.SecretKey)
	region := p.cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	if err := p.signer.SignHTTP(out.Context(), creds, out, hash, "s3", region, time.Now()); err != nil {
		return fmt.Errorf("faults: re-sign %s %s: %w", out.Method, out.URL, err)
	}
	return nil
}

// emptySHA256 is the hex SHA-256 of no bytes.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// hopHeaders are the connection-level headers a proxy does not forward.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, f := range strings.Split(h.Get("Connection"), ",") {
		if f = strings.TrimSpace(f); f != "" {
			h.Del(f)
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// pass forwards r (changed by change if not nil) and copies the answer.
func (p *Proxy) pass(w http.ResponseWriter, r *http.Request, change func(*http.Request)) {
	resp, err := p.roundTrip(r, change)
	if err != nil {
		upstreamFailed(w, r, err)
		return
	}
	defer resp.Body.Close()
	copyResponse(w, resp, r.Method)
}
