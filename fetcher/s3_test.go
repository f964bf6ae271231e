package fetcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/segfs/segfs/tests/leakcheck"
)

// setAWSEnv gives the SDK fake credentials and keeps it away from any real
// configuration, instance metadata and endpoint.
func setAWSEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "no-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-credentials"))
	for _, k := range []string{"AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION"} {
		unsetenv(t, k)
	}
}

// unsetenv unsets k for the duration of the test.
func unsetenv(t *testing.T, k string) {
	t.Setenv(k, "") // restores the old value at cleanup
	if err := os.Unsetenv(k); err != nil {
		t.Fatal(err)
	}
}

// checkGoroutines fails the test if goroutines started during it are still
// running at its end. Call it first, so that its cleanup runs last.
func checkGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { leakcheck.Settle(t, before, 5*time.Second) })
}

// testIdle is the IdleTimeout of tests that make a response stall. Other
// tests use a longer one, so that a loaded machine cannot add retries.
const testIdle = 200 * time.Millisecond

// testConfig is the Config used against a fake: path-style, quiet logs.
func testConfig(f *fakeS3) Config {
	return Config{
		Endpoint:    f.srv.URL,
		PathStyle:   true,
		IdleTimeout: 5 * time.Second,
		MaxAttempts: 3,
		Logger:      slog.New(slog.DiscardHandler),
	}
}

// fastSDKRetries shortens the SDK's backoff so that tests of 5xx retries
// run in milliseconds.
func fastSDKRetries(o *s3.Options) {
	o.Retryer = retry.AddWithMaxBackoffDelay(o.Retryer, 5*time.Millisecond)
}

func openTestS3(t *testing.T, f *fakeS3, prefix string) *S3Store {
	t.Helper()
	return openTestS3Idle(t, f, prefix, 0)
}

