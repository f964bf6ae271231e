package faults

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Op is the kind of an S3 request, as the proxy classifies it. Ops combine
// as a bit set in Rule.Ops.
type Op uint8

// The operations. A GET of a bucket (no key) is a LIST.
const (
	OpGet   Op = 1 << iota // GET of an object, ranged or not
	OpHead                 // HEAD of an object or a bucket
	OpList                 // GET of a bucket: ListObjects(V2)
	OpOther                // anything else (PUT, DELETE, POST, ...)
)

// String names the operation as Stats.Requests does.
func (o Op) String() string {
	switch o {
	case OpGet:
		return "get"
	case OpHead:
		return "head"
	case OpList:
		return "list"
	case OpOther:
		return "other"
	}
	var names []string
	for _, one := range []Op{OpGet, OpHead, OpList, OpOther} {
		if o&one != 0 {
			names = append(names, one.String())
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Kind is a fault the proxy can inject.
type Kind uint8

// The faults.
const (
	// SlowDown answers 503 with an S3 XML error body, code SlowDown.
	SlowDown Kind = iota + 1
	// InternalError answers 500 with an S3 XML error body, code
	// InternalError. For HEAD the body is left out, as S3 does.
	InternalError
	// Reset forwards the upstream headers and Rule.Bytes bytes of the
	// body, then resets the connection (SO_LINGER 0: a TCP RST).
	Reset
	// Short forwards the upstream headers (with the full Content-Length)
	// and Rule.Bytes bytes of the body, then closes the connection
	// cleanly: the body ends early.
	Short
	// Stall forwards the upstream headers and Rule.Bytes bytes of the
	// body, then sends nothing for Rule.Stall, then the rest.
	Stall
	// StallHeaders sends nothing for Rule.Stall, then forwards the
	// request: a server that does not answer (a timeout, for HEAD and
	// LIST as for GET).
	StallHeaders
	// WholeObject drops the Range header: the server answers 200 with
	// the whole object, as a server that ignores Range does.
	WholeObject
	// ShiftRange moves the requested range by Rule.Bytes bytes (towards
	// the start of the object when it can, else towards the end): the
	// server answers 206 with another range than the one asked for, and
	// a Content-Range that says so. If the shifted range lies past the
	// end of the object, the request goes through unchanged instead.
	ShiftRange
	// ErrorBody200 answers 200 OK whose body is an S3 XML error document.
	ErrorBody200
	// ListAppend forwards a LIST and adds Rule.Entries to the first page
	// of its answer: keys the real server could not hold (such as
	// "../x"), to test how a client treats a hostile listing.
	ListAppend
	// ListResize forwards a LIST and, on every page of its answer, sets
	// the Size of each listed key that Rule.Entries names to that
	// entry's Size: a listing that lies about the objects it holds. It
	// adds no key; named keys that are not listed are left out.
	ListResize
)

var kindNames = map[Kind]string{
	SlowDown:      "slowdown_503",
	InternalError: "internal_500",
	Reset:         "reset",
	Short:         "short_body",
	Stall:         "stall_body",
	StallHeaders:  "stall_headers",
	WholeObject:   "whole_object",
	ShiftRange:    "shifted_range",
	ErrorBody200:  "error_body_200",
	ListAppend:    "list_append",
	ListResize:    "list_resize",
}

// String names the kind as Stats.Faults does.
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Kinds lists every fault kind, in declaration order.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kindNames))
	for k := SlowDown; k <= ListResize; k++ {
		out = append(out, k)
	}
	return out
}

// ListEntry is one object ListAppend adds to a listing, or one listed
// object ListResize gives another size (ETag unused).
type ListEntry struct {
	Key  string // the full key, bucket excluded
	Size int64
	ETag string // quoted, as S3 sends it; empty: a made-up one
}

