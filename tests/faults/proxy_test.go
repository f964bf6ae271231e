package faults

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPassThrough(t *testing.T) {
	u, p, c, obj := setup(t, 1)
	for _, tc := range []struct {
		method, path, rng string
		status            int
		want              []byte
	}{
		{"GET", "/bucket/obj", "bytes=100-4195", http.StatusPartialContent, obj[100:4196]},
		{"GET", "/bucket/obj", "", http.StatusOK, obj},
		{"HEAD", "/bucket/obj", "", http.StatusOK, nil},
		{"GET", "/bucket?list-type=2&prefix=o", "", http.StatusOK, []byte("<Key>obj</Key>")},
		{"PUT", "/bucket/other", "", http.StatusOK, nil},
		{"GET", "/bucket/missing", "", http.StatusNotFound, nil},
	} {
		resp, body, err := c.do(tc.method, tc.path, tc.rng)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
		if tc.want != nil && !bytes.Contains(body, tc.want) {
			t.Errorf("%s %s %s: body of %d bytes lacks the expected %d", tc.method, tc.path, tc.rng, len(body), len(tc.want))
		}
	}
	if resp, _, _ := c.do("HEAD", "/bucket/obj", ""); resp.ContentLength != int64(len(obj)) {
		t.Errorf("HEAD Content-Length %d, want %d", resp.ContentLength, len(obj))
	}
	if u.badSigs != 0 {
		t.Errorf("upstream refused %d signatures of forwarded requests", u.badSigs)
	}
	s := p.Stats()
	want := map[string]int64{"get": 3, "head": 2, "list": 1, "other": 1}
	for op, n := range want {
		if s.Requests[op] != n {
			t.Errorf("Requests[%s] = %d, want %d (all: %v)", op, s.Requests[op], n, s.Requests)
		}
	}
	if s.TotalFaults() != 0 || s.GetsByKey["obj"] != 2 || s.DistinctGets != 3 {
		t.Errorf("stats %+v: want no faults, 2 GETs of obj, 3 distinct GETs", s)
	}
}

func TestErrorFaults(t *testing.T) {
	_, p, c, obj := setup(t, 2)
	mustRules(t, p,
		Rule{Fault: SlowDown, Times: 2},
		Rule{Ops: OpHead, Fault: InternalError},
		Rule{Ops: OpList, Fault: ErrorBody200, Times: 1},
	)
	for i, want := range []int{503, 503, 206} {
		resp, body, err := c.do("GET", "/bucket/obj", "bytes=0-99")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Errorf("GET %d: status %d, want %d", i, resp.StatusCode, want)
		}
		if want == 503 && (!bytes.Contains(body, []byte("<Code>SlowDown</Code>")) || !bytes.Contains(body, []byte(Marker))) {
			t.Errorf("GET %d: 503 body lacks the SlowDown code or the marker: %q", i, body)
		}
		if want == 206 && !bytes.Equal(body, obj[:100]) {
			t.Errorf("GET %d: passed-through body differs", i)
		}
	}
	resp, body, err := c.do("HEAD", "/bucket/obj", "")
	if err != nil || resp.StatusCode != 500 || len(body) != 0 {
		t.Errorf("HEAD: %v, status %v, %d body bytes; want 500 without a body", err, resp.StatusCode, len(body))
	}
	resp, body, err = c.do("GET", "/bucket?list-type=2", "")
	if err != nil || resp.StatusCode != 200 || !bytes.Contains(body, []byte("<Error>")) {
		t.Errorf("LIST: %v, status %v, body %q; want 200 with an XML error", err, resp.StatusCode, body)
	}
	s := p.Stats()
	if s.Faults["slowdown_503"] != 2 || s.Faults["internal_500"] != 1 || s.Faults["error_body_200"] != 1 {
		t.Errorf("faults %v", s.Faults)
	}
}

