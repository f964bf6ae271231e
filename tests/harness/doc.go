// Package harness runs the real pieces of a segfs end-to-end setup as child
// processes: a versitygw S3 server on a loopback port (Server) and the segfs
// binary serving a FUSE mount (Mount), and the real Lucene in a JVM running
// tests/lucene/LuceneTool.java (Lucene). It is shared by the e2e tests, the
// demo and the benchmarks, so its functions take a context and return errors;
// the few helpers that take a testing.TB are thin wrappers.
//
// Invariants:
//   - Nothing here contacts an address other than 127.0.0.1.
//   - Every process the harness starts is owned by the value that started it
//     (Server or Mount); Stop, Unmount and Kill signal it, wait for it and
//     remove its temporary files, on every path, and are safe to call more
//     than once. Children also get a parent-death signal, so a harness
//     process that dies does not leave them running.
//   - Child processes never see the caller's AWS_* or VGW_* environment; a
//     Mount gets only the credentials its options name, and a private
//     XDG_CACHE_HOME so that no run reads or pollutes a user's cache.
package harness
