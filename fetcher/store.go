package fetcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"github.com/segfs/segfs/stats"
)

// Object identifies one remote blob. Objects are immutable for a given
// ETag: two Objects with the same Key and ETag hold the same bytes.
type Object struct {
	// Key is the object's path relative to the store's root (the S3
	// prefix or the local directory), with "/" separators and no
	// leading slash.
	Key string
	// Size is the object's length in bytes.
	Size int64
	// ETag is an opaque identity of the object's content. For S3 it is the
	// ETag the server returned (quotes kept, as sent in If-Match); for a
	// local directory it is derived from inode, size and modification time.
	ETag string
	// ModTime is the object's last modification time.
	ModTime time.Time
}

// Store is a read-only view of a remote store rooted at a prefix.
// All methods may be called concurrently.
type Store interface {
	// List returns every object below the root, recursively, sorted by
	// Key. Keys that end in "/" (directory markers) are not returned.
	List(ctx context.Context) ([]Object, error)
	// Stat returns the current identity of the object at key, or an error
	// wrapping ErrNotFound.
	Stat(ctx context.Context, key string) (Object, error)
	// ReadRange fills p with bytes [off, off+len(p)) of obj. It returns
	// nil only when every byte of p was read from the object whose
	// identity is obj.ETag. If the object changed it returns an error
	// wrapping ErrChanged; if it is gone, one wrapping ErrNotFound. p's
	// contents are unspecified after an error. off+len(p) must not
	// exceed obj.Size.
	ReadRange(ctx context.Context, obj Object, off int64, p []byte) error
	// Counters returns the store's live request counters.
	Counters() *Counters
	// String names the source for logs (never with credentials).
	String() string
}

// ProgressReader is a Store that can tell, while a ReadRange runs, how
// much of p already holds its final bytes. See ReadRangeProgress.
type ProgressReader interface {
	ReadRangeProgress(ctx context.Context, obj Object, off int64, p []byte, progress func(filled int)) error
}

// ReadRangeProgress is store.ReadRange that also calls progress(n)
// (unless progress is nil) whenever the bytes of p[:n] are final: if the
// call succeeds they are what it returns. n only grows. It lets a caller
// work on bytes while they are still in the CPU's cache (the disk cache
// sums each block as it arrives). A store that cannot tell calls progress(len(p)) once,
// after a successful read. progress runs on the caller's goroutine, in
// the middle of the read: it must be quick and must not call the store.
// After an error the bytes of p past the last n reported are
// unspecified, and whatever progress computed over the whole of p must
// be dropped; p[:n] still holds bytes of obj's version (a response
// validated against obj.ETag delivered them), which a caller may have
// served already: a read answered from a range fetch in flight is.
func ReadRangeProgress(ctx context.Context, store Store, obj Object, off int64, p []byte, progress func(filled int)) error {
	if pr, ok := store.(ProgressReader); ok {
		return pr.ReadRangeProgress(ctx, obj, off, p, progress)
	}
	if err := store.ReadRange(ctx, obj, off, p); err != nil {
		return err
	}
	if progress != nil {
		progress(len(p))
	}
	return nil
}

// Sentinel errors. Callers test with errors.Is.
var (
	ErrChanged      = errors.New("object changed")
	ErrNotFound     = errors.New("object not found")
	ErrNoBucket     = errors.New("no such bucket")
	ErrAccessDenied = errors.New("access denied")
	// ErrShort wraps a server's refusal (416) of a range within the
	// listed size: the object is shorter than its listing says. It is
	// not retried.
	ErrShort = errors.New("object shorter than listed")
)

// Counters counts a store's remote requests. The zero value is ready.
type Counters struct {
	Gets       atomic.Int64 `stat:"gets"`        // ranged reads issued (each attempt counts)
	GetBytes   atomic.Int64 `stat:"get_bytes"`   // body bytes received by ranged reads
	Retries    atomic.Int64 `stat:"retries"`     // ranged reads re-requested after a failure
	Lists      atomic.Int64 `stat:"lists"`       // list pages requested
	Stats      atomic.Int64 `stat:"heads"`       // stat (HEAD) requests
	Changed    atomic.Int64 `stat:"changed"`     // reads that found the object changed
	ReadErrors atomic.Int64 `stat:"read_errors"` // ReadRange calls that returned an error

	// Latencies of the ranged reads counted in Gets, from sending the
	// request. GetTime has one observation per attempt, taken when the
	// attempt ends: its body fully read, or the attempt failed, before or
	// after the headers. GetFirstByte has one per attempt that received
	// a body byte (the headers alone do not count), so its count falls
	// short of Gets by the attempts that failed without one.
	GetFirstByte stats.Histogram `stat:"get_first_byte_seconds"` // from sending a ranged GET to its first body byte (each attempt that got one)
	GetTime      stats.Histogram `stat:"get_seconds"`            // from sending a ranged GET to its last body byte or its failure (each attempt)
}