func TestReset(t *testing.T) {
	_, p, c, obj := setup(t, 3)
	mustRules(t, p, Rule{Fault: Reset, Bytes: 1000, Times: 1})
	resp, body, err := c.do("GET", "/bucket/obj", "bytes=0-65535")
	if err == nil {
		t.Fatalf("body read without error (%d bytes); want a reset", len(body))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("body error %v; want ECONNRESET", err)
	}
	if resp.ContentLength != 65536 || len(body) != 1000 || !bytes.Equal(body, obj[:1000]) {
		t.Errorf("Content-Length %d and %d body bytes; want 65536 announced and the first 1000 right", resp.ContentLength, len(body))
	}
	if p.Stats().Faults["reset"] != 1 {
		t.Errorf("faults %v", p.Stats().Faults)
	}
}

func TestShortBody(t *testing.T) {
	_, p, c, obj := setup(t, 4)
	mustRules(t, p, Rule{Fault: Short, Bytes: -1, Times: 1})
	resp, body, err := c.do("GET", "/bucket/obj", "bytes=1000-200999")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("body error %v; want io.ErrUnexpectedEOF", err)
	}
	if resp.ContentLength != 200000 || len(body) >= 200000 || !bytes.Equal(body, obj[1000:1000+len(body)]) {
		t.Errorf("Content-Length %d with %d body bytes; want 200000 announced, fewer sent, all right", resp.ContentLength, len(body))
	}
	// The next request is not affected (Times 1).
	if _, body, err := c.do("GET", "/bucket/obj", "bytes=0-99"); err != nil || !bytes.Equal(body, obj[:100]) {
		t.Errorf("after the fault: %v", err)
	}
}