// openTestS3Idle opens the fake with the given IdleTimeout (0: default).
func openTestS3Idle(t *testing.T, f *fakeS3, prefix string, idle time.Duration) *S3Store {
	t.Helper()
	setAWSEnv(t)
	src := Source{Scheme: "s3", Bucket: "bucket", Prefix: prefix}
	cfg := testConfig(f)
	if idle > 0 {
		cfg.IdleTimeout = idle
	}
	s, err := newS3Store(t.Context(), src, cfg, fastSDKRetries)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestS3ReadRangeFaults(t *testing.T) {
	const size = 256 << 10
	const off, end = 1000, 200_000
	first := fmt.Sprintf("bytes=%d-%d", off, end-1)
	remainder := func(got int) string { return fmt.Sprintf("bytes=%d-%d", off+got, end-1) }
	tests := []struct {
		name    string
		faults  []fault
		wantErr bool
		gets    int64    // HTTP GET attempts, SDK retries included
		retries int64    // of which re-requests
		ranges  []string // Range headers the server saw
	}{
		{name: "clean", gets: 1, ranges: []string{first}},
		{name: "503 twice", faults: []fault{{kind: fault503}, {kind: fault503}}, gets: 3, retries: 2, ranges: []string{first, first, first}},
		{name: "500 with XML body", faults: []fault{{kind: fault500}}, gets: 2, retries: 1, ranges: []string{first, first}},
		{name: "reset after 1000 bytes", faults: []fault{{kind: faultReset, n: 1000}}, gets: 2, retries: 1, ranges: []string{first, remainder(1000)}},
		{name: "reset before the body", faults: []fault{{kind: faultReset}}, gets: 2, retries: 1, ranges: []string{first, first}},
		{name: "short body", faults: []fault{{kind: faultShort, n: 70_000}}, gets: 2, retries: 1, ranges: []string{first, remainder(70_000)}},
		{name: "stall after headers", faults: []fault{{kind: faultStall, n: 5000}}, gets: 2, retries: 1, ranges: []string{first, remainder(5000)}},
		{name: "stall before the body", faults: []fault{{kind: faultStall}}, gets: 2, retries: 1, ranges: []string{first, first}},
		{name: "stall before the headers", faults: []fault{{kind: faultStallHeaders}}, gets: 2, retries: 1, ranges: []string{first, first}},
		{name: "200 with the whole object", faults: []fault{{kind: faultWhole}}, gets: 2, retries: 1, ranges: []string{first, first}},
		{name: "shifted Content-Range", faults: []fault{{kind: faultShift, n: 1}}, gets: 2, retries: 1, ranges: []string{first, first}},
		{name: "chunked short body", faults: []fault{{kind: faultChunkedShort, n: 3000}}, gets: 2, retries: 1, ranges: []string{first, remainder(3000)}},
		{name: "chunked long body", faults: []fault{{kind: faultChunkedLong, n: 10}}, gets: 2, retries: 1, ranges: []string{first, first}},
		{name: "three faults in a row", faults: []fault{{kind: faultReset, n: 10}, {kind: faultShort, n: 20}, {kind: faultWhole}},
			wantErr: true, gets: 3, retries: 2, ranges: []string{first, remainder(10), remainder(30)}},
		{name: "500 until the SDK gives up", faults: []fault{{kind: fault500}, {kind: fault500}, {kind: fault500}},
			wantErr: true, gets: 3, retries: 2, ranges: []string{first, first, first}},
		{name: "wrong range every time", faults: []fault{{kind: faultShift, n: 7}, {kind: faultShift, n: 7}, {kind: faultShift, n: 7}},
			wantErr: true, gets: 3, retries: 2, ranges: []string{first, first, first}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			f := newFakeS3(t)
			data := randomBytes(size)
			etag := f.put("bucket", "idx/seg.dat", data)
			var idle time.Duration
			for _, ft := range tt.faults {
				if ft.kind == faultStall || ft.kind == faultStallHeaders {
					idle = testIdle
				}
			}
			s := openTestS3Idle(t, f, "idx", idle)
			f.inject(tt.faults...)

			p := make([]byte, end-off)
			obj := Object{Key: "seg.dat", Size: size, ETag: etag}
			// Every byte reported final must be the object's, whatever
			// the faults did to the buffer.
			reported := 0
			err := ReadRangeProgress(t.Context(), s, obj, off, p, func(n int) {
				if n < reported || n > len(p) {
					t.Errorf("progress %d after %d, buffer of %d", n, reported, len(p))
				}
				if !bytes.Equal(p[:n], data[off:off+n]) {
					t.Errorf("progress %d: bytes reported final differ from the object's", n)
				}
				reported = n
			})
			if !tt.wantErr && reported != len(p) {
				t.Errorf("progress reached %d of %d", reported, len(p))
			}
			if tt.wantErr {
				if err == nil {
					t.Fatal("ReadRange succeeded, want an error")
				}
				if errors.Is(err, ErrChanged) || errors.Is(err, ErrNotFound) {
					t.Errorf("err = %v, want neither ErrChanged nor ErrNotFound", err)
				}
				if want := fmt.Sprintf("s3 get seg.dat [%d,%d): ", off, end); !strings.HasPrefix(err.Error(), want) {
					t.Errorf("err = %q, want prefix %q", err, want)
				}
				if bytes.Contains(p, []byte("<Error>")) {
					t.Error("an error body reached the buffer")
				}
			} else {
				if err != nil {
					t.Fatalf("ReadRange: %v", err)
				}
				if !bytes.Equal(p, data[off:end]) {
					t.Fatal("bytes differ from the object")
				}
			}
			c := s.Counters()
			if got := c.Gets.Load(); got != tt.gets {
				t.Errorf("Gets = %d, want %d", got, tt.gets)
			}
			if got := c.Retries.Load(); got != tt.retries {
				t.Errorf("Retries = %d, want %d", got, tt.retries)
			}
			if got, want := c.ReadErrors.Load(), int64(btoi(tt.wantErr)); got != want {
				t.Errorf("ReadErrors = %d, want %d", got, want)
			}
			if got := c.GetBytes.Load(); !tt.wantErr && got < int64(len(p)) {
				t.Errorf("GetBytes = %d, want at least %d", got, len(p))
			}
			if got := f.getRanges(); !equalStrings(got, tt.ranges) {
				t.Errorf("ranges = %q, want %q", got, tt.ranges)
			}
		})
	}
}

func TestS3ReadRangeWholeObject(t *testing.T) {
	checkGoroutines(t)
	f := newFakeS3(t)
	data := randomBytes(5000)
	etag := f.put("bucket", "a", data)
	s := openTestS3(t, f, "")
	f.inject(fault{kind: faultWhole}) // a 200 is a valid answer for the whole object
	p := make([]byte, len(data))
	if err := s.ReadRange(t.Context(), Object{Key: "a", Size: 5000, ETag: etag}, 0, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p, data) || s.Counters().Gets.Load() != 1 {
		t.Fatalf("whole-object read: equal=%v gets=%d", bytes.Equal(p, data), s.Counters().Gets.Load())
	}
}

