package fetcher

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Bounds of the bucket check done by Open: a wrong endpoint or bucket must
// fail within seconds, not after the SDK's full retry schedule.
const (
	openCheckTimeout     = 30 * time.Second
	openCheckAttempts    = 3
	openCheckMaxBackoff  = time.Second
	defaultRegion        = "us-east-1"
	credentialsHint      = "check the AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the instance role) and that they may list the bucket"
	endpointSchemeDetail = "want a URL such as https://host:port"
)

// defaultMaxListKeys bounds the length of a listing (S3Store.List): far
// more keys than a shard holds, yet a bound on the memory a listing (and
// the tree built from it) may take.
const defaultMaxListKeys = 10_000_000

// Errors of a listing the server never ends. Callers test with errors.Is.
var (
	// ErrListCycle reports continuation tokens that repeat.
	ErrListCycle = errors.New("the server's continuation tokens repeat")
	// ErrListTooLong reports a listing longer than segfs accepts.
	ErrListTooLong = errors.New("too many keys")
)

// S3Store is a Store over an S3 bucket, or an S3-compatible service, below
// a key prefix. It is created by Open for s3:// sources. All methods may be
// called concurrently.
type S3Store struct {
	// Immutable after construction.
	client   *s3.Client
	src      Source
	bucket   string
	prefix   string // key prefix including its trailing "/", or ""
	endpoint string // for messages: the configured endpoint or the region
	cfg      Config
	// maxListKeys bounds List: defaultMaxListKeys (tests lower it).
	maxListKeys int

	counters Counters // atomic
}

var _ Store = (*S3Store)(nil)

// openS3 builds the client for src and checks that the bucket can be
// listed with the credentials found by the standard AWS chain.
func openS3(ctx context.Context, src Source, cfg Config) (*S3Store, error) {
	return newS3Store(ctx, src, cfg)
}

// newS3Store is openS3 with extra client options (tests shorten the SDK's
// retry backoff with them).
func newS3Store(ctx context.Context, src Source, cfg Config, optFns ...func(*s3.Options)) (*S3Store, error) {
	cfg = cfg.withDefaults()
	client, awsCfg, err := newS3Client(ctx, src, cfg, optFns...)
	if err != nil {
		return nil, err
	}
	s := &S3Store{
		client:      client,
		src:         src,
		bucket:      src.Bucket,
		endpoint:    cfg.Endpoint,
		cfg:         cfg,
		maxListKeys: defaultMaxListKeys,
	}
	if src.Prefix != "" {
		s.prefix = src.Prefix + "/"
	}
	if s.endpoint == "" {
		s.endpoint = "AWS S3 in " + awsCfg.Region
	}
	if err := s.checkBucket(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// NewS3Client returns an S3 client for src configured as the stores are:
// the standard AWS configuration chain (AWS_CA_BUNDLE honoured), cfg's
// region, endpoint and addressing, checksums only where an operation
// requires them. It checks that the chain yields credentials, not that
// the bucket exists: Open does that. For writers such as segfs push.
func NewS3Client(ctx context.Context, source string, cfg Config) (*s3.Client, error) {
	src, err := ParseSource(source)
	if err != nil {
		return nil, err
	}
	if src.Scheme != "s3" {
		return nil, fmt.Errorf("%s: not an s3:// source", src)
	}
	client, _, err := newS3Client(ctx, src, cfg.withDefaults())
	return client, err
}

func newS3Client(ctx context.Context, src Source, cfg Config, optFns ...func(*s3.Options)) (*s3.Client, aws.Config, error) {
	awsCfg, err := loadAWSConfig(ctx, src, cfg)
	if err != nil {
		return nil, aws.Config{}, err
	}
	opts := append([]func(*s3.Options){func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
	}}, optFns...)
	return s3.NewFromConfig(awsCfg, opts...), awsCfg, nil
}

// loadAWSConfig loads the standard AWS configuration chain for cfg and
// checks that it yields credentials.
func loadAWSConfig(ctx context.Context, src Source, cfg Config) (aws.Config, error) {
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			// Not echoed: a malformed endpoint might hold credentials.
			return aws.Config{}, fmt.Errorf("%s: bad endpoint: %s", src, endpointSchemeDetail)
		}
	}
	// A BuildableClient, not a plain *http.Client: LoadDefaultConfig must
	// be able to add the roots of AWS_CA_BUNDLE to its transport.
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConnsPerHost = cfg.MaxConns
		tr.MaxIdleConns = max(tr.MaxIdleConns, cfg.MaxConns)
		tr.ResponseHeaderTimeout = cfg.IdleTimeout
	})
	loadOpts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		config.WithLogger(sdkLogger{cfg.Logger}),
		// The standard retryer, without its client-wide retry quota: with
		// many parallel part reads a burst of 5xx would drain the quota and
		// fail reads that a retry would have served. Attempts per request
		// stay bounded (3) with jittered backoff.
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.RateLimiter = ratelimit.None
				o.Retryables = append(o.Retryables, retryTruncatedBody{})
			})
		}),
	}
	if cfg.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(cfg.Region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("%s: load AWS config: %w", src, err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = defaultRegion
	}
	if awsCfg.Credentials == nil {
		return awsCfg, nil
	}
	// Every credential error, here and in any later request, comes
	// through the guard: by provider and cause, never the provider's
	// output.
	awsCfg.Credentials = guardCredentials(awsCfg.Credentials)
	cctx, cancel := context.WithTimeout(ctx, openCheckTimeout)
	defer cancel()
	if _, err := awsCfg.Credentials.Retrieve(cctx); err != nil {
		if ctx.Err() != nil {
			return aws.Config{}, fmt.Errorf("%s: %w", src, ctx.Err())
		}
		return aws.Config{}, fmt.Errorf("%s: %w: no usable AWS credentials: %w; %s", src, ErrAccessDenied, err, credentialsHint)
	}
	return awsCfg, nil
}