func TestStallBody(t *testing.T) {
	_, p, c, obj := setup(t, 5)
	mustRules(t, p, Rule{Fault: Stall, Bytes: 4096, Times: 1})
	resp, err := c.http.Do(c.request(context.Background(), "GET", "/bucket/obj", "bytes=0-99999"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 4096)
	if _, err := io.ReadFull(resp.Body, head); err != nil || !bytes.Equal(head, obj[:4096]) {
		t.Fatalf("first 4096 bytes: %v", err)
	}
	got := make(chan []byte, 1)
	go func() {
		rest, _ := io.ReadAll(resp.Body)
		got <- rest
	}()
	select {
	case rest := <-got:
		t.Fatalf("body went on without a release (%d more bytes)", len(rest))
	case <-time.After(200 * time.Millisecond):
	}
	if p.Active() != 1 {
		t.Errorf("Active = %d during the stall, want 1", p.Active())
	}
	p.ReleaseStalls()
	rest := <-got
	if !bytes.Equal(append(head, rest...), obj[:100000]) {
		t.Errorf("body after the release differs (%d bytes)", 4096+len(rest))
	}
}

func TestStallTimed(t *testing.T) {
	_, p, c, obj := setup(t, 6)
	const d = 300 * time.Millisecond
	mustRules(t, p, Rule{Fault: Stall, Bytes: 10, Stall: d, Times: 1})
	start := time.Now()
	_, body, err := c.do("GET", "/bucket/obj", "bytes=0-999")
	if err != nil || !bytes.Equal(body, obj[:1000]) {
		t.Fatalf("stalled GET: %v", err)
	}
	if el := time.Since(start); el < d {
		t.Errorf("GET took %v, less than the %v stall", el, d)
	}
}

// TestStallHeadersClientLeaves checks a request stalled before its
// headers: the client's timeout fires, and the proxy drops the request
// once the client is gone.
func TestStallHeadersClientLeaves(t *testing.T) {
	_, p, c, _ := setup(t, 7)
	mustRules(t, p, Rule{Ops: OpHead | OpList, Fault: StallHeaders})
	for _, path := range []string{"/bucket/obj", "/bucket?list-type=2"} {
		method := "GET"
		if path == "/bucket/obj" {
			method = "HEAD"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := c.http.Do(c.request(ctx, method, path, ""))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s %s: %v; want the client's deadline", method, path, err)
		}
	}
	waitFor(t, "no request in progress", func() bool { return p.Active() == 0 })
	if s := p.Stats(); s.Faults["stall_headers"] != 2 {
		t.Errorf("faults %v", s.Faults)
	}
}

func TestWholeObject(t *testing.T) {
	u, p, c, obj := setup(t, 8)
	mustRules(t, p, Rule{Fault: WholeObject, Times: 1})
	resp, body, err := c.do("GET", "/bucket/obj", "bytes=5000-5999")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !bytes.Equal(body, obj) || resp.Header.Get("Content-Range") != "" {
		t.Errorf("status %d, %d bytes, Content-Range %q; want 200 with the whole object", resp.StatusCode, len(body), resp.Header.Get("Content-Range"))
	}
	if u.badSigs != 0 {
		t.Errorf("upstream refused the re-signed request")
	}
}

func TestShiftRange(t *testing.T) {
	u, p, c, obj := setup(t, 9)
	mustRules(t, p, Rule{Fault: ShiftRange, Bytes: 100})
	for _, tc := range []struct {
		rng, wantCR string
		want        []byte
	}{
		{"bytes=1000-1999", "bytes 900-1899/307200", obj[900:1900]},
		{"bytes=0-999", "bytes 100-1099/307200", obj[100:1100]}, // cannot go below 0
	} {
		resp, body, err := c.do("GET", "/bucket/obj", tc.rng)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 206 || resp.Header.Get("Content-Range") != tc.wantCR || !bytes.Equal(body, tc.want) {
			t.Errorf("%s: status %d, Content-Range %q, want 206 %q and the shifted bytes", tc.rng, resp.StatusCode, resp.Header.Get("Content-Range"), tc.wantCR)
		}
	}
	if u.badSigs != 0 {
		t.Errorf("upstream refused %d re-signed requests", u.badSigs)
	}
	// Shifted past the end of a small object: passed through unchanged.
	u.put("tiny", obj[:50])
	resp, body, err := c.do("GET", "/bucket/tiny", "bytes=10-49")
	if err != nil || resp.StatusCode != 206 || resp.Header.Get("Content-Range") != "bytes 10-49/50" || !bytes.Equal(body, obj[10:50]) {
		t.Errorf("unsatisfiable shift: %v, status %d, Content-Range %q; want the range as asked", err, resp.StatusCode, resp.Header.Get("Content-Range"))
	}
	if n := p.Stats().Faults["shifted_range"]; n != 2 {
		t.Errorf("%d shifted ranges counted, want 2 (the unsatisfiable one is not a fault)", n)
	}
}

func TestListAppend(t *testing.T) {
	_, p, c, _ := setup(t, 10)
	entries := []ListEntry{{Key: "../escape", Size: 5}, {Key: "a&b<c>", Size: 7}, {Key: "zzz/other", Size: 1}}
	mustRules(t, p, Rule{Ops: OpList, Fault: ListAppend, Entries: entries})
	_, body, err := c.do("GET", "/bucket?list-type=2", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<Key>obj</Key>", "<Key>../escape</Key>", "<Key>a&amp;b&lt;c&gt;</Key>"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("listing lacks %s:\n%s", want, body)
		}
	}
	_, body, _ = c.do("GET", "/bucket?list-type=2&prefix=zzz", "")
	if strings.Contains(string(body), "escape") || !strings.Contains(string(body), "zzz/other") {
		t.Errorf("prefixed listing: %s", body)
	}
	_, body, _ = c.do("GET", "/bucket?list-type=2&continuation-token=x", "")
	if strings.Contains(string(body), "escape") {
		t.Errorf("a later page got the entries too: %s", body)
	}
}

