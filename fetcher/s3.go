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
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
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
	credentialsHint      = "check the AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or the instance role) and that they may list the bucket"
	anonymousHint        = "unsigned requests were refused: the bucket is not public; sign them with AWS credentials instead"
	endpointSchemeDetail = "want a URL such as https://host:port"
)

// Region discovery, for a configuration that names no region (see
// bucketRegion). The HeadBucket is bounded as the bucket check is, and
// more tightly in time: it is one small request.
const (
	regionTimeout = 10 * time.Second
	// defaultRegion is the region of the HeadBucket that asks for a
	// bucket's region (it picks the AWS partition asked), and the region
	// assumed for an S3-compatible service that names none.
	defaultRegion = "us-east-1"
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

// MaxObjectSize is the largest object S3 stores (5 TiB). A listing may
// still claim more, or less than nothing: such an object is listed as
// claimed, so that it alone fails (its reads, or its restore), not the
// listing; whatever computes from its size must not overflow.
const MaxObjectSize = 5 << 40

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

	counters *Counters // atomic; Config.Counters or its own
}

var _ Store = (*S3Store)(nil)

// openS3 builds the client for src and checks that the bucket can be
// listed with the credentials found by the standard AWS chain (or, with
// Config.Anonymous, with unsigned requests).
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
		counters:    cfg.Counters,
	}
	if s.counters == nil {
		s.counters = new(Counters)
	}
	if src.Prefix != "" {
		// Every request's key starts with the prefix: it is checked as
		// each key below it is.
		if err := checkKey(src.Prefix); err != nil {
			return nil, fmt.Errorf("%s: prefix: %w", src, err)
		}
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
// profile, region (else the bucket's, asked of the service), endpoint,
// addressing and anonymity, checksums only where an operation requires
// them. It checks that the chain yields credentials, not that the bucket
// exists: Open does that. For writers such as segfs push.
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

// newS3Client builds src's client. The returned aws.Config has the region
// the client uses: cfg's, the chain's, or the one bucketRegion found.
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
	if awsCfg.Region == "" {
		region, err := bucketRegion(ctx, src, cfg, awsCfg, opts)
		if err != nil {
			return nil, aws.Config{}, err
		}
		awsCfg.Region = region
	}
	return s3.NewFromConfig(awsCfg, opts...), awsCfg, nil
}

// bucketRegion asks the service for the region of src's bucket, for a
// configuration that names none: an unsigned HeadBucket (the SDK's
// manager.GetBucketRegion), whose response carries the region in its
// x-amz-bucket-region header whatever its status. AWS sends the header
// to a request for the wrong region (301) and to one without a signature
// (403) alike, so credentials and a right guess are not needed. The
// request goes where the store's requests go, through opts: a custom
// endpoint, with its addressing, is asked too.
//
// A response without the header is an answer only from an S3-compatible
// service: many send none and accept any region, so defaultRegion is
// assumed (and logged). From AWS it is an error, as is no response (an
// unreachable endpoint, a server fault after the SDK's retries, the
// timeout): the region cannot be guessed, and a wrong one would fail
// every request.
func bucketRegion(ctx context.Context, src Source, cfg Config, awsCfg aws.Config, opts []func(*s3.Options)) (string, error) {
	hint := awsCfg
	hint.Region = defaultRegion
	client := s3.NewFromConfig(hint, opts...)
	// The endpoint the client resolved: cfg's, or one the AWS config
	// chain names (AWS_ENDPOINT_URL_S3). Only cfg's is echoed: Open
	// checked that it holds no credentials.
	custom := client.Options().BaseEndpoint != nil
	where := "AWS S3"
	switch {
	case cfg.Endpoint != "":
		where = cfg.Endpoint
	case custom:
		where = "the endpoint of the AWS config"
	}
	cctx, cancel := context.WithTimeout(ctx, regionTimeout)
	defer cancel()
	region, err := manager.GetBucketRegion(cctx, client, src.Bucket, func(o *s3.Options) {
		o.Retryer = retry.AddWithMaxAttempts(
			retry.AddWithMaxBackoffDelay(o.Retryer, openCheckMaxBackoff), openCheckAttempts)
	})
	if region != "" {
		cfg.Logger.Info("fetcher: the service names the bucket's region", "source", src.String(), "endpoint", where, "region", region)
		return region, nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("%s: %w", src, ctx.Err())
	}
	var notFound manager.BucketNotFound
	_, status := apiErrorCode(err)
	// An answer: a success, a client error or a refusal of HeadBucket
	// itself; not a server fault or throttling, which say nothing.
	answered := err == nil || errors.As(err, &notFound) ||
		(status >= 200 && status < 500 && status != http.StatusTooManyRequests) || status == http.StatusNotImplemented
	if custom && answered {
		cfg.Logger.Info("fetcher: the service names no region for the bucket; assuming "+defaultRegion,
			"source", src.String(), "endpoint", where, "region", defaultRegion)
		return defaultRegion, nil
	}
	var opErr *net.OpError
	switch {
	case errors.As(err, &notFound):
		err = ErrNoBucket
	case errors.As(err, &opErr):
		err = opErr // "dial tcp 127.0.0.1:1: connect: connection refused"
	case err == nil:
		err = errors.New("its answer names no region")
	}
	return "", fmt.Errorf("%s: cannot find the region of bucket %s (HeadBucket at %s): %w; pass --region",
		src, src.Bucket, where, err)
}

// loadAWSConfig loads the standard AWS configuration chain for cfg (its
// profile, else AWS_PROFILE's, else the default one) and checks that it
// yields credentials, unless cfg.Anonymous. The region is left empty
// when neither cfg nor the chain names one.
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
	if cfg.Profile != "" {
		loadOpts = append(loadOpts, config.WithSharedConfigProfile(cfg.Profile))
	}
	if cfg.Anonymous {
		// The S3 client sends requests unsigned with these; the chain's
		// providers are not consulted.
		loadOpts = append(loadOpts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		var noProfile config.SharedConfigProfileNotExistError
		if errors.As(err, &noProfile) {
			// Named by cfg.Profile or AWS_PROFILE: the SDK fails only
			// for a profile asked for, not for a missing default one.
			return aws.Config{}, fmt.Errorf("%s: AWS profile %q is in neither %s nor %s: %w",
				src, noProfile.Profile, sharedFile("AWS_CONFIG_FILE", config.DefaultSharedConfigFilename()),
				sharedFile("AWS_SHARED_CREDENTIALS_FILE", config.DefaultSharedCredentialsFilename()), err)
		}
		return aws.Config{}, fmt.Errorf("%s: load AWS config: %w", src, err)
	}
	if awsCfg.Credentials == nil || cfg.Anonymous {
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

// sharedFile is the shared config or credentials file the SDK reads:
// the one env names, else def.
func sharedFile(env, def string) string {
	if f := os.Getenv(env); f != "" {
		return f
	}
	return def
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
		hint := credentialsHint
		if s.cfg.Anonymous {
			hint = anonymousHint
		}
		return fmt.Errorf("s3://%s: %w (%s): %s", s.bucket, ErrAccessDenied, code, hint)
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

// Stat implements Store with a HEAD request. A key that is not a clean
// relative path (checkKey) is refused without one, with an error
// wrapping ErrBadKey and ErrNotFound.
func (s *S3Store) Stat(ctx context.Context, key string) (Object, error) {
	if err := checkKey(key); err != nil {
		return Object{}, fmt.Errorf("s3 stat: %w", err)
	}
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
func (s *S3Store) Counters() *Counters { return s.counters }

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
