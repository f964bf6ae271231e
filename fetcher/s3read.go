package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Backoff between ReadRange's own attempts: exponential from
// retryBaseDelay, capped at retryMaxDelay, jittered to [d/2, d].
const (
	retryBaseDelay = 50 * time.Millisecond
	retryMaxDelay  = 2 * time.Second
)

// bodyError marks a failure after the response headers arrived (a wrong
// range or length, a reset, a short, long or idle body). ReadRange retries
// only these; the SDK has already retried everything that failed earlier.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// ReadRange implements Store. Each attempt is a GET of the bytes still
// missing, with If-Match obj.ETag; bytes count only when they arrive in a
// response whose status, Content-Range and Content-Length match that
// request. Failures after the headers are retried with backoff, at most
// Config.MaxAttempts requests per call; the SDK's own retries of failures
// before the headers happen within each request. A 412 gives an error
// wrapping ErrChanged, a 404 one wrapping ErrNotFound; neither is retried.
// A body that delivers no bytes for Config.IdleTimeout is abandoned and
// the rest re-requested. A key that is not a clean relative path
// (checkKey) is refused without a request, with an error wrapping
// ErrBadKey and ErrNotFound. The returned error names the key and range
// and wraps the last cause. p is not retained.
func (s *S3Store) ReadRange(ctx context.Context, obj Object, off int64, p []byte) error {
	return s.ReadRangeProgress(ctx, obj, off, p, nil)
}

// ReadRangeProgress implements ProgressReader: ReadRange, calling
// progress (unless nil) as each read of a body extends the bytes of p
// that are final.
func (s *S3Store) ReadRangeProgress(ctx context.Context, obj Object, off int64, p []byte, progress func(filled int)) error {
	err := s.readRange(ctx, obj, off, p, progress)
	if err == nil {
		return nil
	}
	s.counters.ReadErrors.Add(1)
	if errors.Is(err, ErrChanged) {
		s.counters.Changed.Add(1)
	}
	return fmt.Errorf("s3 get %s [%d,%d): %w", obj.Key, off, off+int64(len(p)), err)
}