// TestS3ConnectionReuse checks that successful reads leave their
// connection reusable: a ranged GET must not cost a new connection.
func TestS3ConnectionReuse(t *testing.T) {
	checkGoroutines(t)
	f := newFakeS3(t)
	data := randomBytes(100_000)
	etag := f.put("bucket", "k", data)
	s := openTestS3(t, f, "")
	obj := Object{Key: "k", Size: int64(len(data)), ETag: etag}
	for i := range 20 {
		off := int64(i * 5000)
		p := make([]byte, 5000)
		if i == 19 {
			off, p = 0, make([]byte, len(data)) // whole object
		}
		if err := s.ReadRange(t.Context(), obj, off, p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, data[off:off+int64(len(p))]) {
			t.Fatalf("read %d: bytes differ", i)
		}
	}
	if n := f.conns.Load(); n != 1 {
		t.Errorf("%d connections for sequential reads, want 1", n)
	}
}

// TestS3ConcurrentReads reads random ranges from many goroutines while
// faults hit some of the requests; every read must return exact bytes.
func TestS3ConcurrentReads(t *testing.T) {
	checkGoroutines(t)
	f := newFakeS3(t)
	data := randomBytes(1 << 20)
	etag := f.put("bucket", "k", data)
	s := openTestS3Idle(t, f, "", testIdle)
	f.inject(fault{kind: faultReset, n: 100}, fault{kind: faultShort, n: 10}, fault{kind: fault503},
		fault{kind: faultStall, n: 1}, fault{kind: faultShift, n: 1}, fault{kind: faultChunkedShort})
	obj := Object{Key: "k", Size: int64(len(data)), ETag: etag}
	var wg sync.WaitGroup
	errs := make(chan error, 16*8)
	for g := range 16 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 0))
			for range 8 {
				off := r.Int64N(obj.Size - 1)
				p := make([]byte, 1+r.Int64N(min(obj.Size-off, 200_000)))
				if err := s.ReadRange(t.Context(), obj, off, p); err != nil {
					errs <- err
				} else if !bytes.Equal(p, data[off:off+int64(len(p))]) {
					errs <- fmt.Errorf("[%d,%d): bytes differ", off, off+int64(len(p)))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Each call makes one first attempt; on a loaded machine a slow
	// response may add retries beyond the injected faults.
	c := s.Counters()
	if gets, retries := c.Gets.Load(), c.Retries.Load(); gets-retries != 16*8 || retries < 6 || c.ReadErrors.Load() != 0 {
		t.Errorf("Gets %d Retries %d ReadErrors %d, want Gets-Retries = %d, Retries >= 6, no errors",
			gets, retries, c.ReadErrors.Load(), 16*8)
	}
}

func TestS3ReadRangeChanged(t *testing.T) {
	tests := []struct {
		name    string
		change  func(f *fakeS3) // before the read
		faults  func(f *fakeS3) []fault
		wantErr error
		gets    int64
	}{
		{name: "overwritten", change: func(f *fakeS3) { f.put("bucket", "k", randomBytes(999)) }, wantErr: ErrChanged, gets: 1},
		{name: "deleted", change: func(f *fakeS3) { f.remove("bucket", "k") }, wantErr: ErrNotFound, gets: 1},
		{name: "overwritten between attempts", faults: func(f *fakeS3) []fault {
			return []fault{{kind: faultReset, n: 100, then: func() { f.put("bucket", "k", make([]byte, 4096)) }}}
		}, wantErr: ErrChanged, gets: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			f := newFakeS3(t)
			etag := f.put("bucket", "k", randomBytes(4096))
			s := openTestS3(t, f, "")
			if tt.change != nil {
				tt.change(f)
			}
			if tt.faults != nil {
				f.inject(tt.faults(f)...)
			}
			err := s.ReadRange(t.Context(), Object{Key: "k", Size: 4096, ETag: etag}, 10, make([]byte, 1000))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			c := s.Counters()
			if c.Gets.Load() != tt.gets || c.ReadErrors.Load() != 1 {
				t.Errorf("Gets = %d, ReadErrors = %d; want %d, 1", c.Gets.Load(), c.ReadErrors.Load(), tt.gets)
			}
			if want := int64(btoi(tt.wantErr == ErrChanged)); c.Changed.Load() != want {
				t.Errorf("Changed = %d, want %d", c.Changed.Load(), want)
			}
		})
	}
}

