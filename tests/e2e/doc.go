// Package e2e tests segfs end to end: the built segfs binary runs as a child
// process against a real versitygw S3 server on loopback, and the tests read
// through its real FUSE mount. They never read through a FUSE mount served
// by their own process.
//
// The binaries come from SEGFS_BIN and VERSITYGW_BIN, or <repo>/bin. If one
// is missing the tests skip, unless SEGFS_REQUIRE_E2E is set (as `make test`
// does), in which case they fail.
package e2e