func (s *S3Store) readRange(ctx context.Context, obj Object, off int64, p []byte, progress func(int)) error {
	if err := checkKey(obj.Key); err != nil {
		return err
	}
	if off < 0 || off+int64(len(p)) > obj.Size {
		return fmt.Errorf("range outside object of size %d", obj.Size)
	}
	if obj.ETag == "" {
		return errors.New("object has no ETag to send in If-Match")
	}
	if len(p) == 0 {
		return nil
	}
	got := 0
	var report func(int) // of the bytes of p[got:] this attempt filled
	if progress != nil {
		report = func(n int) { progress(got + n) }
	}
	for attempt := 1; ; attempt++ {
		n, err := s.getOnce(ctx, obj, off+int64(got), p[got:], report)
		got += n
		if progress != nil && n > 0 {
			progress(got)
		}
		if err == nil {
			return nil
		}
		var be *bodyError
		if !errors.As(err, &be) || ctx.Err() != nil {
			return err
		}
		if attempt >= s.cfg.MaxAttempts {
			return fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
		s.cfg.Logger.Debug("fetcher: re-requesting range", "source", s.src.String(), "key", obj.Key,
			"from", off+int64(got), "to", off+int64(len(p)), "attempt", attempt+1, "err", err)
		if werr := sleepCtx(ctx, backoff(attempt)); werr != nil {
			return fmt.Errorf("%w (while retrying after: %v)", werr, err)
		}
		s.counters.Retries.Add(1)
	}
}

// getOnce issues one GET for bytes [off, off+len(p)) and reads its body
// into p. It returns how many bytes of p were filled from a validated
// response, and an error unless that is all of them; report (unless nil)
// hears of them as they come (see readBody). The SDK's retries of
// failures before the headers happen inside this call.
func (s *S3Store) getOnce(ctx context.Context, obj Object, off int64, p []byte, report func(int)) (int, error) {
	end := off + int64(len(p))
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	at := &getAttempts{s: s}
	out, err := s.client.GetObject(actx, &s3.GetObjectInput{
		Bucket:  aws.String(s.bucket),
		Key:     aws.String(s.prefix + obj.Key),
		Range:   aws.String(fmt.Sprintf("bytes=%d-%d", off, end-1)),
		IfMatch: aws.String(obj.ETag),
	}, s3.WithAPIOptions(at.middleware))
	if err != nil {
		at.end() // an attempt that got its response, failed later in the SDK
		return 0, getError(err, obj)
	}
	defer out.Body.Close()
	// Before the Close: the attempt ends when its body was read, or given
	// up on (a bad header, a short or idle body).
	defer at.end()
	if etag := aws.ToString(out.ETag); etag != "" && normETag(etag) != normETag(obj.ETag) {
		// The server ignored If-Match.
		return 0, fmt.Errorf("%w: response ETag %s, want %s", ErrChanged, etag, obj.ETag)
	}
	if _, _, total, ok := parseContentRange(aws.ToString(out.ContentRange)); ok && total != obj.Size {
		return 0, sizeChanged(obj, total)
	}
	if err := checkHeaders(out, obj.Size, off, end); err != nil {
		return 0, &bodyError{err}
	}
	lengthKnown := out.ContentLength != nil && *out.ContentLength >= 0
	return s.readBody(ctx, cancel, out.Body, p, lengthKnown, report, at.firstByte)
}

// readBody reads exactly len(p) bytes from body. A watchdog cancels the
// attempt (through cancel) when no byte arrives for Config.IdleTimeout.
// When the length was not announced it also checks that the body ends
// there; a longer body fills nothing.
//
// With a known Content-Length every byte read is final, and report
// (unless nil) is called with the bytes filled so far after each read.
// Without one, a body longer than p voids all of p, so report is not
// called and the caller counts the bytes when readBody returns.
// firstByte is called once, when the first read returns bytes.
func (s *S3Store) readBody(ctx context.Context, cancel context.CancelFunc, body io.Reader, p []byte, lengthKnown bool, report func(int), firstByte func()) (int, error) {
	if !lengthKnown {
		report = nil
	}
	var idle atomic.Bool
	watchdog := time.AfterFunc(s.cfg.IdleTimeout, func() { idle.Store(true); cancel() })
	defer watchdog.Stop()
	fail := func(got int, err error) (int, error) {
		switch {
		case ctx.Err() != nil:
			return got, ctx.Err()
		case idle.Load():
			return got, &bodyError{fmt.Errorf("body idle for %v after %d of %d bytes", s.cfg.IdleTimeout, got, len(p))}
		case errors.Is(err, io.EOF):
			return got, &bodyError{fmt.Errorf("body ended after %d of %d bytes: %w", got, len(p), io.ErrUnexpectedEOF)}
		default:
			return got, &bodyError{fmt.Errorf("body failed after %d of %d bytes: %w", got, len(p), err)}
		}
	}
	got := 0
	for got < len(p) {
		n, err := body.Read(p[got:])
		if n > 0 {
			if got == 0 {
				firstByte()
			}
			got += n
			s.counters.GetBytes.Add(int64(n))
			watchdog.Reset(s.cfg.IdleTimeout)
			if report != nil {
				report(got)
			}
		}
		if err != nil && got < len(p) {
			return fail(got, err)
		}
	}
	if lengthKnown {
		return got, nil // the transport delivers exactly Content-Length bytes
	}
	var extra [1]byte
	for {
		n, err := body.Read(extra[:])
		if n > 0 {
			s.counters.GetBytes.Add(int64(n))
			return 0, &bodyError{fmt.Errorf("body longer than the %d bytes requested", len(p))}
		}
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			_, ferr := fail(0, err)
			return 0, ferr
		}
	}
}

// checkHeaders accepts a response as the answer to a request for bytes
// [off, end) of an object of the given size: 206, or 200 only when the
// range is the whole object; Content-Range, if present, exactly that
// range; Content-Length, if present, exactly end-off.
func checkHeaders(out *s3.GetObjectOutput, size, off, end int64) error {
	status := 0
	if raw, ok := awsmiddleware.GetRawResponse(out.ResultMetadata).(*smithyhttp.Response); ok {
		status = raw.StatusCode
	}
	switch status {
	case http.StatusPartialContent:
	case http.StatusOK:
		if off != 0 || end != size {
			return fmt.Errorf("status 200 (whole object) for the partial range bytes=%d-%d", off, end-1)
		}
	default:
		return fmt.Errorf("unexpected status %d", status)
	}
	if cr := aws.ToString(out.ContentRange); cr != "" {
		want := fmt.Sprintf("bytes %d-%d/%d", off, end-1, size)
		if first, last, total, ok := parseContentRange(cr); !ok || first != off || last != end-1 || total != size {
			return fmt.Errorf("Content-Range %q, want %q", cr, want)
		}
	}
	if out.ContentLength != nil && *out.ContentLength >= 0 && *out.ContentLength != end-off {
		return fmt.Errorf("Content-Length %d, want %d", *out.ContentLength, end-off)
	}
	return nil
}