// An object that does not have the size it was listed with is not the
// object the tree shows: its reads fail at once, without retries, with
// ErrChanged when the server tells its true size (a 206 cut short, a 416
// with "bytes */N"), and with ErrShort when a 416 does not.
func TestS3ReadRangeSizeLies(t *testing.T) {
	for _, tc := range []struct {
		name    string
		off     int64
		bare416 bool
		want    error
	}{
		{"within the true size", 10, false, ErrChanged},
		{"past the true size", 8000, false, ErrChanged},
		{"past the true size, no size in the 416", 8000, true, ErrShort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			f := newFakeS3(t)
			f.bare416.Store(tc.bare416)
			etag := f.put("bucket", "k", randomBytes(4096))
			s := openTestS3(t, f, "")
			err := s.ReadRange(t.Context(), Object{Key: "k", Size: 1 << 40, ETag: etag}, tc.off, make([]byte, 1000))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if g := s.Counters().Gets.Load(); g != 1 {
				t.Errorf("%d GETs, want 1: a lying size is not retried", g)
			}
		})
	}
}

func TestS3ReadRangeContextCanceled(t *testing.T) {
	checkGoroutines(t)
	f := newFakeS3(t)
	etag := f.put("bucket", "k", randomBytes(4096))
	setAWSEnv(t)
	cfg := testConfig(f)
	cfg.IdleTimeout = time.Minute // only the context can end the stall
	s, err := newS3Store(t.Context(), Source{Scheme: "s3", Bucket: "bucket"}, cfg, fastSDKRetries)
	if err != nil {
		t.Fatal(err)
	}
	f.inject(fault{kind: faultStall, n: 10})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.ReadRange(ctx, Object{Key: "k", Size: 4096, ETag: etag}, 0, make([]byte, 4096))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("ReadRange took %v after its context ended", d)
	}
	if s.Counters().Gets.Load() != 1 {
		t.Errorf("Gets = %d, want 1 (no retry after the caller gave up)", s.Counters().Gets.Load())
	}
}

func TestS3ReadRangeBadArguments(t *testing.T) {
	f := newFakeS3(t)
	etag := f.put("bucket", "k", randomBytes(100))
	s := openTestS3(t, f, "")
	obj := Object{Key: "k", Size: 100, ETag: etag}
	for _, tc := range []struct {
		name string
		obj  Object
		off  int64
		n    int
	}{
		{"past the end", obj, 90, 11},
		{"negative offset", obj, -1, 10},
		{"no etag", Object{Key: "k", Size: 100}, 0, 10},
	} {
		if err := s.ReadRange(t.Context(), tc.obj, tc.off, make([]byte, tc.n)); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if err := s.ReadRange(t.Context(), obj, 100, nil); err != nil {
		t.Errorf("empty read at the end: %v", err)
	}
	if n := len(f.getRanges()); n != 0 {
		t.Errorf("%d requests sent for invalid or empty reads", n)
	}
}

func TestS3List(t *testing.T) {
	tests := []struct {
		name     string
		prefix   string
		pageSize int
		want     []string
		lists    int64 // pages, the bucket check at Open included
	}{
		{name: "prefix, one page", prefix: "idx", pageSize: 1000, want: []string{"a.txt", "a/b", "a/c/d", "z"}, lists: 2},
		{name: "prefix, pages of 2", prefix: "idx", pageSize: 2, want: []string{"a.txt", "a/b", "a/c/d", "z"}, lists: 1 + 3},
		{name: "nested prefix", prefix: "idx/a", pageSize: 1, want: []string{"b", "c/d"}, lists: 1 + 2},
		{name: "whole bucket", prefix: "", pageSize: 3, want: []string{"idx/a.txt", "idx/a/b", "idx/a/c/d", "idx/z", "idx2/x", "top"}, lists: 1 + 3},
		{name: "empty prefix", prefix: "none", pageSize: 3, lists: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeS3(t)
			etags := map[string]string{}
			for _, k := range []string{"idx/a/b", "idx/a/c/d", "idx/a.txt", "idx/z", "idx/dir/", "idx/", "idx2/x", "top"} {
				etags[k] = f.put("bucket", k, []byte(k))
			}
			s := openTestS3(t, f, tt.prefix)
			f.pageSize = tt.pageSize
			objs, err := s.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range objs {
				keys = append(keys, o.Key)
				full := strings.TrimPrefix(tt.prefix+"/"+o.Key, "/")
				if o.ETag != etags[full] || !strings.HasPrefix(o.ETag, `"`) || o.Size != int64(len(full)) || o.ModTime.IsZero() {
					t.Errorf("object %+v: want ETag %s (quoted), size %d", o, etags[full], len(full))
				}
			}
			if !equalStrings(keys, tt.want) {
				t.Errorf("keys = %q, want %q", keys, tt.want)
			}
			if got := s.Counters().Lists.Load(); got != tt.lists {
				t.Errorf("Lists = %d, want %d", got, tt.lists)
			}
		})
	}
}