// retryTruncatedBody makes the SDK retry a request whose response body
// ended before its Content-Length (a LIST answer cut short), as it already
// retries one whose connection was reset: both are transport failures.
// Object bodies are read by ReadRange, which has its own retries; this
// covers the bodies the SDK reads itself.
type retryTruncatedBody struct{}

// IsErrorRetryable implements retry.IsErrorRetryable.
func (retryTruncatedBody) IsErrorRetryable(err error) aws.Ternary {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
}

// checkBucket lists at most one key below the prefix, with a bounded time
// and few attempts, and turns the usual mistakes into clear errors.
func (s *S3Store) checkBucket(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, openCheckTimeout)
	defer cancel()
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), MaxKeys: aws.Int32(1), EncodingType: types.EncodingTypeUrl}
	if s.prefix != "" {
		in.Prefix = aws.String(s.prefix)
	}
	s.counters.Lists.Add(1)
	_, err := s.client.ListObjectsV2(cctx, in, func(o *s3.Options) {
		o.Retryer = retry.AddWithMaxAttempts(
			retry.AddWithMaxBackoffDelay(o.Retryer, openCheckMaxBackoff), openCheckAttempts)
	})
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", s.src, ctx.Err())
	}
	code, status := apiErrorCode(err)
	var sendErr *smithyhttp.RequestSendError
	switch {
	case code == "NoSuchBucket" || (status == http.StatusNotFound && code != "NoSuchKey"):
		return fmt.Errorf("s3://%s: %w", s.bucket, ErrNoBucket)
	case isAuthCode(code) || status == http.StatusForbidden:
		if code == "" {
			code = http.StatusText(status)
		}
		return fmt.Errorf("s3://%s: %w (%s): %s", s.bucket, ErrAccessDenied, code, credentialsHint)
	case errors.As(err, &sendErr) || errors.Is(err, context.DeadlineExceeded):
		cause := err
		var opErr *net.OpError
		if errors.As(err, &opErr) {
			cause = opErr // "dial tcp 127.0.0.1:1: connect: connection refused"
		}
		return fmt.Errorf("%s: cannot reach endpoint %s: %w", s.src, s.endpoint, cause)
	default:
		return fmt.Errorf("%s: checking the bucket at %s: %w", s.src, s.endpoint, err)
	}
}