// parseContentRange parses "bytes first-last/total".
func parseContentRange(s string) (first, last, total int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	first, err1 = strconv.ParseInt(a, 10, 64)
	last, err2 = strconv.ParseInt(b, 10, 64)
	total, err3 = strconv.ParseInt(tot, 10, 64)
	return first, last, total, err1 == nil && err2 == nil && err3 == nil
}

// getError maps the error of a GetObject that got no usable response.
func getError(err error, obj Object) error {
	code, status := apiErrorCode(err)
	if code == "PreconditionFailed" || status == http.StatusPreconditionFailed {
		return fmt.Errorf("%w: If-Match %s failed", ErrChanged, obj.ETag)
	}
	if status == http.StatusRequestedRangeNotSatisfiable {
		// Every range asked for lies within the listed size.
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.Response != nil {
			// "bytes */N", where a server sends it: the true size.
			if n, ok := strings.CutPrefix(re.Response.Header.Get("Content-Range"), "bytes */"); ok {
				if total, perr := strconv.ParseInt(n, 10, 64); perr == nil && total != obj.Size {
					return sizeChanged(obj, total)
				}
			}
		}
		return fmt.Errorf("%w: %w", ErrShort, err)
	}
	return classify(err)
}

// sizeChanged is the error of a response showing that the object is not
// of the size it was listed with: not the object the tree shows, as for
// a changed ETag. It is not retried, and a read of it fails with ESTALE.
func sizeChanged(obj Object, total int64) error {
	return fmt.Errorf("%w: the object holds %d bytes, listed as %d", ErrChanged, total, obj.Size)
}

// normETag strips a weak-validator prefix and quotes, so that an ETag
// compares equal however a server chose to format it.
func normETag(e string) string {
	return strings.Trim(strings.TrimPrefix(e, "W/"), `"`)
}

// getAttempts counts and times the HTTP attempts of one GetObject call
// (the first and the SDK's own retries). Every attempt is counted in
// Counters.Gets, every one after the first in Counters.Retries, and every
// one observed once in Counters.GetTime. An attempt that fails before its
// body is timed when it fails; the one whose response GetObject returns
// is left open, for readBody to see its first byte, until end. Not safe
// for concurrent use: the SDK runs one operation's attempts sequentially,
// and getOnce reads the body after they are done.
type getAttempts struct {
	s        *S3Store
	attempts int
	// start is when the open attempt was sent; zero when none is open.
	start time.Time
	// gotByte is set once the open attempt's first body byte is timed.
	gotByte bool
}

// middleware is the stack option that counts and times each attempt.
// It sits just after the retry middleware, so it runs once per attempt,
// around sending it and deserializing its response, but not around
// reading the body, which the caller reads after GetObject returns.
func (a *getAttempts) middleware(st *middleware.Stack) error {
	return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("segfsCountGets",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
			middleware.FinalizeOutput, middleware.Metadata, error) {
			a.attempts++
			a.s.counters.Gets.Add(1)
			if a.attempts > 1 {
				a.s.counters.Retries.Add(1)
			}
			start := time.Now()
			out, md, err := next.HandleFinalize(ctx, in)
			if err != nil {
				a.s.counters.GetTime.Since(start)
				return out, md, err
			}
			a.start, a.gotByte = start, false
			return out, md, err
		}), "Retry", middleware.After)
}

// firstByte times the first body byte of the open attempt.
func (a *getAttempts) firstByte() {
	if a.start.IsZero() || a.gotByte {
		return
	}
	a.gotByte = true
	a.s.counters.GetFirstByte.Since(a.start)
}

// end times the open attempt, if any, as ending now.
func (a *getAttempts) end() {
	if a.start.IsZero() {
		return
	}
	a.s.counters.GetTime.Since(a.start)
	a.start = time.Time{}
}

// backoff returns the jittered delay before the attempt after attempt.
func backoff(attempt int) time.Duration {
	d := retryMaxDelay
	if attempt < 16 {
		d = min(retryBaseDelay<<(attempt-1), retryMaxDelay)
	}
	return d/2 + rand.N(d/2+1)
}

// sleepCtx waits for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
