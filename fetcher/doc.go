// Package fetcher reads objects from a remote store: an S3 bucket (or an
// S3-compatible service) below a key prefix, or a local directory. It is the
// only package of segfs that talks to the remote.
//
// Invariants:
//
//   - Read-only. No method of a Store writes, deletes or changes anything in
//     the remote store.
//   - Identity is (Key, ETag, Size). For S3 the ETag is kept exactly as the
//     server returned it, quotes included, and every ranged GET sends it in
//     If-Match; a 412 becomes an error wrapping ErrChanged. For a local
//     directory the ETag is derived from inode, size and modification time,
//     and is checked before and after every read. A read therefore never
//     returns bytes of an object other than the one the caller named.
//   - Only data is data. An S3 response counts as data only when its status
//     is 2xx (206, or 200 when the request covered the whole object), its
//     Content-Range (if present) is exactly the requested range of an object
//     of the expected size, and its body delivers exactly the requested
//     number of bytes. Error bodies, wrong ranges and short or long bodies
//     are never returned as a successful read.
//   - Retries are bounded. Failures before the response headers (connection
//     errors, throttling, 5xx) are retried by the AWS SDK's standard retryer.
//     Failures after the headers (resets, short bodies, bodies idle for
//     Config.IdleTimeout, wrong ranges) are retried by ReadRange, which
//     re-requests only the missing remainder of the range, with If-Match,
//     jittered exponential backoff and at most Config.MaxAttempts attempts
//     per call. ErrChanged and ErrNotFound are never retried. Every network
//     wait and every backoff honours the caller's context.
//   - No call leaves a goroutine running after it returns (idle pooled
//     connections belong to the store's HTTP transport, not to a call).
//   - Credentials come only from the standard AWS chain and never appear in
//     errors or logs produced by this package. Nor does what a credential
//     provider printed or sent: every error of the chain's provider, at
//     Open or on a refresh during a request, is a *CredentialsError that
//     names the provider and a class of cause, classified by the SDK's
//     error types, with the provider's own error dropped.
//   - A listing ends. S3 List fails with ErrListCycle on a continuation
//     token it has seen before (a cycle of any length), and with
//     ErrListTooLong past 10,000,000 keys (a page without keys counts as
//     one), so a server that never ends a listing costs a bounded amount.
//
// All Store methods may be called concurrently. Errors carry the source or
// the key and range they concern and wrap the sentinel errors of this
// package where one applies; callers test them with errors.Is.
package fetcher