// TestListAppendControlCharacters checks that a key holding bytes XML
// cannot carry reaches a client that asks for encoding-type=url intact,
// with the upstream's own keys encoded too (the fake upstream, like
// versitygw, ignores the parameter), and makes the listing undecodable
// for one that does not ask.
func TestListAppendControlCharacters(t *testing.T) {
	u, p, c, _ := setup(t, 12)
	u.put("sp ace&+%", []byte("12"))
	keys := []string{"nul\x00key", "bell\x07<&>", "tab\tnl\nend"}
	var entries []ListEntry
	for _, k := range keys {
		entries = append(entries, ListEntry{Key: k, Size: 3})
	}
	mustRules(t, p, Rule{Ops: OpList, Fault: ListAppend, Entries: entries})
	_, body, err := c.do("GET", "/bucket?list-type=2&encoding-type=url", "")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		EncodingType string
		Contents     []listedObject
	}
	if err := xml.Unmarshal(body, &res); err != nil {
		t.Fatalf("decode listing: %v\n%s", err, body)
	}
	if res.EncodingType != "url" {
		t.Errorf("EncodingType %q, want url", res.EncodingType)
	}
	got := map[string]int64{}
	for _, o := range res.Contents {
		k, err := url.QueryUnescape(o.Key)
		if err != nil {
			t.Fatalf("key %q: %v", o.Key, err)
		}
		got[k] = o.Size
	}
	want := map[string]int64{"obj": 300 << 10, "sp ace&+%": 2}
	for _, k := range keys {
		want[k] = 3
	}
	if !maps.Equal(got, want) {
		t.Errorf("decoded listing %v, want %v", got, want)
	}

	_, body, err = c.do("GET", "/bucket?list-type=2", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(body, &res); err == nil {
		t.Errorf("a listing of a NUL key without encoding-type=url decoded:\n%s", body)
	}
}

// TestListResize checks that ListResize changes the sizes of the keys it
// names on every page, and nothing else.
func TestListResize(t *testing.T) {
	u, p, c, data := setup(t, 13)
	u.put("other", []byte("12345"))
	u.put("sp ace", []byte("123"))
	mustRules(t, p, Rule{Ops: OpList, Fault: ListResize,
		Entries: []ListEntry{{Key: "obj", Size: 1 << 40}, {Key: "sp ace", Size: 1 << 62}, {Key: "absent", Size: 1}}})
	for _, query := range []string{"list-type=2", "list-type=2&continuation-token=x", "list-type=2&encoding-type=url"} {
		_, body, err := c.do("GET", "/bucket?"+query, "")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, o := range decodeList(t, body) {
			k, err := url.QueryUnescape(o.Key)
			if err != nil {
				t.Fatalf("key %q: %v", o.Key, err)
			}
			got[k] = o.Size
		}
		want := map[string]int64{"obj": 1 << 40, "sp ace": 1 << 62, "other": 5}
		if !maps.Equal(got, want) {
			t.Errorf("%s: listing %v, want %v", query, got, want)
		}
	}
	if n := p.Stats().Faults["list_resize"]; n != 3 {
		t.Errorf("%d resized listings counted, want 3", n)
	}
	// Objects themselves are untouched.
	_, body, err := c.do("GET", "/bucket/obj", "")
	if err != nil || !bytes.Equal(body, data) {
		t.Errorf("GET obj: %v, %d bytes, want the object's %d", err, len(body), len(data))
	}
	// A listing that names none of the keys is not a fault.
	mustRules(t, p, Rule{Ops: OpList, Fault: ListResize, Entries: []ListEntry{{Key: "absent", Size: 1}}})
	if _, _, err := c.do("GET", "/bucket?list-type=2", ""); err != nil {
		t.Fatal(err)
	}
	if n := p.Stats().Faults["list_resize"]; n != 3 {
		t.Errorf("%d resized listings counted after a listing without the key, want 3", n)
	}
}

type listedObject struct {
	Key  string
	Size int64
}

// decodeList decodes a ListBucketResult with encoding/xml, as the SDK does.
func decodeList(t *testing.T, body []byte) []listedObject {
	t.Helper()
	var res struct {
		Contents []listedObject
	}
	if err := xml.Unmarshal(body, &res); err != nil {
		t.Fatalf("decode listing: %v\n%s", err, body)
	}
	return res.Contents
}

