// Package reliability tests how segfs behaves when the remote misbehaves,
// when readers are interrupted, when the daemon dies, and when it is given
// hostile input. Each test runs the built segfs binary as a child process
// against a real versitygw S3 server, with the fault-injecting proxy of
// package faults in between, and reads through a real FUSE mount. Tests are
// named after the cases of the reliability test plan; docs/RELIABILITY.md
// maps each case to its test and says what held.
//
// Bounds on elapsed time only turn a hang into a failure; they are never
// performance thresholds.
package reliability
