package harness

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Region is the region the server and every client use.
const Region = "us-east-1"

// Options configure StartServer.
type Options struct {
	// Bin is the versitygw binary. Empty means FindBinaries().Versitygw.
	Bin string
	// Dir is where the server's temporary directory (its storage root and
	// its log) is created. Empty means os.TempDir().
	Dir string
	// ReadyTimeout bounds the wait for the server to answer S3 requests.
	// Zero means 30s.
	ReadyTimeout time.Duration
	// AccessKey and SecretKey, when set, are the root credentials instead
	// of fresh random ones (canary strings, say). Letters and digits only.
	AccessKey, SecretKey string
}

// Server is a versitygw process serving a posix backend from a temporary
// directory on a loopback port. Its methods may be called concurrently.
type Server struct {
	// Immutable after StartServer.
	endpoint  string
	accessKey string
	secretKey string
	dir       string // temporary directory: root/ and versitygw.log
	client    *s3.Client
	proc      *child

	stopOnce sync.Once
	stopErr  error // set inside stopOnce
}

// Pid returns the server process's id.
func (s *Server) Pid() int { return s.proc.cmd.Process.Pid }

// errExitedEarly marks a server that exited before it answered, which a
// port race can cause; StartServer then tries again on another port.
var errExitedEarly = errors.New("versitygw exited before it answered")

// StartServer starts versitygw with fresh random credentials and waits until
// it answers ListBuckets. ctx bounds the start only; the process runs until
// Stop. On error nothing is left running or on disk.
func StartServer(ctx context.Context, opts Options) (*Server, error) {
	bin := opts.Bin
	if bin == "" {
		b, err := FindBinaries()
		if !isExecutable(b.Versitygw) {
			return nil, fmt.Errorf("start server: %w", err)
		}
		bin = b.Versitygw
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	dir, err := os.MkdirTemp(opts.Dir, "segfs-vgw-")
	if err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start server: %w", err)
	}
	const attempts = 3
	for attempt := 1; ; attempt++ {
		s, err := startServerOnce(ctx, bin, dir, opts)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errExitedEarly) || attempt == attempts {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start server: %w", err)
		}
	}
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode().Perm()&0o111 != 0
}

func startServerOnce(ctx context.Context, bin, dir string, opts Options) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		endpoint:  fmt.Sprintf("http://127.0.0.1:%d", port),
		accessKey: opts.AccessKey,
		secretKey: opts.SecretKey,
		dir:       dir,
	}
	if s.accessKey == "" {
		s.accessKey = randomString(20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
	}
	if s.secretKey == "" {
		s.secretKey = randomString(40, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
	}
	s.client = NewClient(s.endpoint, s.accessKey, s.secretKey, 64)
	args := []string{
		"--access", s.accessKey,
		"--secret", s.secretKey,
		"--port", fmt.Sprintf("127.0.0.1:%d", port),
		"--region", Region,
		"--quiet",
		"posix", filepath.Join(dir, "root"),
	}
	s.proc, err = startChild(bin, args, ChildEnv(), filepath.Join(dir, "versitygw.log"), syscall.SIGKILL)
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, opts.ReadyTimeout); err != nil {
		s.proc.kill()
		return nil, err
	}
	return s, nil
}

// waitReady polls ListBuckets until it succeeds, the process exits, or the
// timeout or ctx ends.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	noRetry := func(o *s3.Options) { o.Retryer = aws.NopRetryer{} }
	var lastErr error
	for {
		callCtx, callCancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.client.ListBuckets(callCtx, &s3.ListBucketsInput{}, noRetry)
		callCancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-s.proc.exited:
			return fmt.Errorf("%w (%v); log:\n%s", errExitedEarly, s.proc.exitError(), s.proc.logTail(4096))
		case <-ctx.Done():
			return fmt.Errorf("versitygw at %s not ready after %v: %w (last: %v); log:\n%s",
				s.endpoint, timeout, ctx.Err(), lastErr, s.proc.logTail(4096))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// NewClient returns an S3 client for a loopback endpoint (the server, or
// a proxy in front of it) that reads no configuration from the
// environment or from files and never uses an HTTP proxy. It keeps up to
// idle connections open for reuse, so that a caller running that many
// GETs at once reuses its connections as segfs does.
func NewClient(endpoint, accessKey, secretKey string, idle int) *s3.Client {
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.Proxy = nil
		tr.MaxIdleConns = idle
		tr.MaxIdleConnsPerHost = idle
	})
	return s3.New(s3.Options{
		Region:                     Region,
		Credentials:                credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		BaseEndpoint:               aws.String(endpoint),
		UsePathStyle:               true,
		HTTPClient:                 httpClient,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("harness: crypto/rand: " + err.Error())
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Endpoint is the server's base URL, http://127.0.0.1:PORT.
func (s *Server) Endpoint() string { return s.endpoint }

// AccessKey is the root access key the server accepts.
func (s *Server) AccessKey() string { return s.accessKey }

// SecretKey is the root secret key the server accepts.
func (s *Server) SecretKey() string { return s.secretKey }

// Dir is the server's temporary directory, removed by Stop.
func (s *Server) Dir() string { return s.dir }

// Client is an S3 client for the server (path-style, no checksums unless
// required). It is shared; do not change its options.
func (s *Server) Client() *s3.Client { return s.client }

// Env is the environment a child process needs to reach the server through
// the standard AWS credential chain and nothing else: static keys, the
// region, no instance metadata, and config and credentials files that do not
// exist. Combine it with ChildEnv.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.accessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.secretKey,
		"AWS_REGION=" + Region,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(s.dir, "no-such-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(s.dir, "no-such-aws-credentials"),
	}
}

// LogTail returns about the last max bytes of the server's log.
func (s *Server) LogTail(max int64) string { return s.proc.logTail(max) }

// Stop ends the server (SIGTERM, then SIGKILL after 5s), waits for it and
// removes its temporary directory. It is safe to call more than once and
// returns the same result each time.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.proc.stop(syscall.SIGTERM, 5*time.Second)
		if err := os.RemoveAll(s.dir); err != nil {
			s.stopErr = fmt.Errorf("stop server: %w", err)
		}
	})
	return s.stopErr
}