// Rule says which requests get which fault. The zero values of its
// fields mean: every GET of an object, every time.
type Rule struct {
	// Name labels the rule in Stats.Fired. Default: the fault's name.
	Name string
	// Ops is the set of operations the rule applies to. Zero means OpGet.
	Ops Op
	// Key, if not empty, is the only object key (without the bucket) the
	// rule applies to.
	Key string
	// KeyPrefix, if not empty, restricts the rule to keys that start
	// with it.
	KeyPrefix string
	// Fault is what the rule injects. Required.
	Fault Kind
	// After lets the first After matching requests through before the
	// rule may fire.
	After int
	// Times bounds how often the rule fires. Zero: no bound.
	Times int
	// PerRequest makes After and Times count per request rather than in
	// total: a request is its method, path, query and Range header, so
	// "the first two attempts of every request" is
	// Rule{Times: 2, PerRequest: true}.
	PerRequest bool
	// Prob is the chance that the rule fires on a matching request that
	// After and Times allow. Zero means always.
	Prob float64
	// Bytes is, for Reset, Short and Stall, how many body bytes go out
	// before the fault (clamped to the body), and for ShiftRange the
	// shift. Negative: a random count within the body, for ShiftRange a
	// random shift of up to 64 KiB.
	Bytes int64
	// Stall is how long Stall and StallHeaders pause. Zero: until the
	// client goes away, ReleaseStalls is called or the proxy is closed.
	Stall time.Duration
	// Entries are the objects ListAppend adds, or the keys ListResize
	// resizes.
	Entries []ListEntry
	// Then, if not nil, runs each time the rule fires, after the
	// upstream has answered and before the faulty answer is written (for
	// example to change the object while its old body is in flight).
	// It runs on the request's goroutine, outside the proxy's lock.
	Then func()
}

func (r Rule) ops() Op {
	if r.Ops == 0 {
		return OpGet
	}
	return r.Ops
}

func (r Rule) name() string {
	if r.Name != "" {
		return r.Name
	}
	return r.Fault.String()
}

// check reports a rule that cannot work.
func (r Rule) check() error {
	if _, ok := kindNames[r.Fault]; !ok {
		return fmt.Errorf("faults: rule %q: unknown fault %v", r.Name, r.Fault)
	}
	if r.Prob < 0 || r.Prob > 1 {
		return fmt.Errorf("faults: rule %q: probability %v outside [0, 1]", r.name(), r.Prob)
	}
	if r.After < 0 || r.Times < 0 {
		return fmt.Errorf("faults: rule %q: negative After or Times", r.name())
	}
	if (r.Fault == ListAppend || r.Fault == ListResize) && r.ops() != OpList {
		return fmt.Errorf("faults: rule %q: %v applies to OpList only", r.name(), r.Fault)
	}
	return nil
}

// request is what rules match on.
type request struct {
	op     Op
	bucket string
	key    string
	id     string // method, path, query and Range: one request and its retries
}

func classify(r *http.Request) request {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	req := request{bucket: bucket, key: key,
		id: r.Method + " " + r.URL.EscapedPath() + "?" + r.URL.RawQuery + " " + r.Header.Get("Range")}
	switch {
	case r.Method == http.MethodHead:
		req.op = OpHead
	case r.Method == http.MethodGet && key == "":
		req.op = OpList
	case r.Method == http.MethodGet:
		req.op = OpGet
	default:
		req.op = OpOther
	}
	return req
}

func (r Rule) matches(req request) bool {
	return r.ops()&req.op != 0 &&
		(r.Key == "" || r.Key == req.key) &&
		(r.KeyPrefix == "" || strings.HasPrefix(req.key, r.KeyPrefix))
}

// ruleState is a rule and its counts. Guarded by Proxy.mu.
type ruleState struct {
	Rule
	seen, fired int            // matching requests and firings, unless PerRequest
	perSeen     map[string]int // the same by request id, when PerRequest
	perFired    map[string]int
}

// decide counts a matching request and reports whether the rule fires on
// it. draw returns a number in [0, 1) from the proxy's generator; it is
// called only when After and Times allow the rule to fire.
func (s *ruleState) decide(req request, draw func() float64) bool {
	seen, fired := s.seen, s.fired
	if s.PerRequest {
		seen, fired = s.perSeen[req.id], s.perFired[req.id]
	}
	seen++
	fire := seen > s.After && (s.Times == 0 || fired < s.Times) &&
		(s.Prob <= 0 || s.Prob >= 1 || draw() < s.Prob)
	if fire {
		fired++
	}
	if s.PerRequest {
		s.perSeen[req.id], s.perFired[req.id] = seen, fired
	} else {
		s.seen, s.fired = seen, fired
	}
	return fire
}
