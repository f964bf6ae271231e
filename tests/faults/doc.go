// Package faults is a fault-injecting HTTP reverse proxy for the S3 API,
// placed between segfs and a real S3 server in tests. Each request is
// classified (GET of an object, HEAD, LIST, other), matched against an
// ordered list of Rules, and either forwarded untouched or answered with
// one fault: a 503 SlowDown or 500 InternalError with an S3 XML error
// body, a TCP reset or a clean close part-way through the body, a body or
// header stall, a response that ignores or shifts the requested range, a
// 200 whose body is an XML error, or a LIST answer with extra entries or
// with sizes that lie.
//
// Invariants:
//   - A request no rule fires on is forwarded byte for byte: method, raw
//     request target, headers (hop-by-hop ones aside) and the Host header
//     the client signed. A fault that has to change the request (dropping
//     or shifting Range) re-signs it with Config's credentials, so the
//     server answers it as a real, misbehaving server would.
//   - Decisions are deterministic for a given Config.Seed and order of
//     requests: one seeded generator, used under one lock, draws every
//     probability and every random byte count.
//   - Every fault that is applied is counted (Stats.Faults by kind,
//     Stats.Fired by rule), and every request by operation, so a test can
//     assert what was injected as well as how the client coped.
//   - Body faults (reset, short, stall, shift, whole object) apply only to
//     2xx answers; any other upstream answer is passed through and is not
//     counted as a fault.
//   - Stalls end when their duration passes, the client goes away,
//     ReleaseStalls is called or the proxy is closed. Close stops
//     accepting, ends every connection and stall, and returns once every
//     handler has returned: no goroutine of the proxy outlives it (idle
//     upstream connections are closed too).
//
// Nothing here contacts an address other than the upstream given to New.
package faults