// List implements Store. It lists every key below the prefix (no
// delimiter), page by page, and counts each page in Counters.Lists.
//
// A listing ends only when the server says so, so List guards against a
// server that never does: a continuation token seen before (a cycle of
// any length) fails the listing at once, and so does a listing longer
// than maxListKeys (keys, with each page that holds none counted as one).
// What a listing costs is therefore bounded by maxListKeys whatever the
// server sends.
func (s *S3Store) List(ctx context.Context) ([]Object, error) {
	// Keys URL encoded: XML cannot carry every byte a key may hold (a
	// NUL), and a listing holding one would not decode at all.
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), EncodingType: types.EncodingTypeUrl}
	if s.prefix != "" {
		in.Prefix = aws.String(s.prefix)
	}
	var objs []Object
	// Digests of the tokens sent so far, to their page number: fixed-size
	// entries however long the server's tokens are.
	seen := map[[sha256.Size]byte]int{}
	listed := 0 // keys, and pages without keys
	for page := 1; ; page++ {
		s.counters.Lists.Add(1)
		out, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("%s: list: %w", s.src, classify(err))
		}
		listed += max(1, len(out.Contents))
		if listed > s.maxListKeys {
			return nil, fmt.Errorf("%s: list: %w: more than %d below the prefix (after %d pages); mount a narrower prefix",
				s.src, ErrListTooLong, s.maxListKeys, page)
		}
		for _, o := range out.Contents {
			full := aws.ToString(o.Key)
			if out.EncodingType == types.EncodingTypeUrl {
				// A server that ignores encoding-type sends no EncodingType.
				if full, err = url.QueryUnescape(full); err != nil {
					return nil, fmt.Errorf("%s: list: page %d: key %q: %w", s.src, page, aws.ToString(o.Key), err)
				}
			}
			key, ok := strings.CutPrefix(full, s.prefix)
			if !ok || key == "" || strings.HasSuffix(key, "/") {
				continue
			}
			objs = append(objs, Object{
				Key:     key,
				Size:    aws.ToInt64(o.Size),
				ETag:    aws.ToString(o.ETag),
				ModTime: aws.ToTime(o.LastModified),
			})
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		next := aws.ToString(out.NextContinuationToken)
		if next == "" {
			return nil, fmt.Errorf("%s: list: page %d is truncated but has no continuation token", s.src, page)
		}
		sum := sha256.Sum256([]byte(next))
		if first, ok := seen[sum]; ok {
			// Not echoed: a token is the server's opaque data.
			return nil, fmt.Errorf("%s: list: %w: page %d returned the continuation token page %d returned, so the listing would never end",
				s.src, ErrListCycle, page, first)
		}
		seen[sum] = page
		in.ContinuationToken = aws.String(next)
	}
	slices.SortFunc(objs, func(a, b Object) int { return strings.Compare(a.Key, b.Key) })
	return objs, nil
}

// Stat implements Store with a HEAD request.
func (s *S3Store) Stat(ctx context.Context, key string) (Object, error) {
	s.counters.Stats.Add(1)
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		return Object{}, fmt.Errorf("s3 stat %s: %w", key, classify(err))
	}
	return Object{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		ETag:    aws.ToString(out.ETag),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

// Counters implements Store.
func (s *S3Store) Counters() *Counters { return &s.counters }

// String implements Store: the source URL, without credentials.
func (s *S3Store) String() string { return s.src.String() }

// apiErrorCode returns the S3 error code and the HTTP status of err, or
// zero values where unknown.
func apiErrorCode(err error) (code string, status int) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		status = hs.HTTPStatusCode()
	}
	return code, status
}

// isAuthCode reports whether an S3 error code means the credentials were
// refused.
func isAuthCode(code string) bool {
	switch code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
		"InvalidToken", "ExpiredToken", "TokenRefreshRequired", "AllAccessDisabled":
		return true
	}
	return false
}

// classify wraps a failed request's error with the sentinel that applies,
// keeping the SDK's error in the chain.
func classify(err error) error {
	code, status := apiErrorCode(err)
	switch {
	case code == "NoSuchBucket":
		return fmt.Errorf("%w: %w", ErrNoBucket, err)
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case isAuthCode(code) || status == http.StatusForbidden:
		return fmt.Errorf("%w: %w", ErrAccessDenied, err)
	}
	return err
}

// sdkLogger routes the SDK's log lines to the configured slog.Logger:
// warnings as warnings, everything else at debug level. The SDK logs no
// request or signing details unless a ClientLogMode asks for them, and
// segfs never sets one.
type sdkLogger struct{ l *slog.Logger }

// Logf implements logging.Logger.
func (s sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if c == logging.Warn {
		level = slog.LevelWarn
	}
	s.l.Log(context.Background(), level, "aws sdk: "+fmt.Sprintf(format, v...))
}
