// Package shaper is the tests' traffic shaper: a TCP proxy, run in the
// test's own process, that stands for the network between an S3 server
// on loopback and its clients. The bench (tests/bench) and the soak
// (tests/soak) both put it in front of versitygw.
//
// Its invariants, stated in full on Shaper and pacer:
//   - no byte leaves before its delay (the profile's latency ± jitter) is
//     up, and no connection moves bytes faster than the profile's rate;
//     the cap is per connection;
//   - bytes leave in the order they came, each exactly once;
//   - Close ends every connection and waits for every goroutine the
//     proxy started, whatever its clients did (a client that closes
//     mid-body leaves nothing behind).
package shaper