func TestS3Stat(t *testing.T) {
	f := newFakeS3(t)
	etag := f.put("bucket", "p/k", randomBytes(1234))
	s := openTestS3(t, f, "p")
	o, err := s.Stat(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if o.Key != "k" || o.Size != 1234 || o.ETag != etag || o.ModTime.IsZero() {
		t.Errorf("Stat = %+v, want key k, size 1234, ETag %s", o, etag)
	}
	if _, err := s.Stat(t.Context(), "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat(missing) = %v, want ErrNotFound", err)
	}
	if got := s.Counters().Stats.Load(); got != 2 {
		t.Errorf("Stats = %d, want 2", got)
	}
}

func TestOpenErrors(t *testing.T) {
	refused := closedPort(t)
	tests := []struct {
		name     string
		source   string
		endpoint string
		key      string
		wantIs   error
		wantText string
	}{
		{name: "no bucket", source: "s3://nobucket/p", wantIs: ErrNoBucket, wantText: "s3://nobucket: no such bucket"},
		{name: "bad key", source: "s3://bucket", key: "AKIDWRONGWRONGWRONG0", wantIs: ErrAccessDenied, wantText: "InvalidAccessKeyId"},
		{name: "refused", source: "s3://bucket", endpoint: "http://" + refused, wantText: "cannot reach endpoint http://" + refused},
		{name: "no credentials", source: "s3://bucket", key: "-", wantIs: ErrAccessDenied, wantText: "no usable AWS credentials"},
		{name: "bad endpoint", source: "s3://bucket", endpoint: "localhost:9000", wantText: "bad endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			f := newFakeS3(t)
			setAWSEnv(t)
			switch tt.key {
			case "":
			case "-":
				unsetenv(t, "AWS_ACCESS_KEY_ID")
				unsetenv(t, "AWS_SECRET_ACCESS_KEY")
			default:
				t.Setenv("AWS_ACCESS_KEY_ID", tt.key)
			}
			cfg := testConfig(f)
			if tt.endpoint != "" {
				cfg.Endpoint = tt.endpoint
			}
			start := time.Now()
			st, err := Open(t.Context(), tt.source, cfg)
			if err == nil || st != nil {
				t.Fatalf("Open = %v, %v; want a nil Store and an error", st, err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("Open took %v to fail", d)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("err = %v, want %v", err, tt.wantIs)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.wantText) {
				t.Errorf("err = %q, want it to contain %q", msg, tt.wantText)
			}
			for _, secret := range []string{testSecretKey, testAccessKey, tt.key} {
				if len(secret) > 1 && strings.Contains(msg, secret) {
					t.Errorf("err %q contains a credential", msg)
				}
			}
		})
	}
}

func TestOpenCABundle(t *testing.T) {
	const bundle = "/etc/ssl/certs/ca-certificates.crt"
	for _, set := range []bool{true, false} {
		t.Run(fmt.Sprintf("AWS_CA_BUNDLE set %v", set), func(t *testing.T) {
			checkGoroutines(t)
			f := newFakeS3(t)
			f.put("bucket", "k", []byte("x"))
			setAWSEnv(t)
			if set {
				if _, err := os.Stat(bundle); err != nil {
					t.Skipf("no CA bundle: %v", err)
				}
				t.Setenv("AWS_CA_BUNDLE", bundle)
			} else {
				unsetenv(t, "AWS_CA_BUNDLE")
			}
			st, err := Open(t.Context(), "s3://bucket", testConfig(f))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			objs, err := st.List(t.Context())
			if err != nil || len(objs) != 1 {
				t.Fatalf("List = %v, %v", objs, err)
			}
			if st.String() != "s3://bucket" {
				t.Errorf("String = %q", st.String())
			}
		})
	}
}

// closedPort returns a loopback address on which nothing listens.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func equalStrings(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || strings.Join(a, "\x00") == strings.Join(b, "\x00"))
}