// TestRuleCounting checks After, Times, PerRequest, Key and Prob, and that
// a seed decides the same faults for the same requests.
func TestRuleCounting(t *testing.T) {
	_, p, c, _ := setup(t, 11)
	// Every request's first two attempts fail, whatever other requests do.
	mustRules(t, p, Rule{Fault: InternalError, Times: 2, PerRequest: true})
	var statuses []int
	for _, rng := range []string{"bytes=0-9", "bytes=10-19", "bytes=0-9", "bytes=10-19", "bytes=0-9", "bytes=10-19"} {
		resp, _, err := c.do("GET", "/bucket/obj", rng)
		if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, resp.StatusCode)
	}
	if want := []int{500, 500, 500, 500, 206, 206}; !equalInts(statuses, want) {
		t.Errorf("per-request statuses %v, want %v", statuses, want)
	}

	mustRules(t, p, Rule{Fault: SlowDown, After: 1, Times: 1, Key: "obj"}, Rule{Fault: InternalError, KeyPrefix: "miss"})
	statuses = statuses[:0]
	for _, path := range []string{"/bucket/obj", "/bucket/obj", "/bucket/obj", "/bucket/missing"} {
		resp, _, err := c.do("GET", path, "bytes=0-9")
		if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, resp.StatusCode)
	}
	if want := []int{206, 503, 206, 500}; !equalInts(statuses, want) {
		t.Errorf("After/Times/Key statuses %v, want %v", statuses, want)
	}

	seq := func(seed uint64) []int {
		_, p, c, _ := setup(t, seed)
		mustRules(t, p, Rule{Fault: SlowDown, Prob: 0.3})
		var out []int
		for range 200 {
			resp, _, err := c.do("GET", "/bucket/obj", "bytes=0-9")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, resp.StatusCode)
		}
		return out
	}
	a, b, other := seq(42), seq(42), seq(43)
	if !equalInts(a, b) {
		t.Errorf("the same seed decided different faults")
	}
	if equalInts(a, other) {
		t.Errorf("seeds 42 and 43 decided the same 200 faults")
	}
	n := 0
	for _, s := range a {
		if s == 503 {
			n++
		}
	}
	if n == 0 || n == len(a) {
		t.Errorf("Prob 0.3 fired %d times in %d", n, len(a))
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSetRulesRefuses(t *testing.T) {
	_, p, _, _ := setup(t, 12)
	for _, r := range []Rule{
		{},
		{Fault: SlowDown, Prob: 1.5},
		{Fault: SlowDown, Times: -1},
		{Fault: ListAppend, Ops: OpGet},
	} {
		if err := p.SetRules(r); err == nil {
			t.Errorf("SetRules(%+v) accepted", r)
		}
	}
	noCreds, err := New(Config{Upstream: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer noCreds.Close()
	if err := noCreds.SetRules(Rule{Fault: WholeObject}); err == nil {
		t.Errorf("a rule that must re-sign was accepted without credentials")
	}
	if _, err := New(Config{Upstream: "https://example.com/x"}); err == nil {
		t.Errorf("New accepted a non-loopback-style upstream with a path")
	}
}

// TestCloseEndsEverything closes the proxy with stalled requests in flight:
// Close must return, the clients must fail, and the proxy's goroutines must
// be gone.
func TestCloseEndsEverything(t *testing.T) {
	u := newUpstream(t)
	u.put("obj", bytes.Repeat([]byte("x"), 100000))
	before := runtime.NumGoroutine()
	p, err := New(Config{Upstream: u.srv.URL, Seed: 13})
	if err != nil {
		t.Fatal(err)
	}
	mustRules(t, p, Rule{Fault: Stall, Bytes: 10}, Rule{Ops: OpHead, Fault: StallHeaders})
	c := newClient(t, p.URL())
	errs := make(chan error, 8)
	for i := range 8 {
		method := "GET"
		if i%2 == 1 {
			method = "HEAD"
		}
		go func() {
			_, _, err := c.do(method, "/bucket/obj", "bytes=0-99999")
			errs <- err
		}()
	}
	waitFor(t, "8 stalled requests", func() bool { return p.Stats().TotalFaults() == 8 })
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with stalls in flight")
	}
	for range 8 {
		if err := <-errs; err == nil {
			t.Errorf("a stalled request succeeded across Close")
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	c.http.CloseIdleConnections()
	u.srv.CloseClientConnections()
	waitFor(t, "goroutines back to the count before New", func() bool { return runtime.NumGoroutine() <= before })
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("still waiting for %s; goroutines:\n%s", what, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