// Config holds the options for opening a store. The zero value is usable;
// zero fields take the documented defaults.
type Config struct {
	// Region is the S3 region. Default: from the AWS config chain, else
	// the bucket's region as the service answers it to a HeadBucket; an
	// S3-compatible service that answers none is taken to be in
	// us-east-1. Naming it saves that request, and is needed where the
	// service cannot be asked.
	Region string
	// Profile is the shared config profile (of ~/.aws/config and
	// ~/.aws/credentials) whose settings and credentials to use; one
	// that does not exist is an error. Default: AWS_PROFILE, else the
	// default profile.
	Profile string
	// Anonymous sends every request unsigned, as a public bucket allows:
	// no credentials are looked for.
	Anonymous bool
	// Endpoint is the base URL of an S3-compatible service. Default: AWS.
	Endpoint string
	// PathStyle selects path-style addressing (bucket in the path).
	PathStyle bool
	// IdleTimeout bounds how long a response body may deliver no bytes
	// before the range is re-requested. It also bounds the wait for
	// response headers (each such timeout is retried by the SDK).
	// Default 30s.
	IdleTimeout time.Duration
	// MaxAttempts bounds the attempts at one range after errors that
	// happen once the response headers arrived (short bodies, resets,
	// stalls, wrong ranges). Default 5.
	MaxAttempts int
	// MaxConns bounds the idle connections kept per host. Default 64.
	MaxConns int
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
	// Counters, when set, are where the store counts its requests,
	// shared with another store (a shard's metadata prefix beside its
	// data, counted as one source). Default: the store's own.
	Counters *Counters
}

func (c Config) withDefaults() Config {
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 64
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Source is a parsed SOURCE argument.
type Source struct {
	Scheme string // "s3" or "file"
	Bucket string // s3 only
	Prefix string // s3: key prefix without leading or trailing "/"; may be ""
	Dir    string // file only: absolute directory path
}

// ParseSource parses s3://bucket[/prefix] or file:///abs/dir.
func ParseSource(s string) (Source, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Source{}, fmt.Errorf("bad source %q: %w", s, err)
	}
	if u.User != nil {
		bare := *u
		bare.User = nil // never echo credentials, not even the key id
		return Source{}, fmt.Errorf("bad source %s: credentials do not belong in SOURCE; they come from the AWS credential chain", &bare)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Source{}, fmt.Errorf("bad source %q: want s3://bucket[/prefix] or file:///absolute/dir", s)
	}
	switch u.Scheme {
	case "s3":
		if u.Host == "" || u.Port() != "" {
			return Source{}, fmt.Errorf("bad source %q: no bucket (want s3://bucket[/prefix])", s)
		}
		return Source{Scheme: "s3", Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}, nil
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return Source{}, fmt.Errorf("bad source %q: want file:///absolute/dir", s)
		}
		if !strings.HasPrefix(u.Path, "/") {
			return Source{}, fmt.Errorf("bad source %q: want file:///absolute/dir", s)
		}
		return Source{Scheme: "file", Dir: path.Clean(u.Path)}, nil
	default:
		return Source{}, fmt.Errorf("bad source %q: scheme must be s3:// or file://", s)
	}
}

// String formats the source as a URL.
func (s Source) String() string {
	if s.Scheme == "file" {
		return "file://" + s.Dir
	}
	if s.Prefix == "" {
		return "s3://" + s.Bucket
	}
	return "s3://" + s.Bucket + "/" + s.Prefix
}

// Open opens the store named by source. For S3 it checks that the bucket
// exists and the credentials are accepted before returning, so that a
// user's mistake surfaces before anything is mounted.
func Open(ctx context.Context, source string, cfg Config) (Store, error) {
	src, err := ParseSource(source)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// Return a nil interface, not a typed nil pointer, on error.
	switch src.Scheme {
	case "s3":
		s, err := openS3(ctx, src, cfg)
		if err != nil {
			return nil, err
		}
		return s, nil
	default:
		d, err := openDir(src, cfg)
		if err != nil {
			return nil, err
		}
		return d, nil
	}
}

// CacheSource names the store for a cache of its objects' bytes: what
// String prints and, for S3, the service it reaches, so that two
// services holding buckets of the same name never share cached parts.
// The service is the endpoint, normalized (scheme and host in lower case,
// no default port, no trailing slash, no user, query or fragment), or
// for AWS itself "aws:" and the region, which fixes the partition a
// bucket name is unique in. A local directory is named by its path. The
// name holds no credentials; logs keep using String.
func CacheSource(s Store) string {
	for {
		w, ok := s.(interface{ Unwrap() Store })
		if !ok {
			break
		}
		s = w.Unwrap() // a store over another (layout's partsStore) names the other's source
	}
	s3s, ok := s.(*S3Store)
	if !ok {
		return s.String()
	}
	if s3s.cfg.Endpoint == "" {
		return s3s.String() + " at aws:" + s3s.client.Options().Region
	}
	u, err := url.Parse(strings.TrimSpace(s3s.cfg.Endpoint))
	if err != nil || u.Host == "" {
		// Open refuses such an endpoint; this only keeps the name
		// total. It drops everything but the text before any "@".
		e := strings.ToLower(strings.TrimSpace(s3s.cfg.Endpoint))
		return s3s.String() + " at " + e[strings.LastIndex(e, "@")+1:]
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" || strings.Contains(host, ":") {
		host = net.JoinHostPort(host, port)
		host = strings.TrimSuffix(host, ":") // an IPv6 host without a port: [::1]
	}
	return s3s.String() + " at " + scheme + "://" + host + strings.TrimRight(u.Path, "/")
}
