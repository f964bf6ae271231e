package fetcher

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
)

// frontServer is a server in front of a fakeS3 that answers the bucket's
// HeadBucket with head (when set) and passes every other request on,
// recording the Authorization header of each.
type frontServer struct {
	srv *httptest.Server

	mu    sync.Mutex
	auths []string // Authorization headers of the requests passed on, in order
	heads int      // HeadBucket requests answered by head
}

func newFrontServer(t *testing.T, f *fakeS3, head http.HandlerFunc, pass http.HandlerFunc) *frontServer {
	fs := &frontServer{}
	if pass == nil {
		pass = f.serve
	}
	fs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if head != nil && r.Method == http.MethodHead && strings.Trim(r.URL.Path, "/") == "bucket" {
			fs.mu.Lock()
			fs.heads++
			fs.mu.Unlock()
			if r.Header.Get("Authorization") != "" {
				http.Error(w, "a HeadBucket for the region must not be signed", http.StatusBadRequest)
				return
			}
			head(w, r)
			return
		}
		fs.mu.Lock()
		fs.auths = append(fs.auths, r.Header.Get("Authorization"))
		fs.mu.Unlock()
		pass(w, r)
	}))
	t.Cleanup(fs.srv.Close)
	return fs
}

// scopes returns the credential scope region of each request passed on
// ("" for an unsigned one).
func (fs *frontServer) scopes() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []string
	for _, a := range fs.auths {
		_, cred, _ := strings.Cut(a, "Credential=")
		parts := strings.Split(cred, "/") // key/date/region/service/aws4_request
		region := ""
		if len(parts) >= 3 {
			region = parts[2]
		}
		out = append(out, region)
	}
	return out
}

// awsLike routes the client's requests to srv (path style) by endpoint
// rules, as for AWS itself: no BaseEndpoint is set, so the store treats
// the service as AWS.
type awsLike struct{ srv *httptest.Server }

func (a awsLike) ResolveEndpoint(_ context.Context, p s3.EndpointParameters) (smithyendpoints.Endpoint, error) {
	u, err := url.Parse(a.srv.URL)
	if err != nil {
		return smithyendpoints.Endpoint{}, err
	}
	if p.Bucket != nil {
		u.Path = "/" + *p.Bucket
	}
	return smithyendpoints.Endpoint{URI: *u}, nil
}

func headWith(status int, region string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if region != "" {
			w.Header().Set("X-Amz-Bucket-Region", region)
		}
		w.WriteHeader(status)
	}
}

// With no region from Config or the AWS config chain, the store asks the
// service for the bucket's region and signs with the answer. An
// S3-compatible service that names none is taken to be in us-east-1;
// AWS must name one.
func TestOpenRegionDiscovery(t *testing.T) {
	tests := []struct {
		name       string
		head       http.HandlerFunc // nil: the fake's own answer (403, unsigned, no region)
		aws        bool             // route as AWS, not a custom endpoint
		wantRegion string
		wantErr    string
		wantIs     error
	}{
		{name: "403 names the region", head: headWith(http.StatusForbidden, "eu-west-3"), wantRegion: "eu-west-3"},
		{name: "200 names the region", head: headWith(http.StatusOK, "eu-west-3"), wantRegion: "eu-west-3"},
		{name: "no region from the fake", wantRegion: "us-east-1"},
		{name: "200 without a region", head: headWith(http.StatusOK, ""), wantRegion: "us-east-1"},
		{name: "404 without a region", head: headWith(http.StatusNotFound, ""), wantRegion: "us-east-1"},
		{name: "HeadBucket fails", head: headWith(http.StatusInternalServerError, ""),
			wantErr: "s3://bucket: cannot find the region of bucket bucket (HeadBucket at http://127.0.0.1:"},
		{name: "AWS redirect names the region", aws: true, head: headWith(http.StatusMovedPermanently, "ap-south-1"), wantRegion: "ap-south-1"},
		{name: "AWS names no region", aws: true, head: headWith(http.StatusOK, ""),
			wantErr: "cannot find the region of bucket bucket (HeadBucket at AWS S3): its answer names no region; pass --region"},
		{name: "AWS has no such bucket", aws: true, head: headWith(http.StatusNotFound, ""), wantIs: ErrNoBucket,
			wantErr: "cannot find the region of bucket bucket (HeadBucket at AWS S3): no such bucket; pass --region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			f := newFakeS3(t)
			setAWSEnv(t)
			unsetenv(t, "AWS_REGION")
			front := newFrontServer(t, f, tt.head, nil)
			cfg := testConfig(f)
			cfg.Endpoint = front.srv.URL
			optFns := []func(*s3.Options){fastSDKRetries}
			if tt.aws {
				cfg.Endpoint = ""
				optFns = append(optFns, func(o *s3.Options) { o.EndpointResolverV2 = awsLike{front.srv} })
			}
			s, err := newS3Store(t.Context(), Source{Scheme: "s3", Bucket: "bucket"}, cfg, optFns...)
			if tt.wantErr != "" || tt.wantIs != nil {
				if err == nil {
					t.Fatalf("open succeeded in %s; want an error", s.client.Options().Region)
				}
				t.Logf("open: %v", err)
				if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "pass --region") {
					t.Errorf("err = %q, want it to say %q and pass --region", err, tt.wantErr)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("err = %v, want %v", err, tt.wantIs)
				}
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if got := s.client.Options().Region; got != tt.wantRegion {
				t.Errorf("region %q, want %q", got, tt.wantRegion)
			}
			if tt.head != nil && front.heads == 0 {
				t.Error("the service was not asked")
			}
			// The bucket check was signed for the region found.
			if sc := front.scopes(); len(sc) == 0 || sc[len(sc)-1] != tt.wantRegion {
				t.Errorf("signing regions %q, want the last %q", sc, tt.wantRegion)
			}
		})
	}

	t.Run("a region given is not asked about", func(t *testing.T) {
		f := newFakeS3(t)
		setAWSEnv(t)
		unsetenv(t, "AWS_REGION")
		front := newFrontServer(t, f, headWith(http.StatusOK, "eu-west-3"), nil)
		cfg := testConfig(f)
		cfg.Endpoint, cfg.Region = front.srv.URL, "eu-central-1"
		s, err := newS3Store(t.Context(), Source{Scheme: "s3", Bucket: "bucket"}, cfg, fastSDKRetries)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.client.Options().Region; got != "eu-central-1" || front.heads != 0 {
			t.Errorf("region %q after %d HeadBuckets, want eu-central-1 after none", got, front.heads)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		setAWSEnv(t)
		unsetenv(t, "AWS_REGION")
		addr := closedPort(t)
		_, err := Open(t.Context(), "s3://bucket", Config{Endpoint: "http://" + addr, PathStyle: true})
		if err == nil || !strings.Contains(err.Error(), "cannot find the region of bucket bucket (HeadBucket at http://"+addr+"): dial tcp") {
			t.Errorf("err = %v, want a failed HeadBucket", err)
		}
	})

	t.Run("bounded by ctx", func(t *testing.T) {
		checkGoroutines(t)
		f := newFakeS3(t)
		setAWSEnv(t)
		unsetenv(t, "AWS_REGION")
		front := newFrontServer(t, f, func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // never answers
		}, nil)
		cfg := testConfig(f)
		cfg.Endpoint = front.srv.URL
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := Open(ctx, "s3://bucket", cfg)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want a deadline", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("open took %v", d)
		}
	})
}

// writeAWSFiles writes a shared config and credentials file and points
// the SDK at them, with no credentials in the environment.
func writeAWSFiles(t *testing.T, config, creds string) {
	t.Helper()
	setAWSEnv(t)
	unsetenv(t, "AWS_ACCESS_KEY_ID")
	unsetenv(t, "AWS_SECRET_ACCESS_KEY")
	unsetenv(t, "AWS_REGION")
	dir := t.TempDir()
	for name, text := range map[string]string{"config": config, "credentials": creds} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
}

// Config.Profile picks a profile's credentials and region; a profile
// that does not exist fails naming it, whether Config or AWS_PROFILE
// names it.
func TestOpenProfile(t *testing.T) {
	const config = "[default]\nregion = us-west-1\n[profile segfs-test]\nregion = eu-north-1\n"
	const creds = "[segfs-test]\naws_access_key_id = " + testAccessKey + "\naws_secret_access_key = " + testSecretKey + "\n"

	t.Run("exists", func(t *testing.T) {
		checkGoroutines(t)
		f := newFakeS3(t)
		writeAWSFiles(t, config, creds)
		cfg := testConfig(f)
		cfg.Profile = "segfs-test"
		s, err := newS3Store(t.Context(), Source{Scheme: "s3", Bucket: "bucket"}, cfg, fastSDKRetries)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if got := s.client.Options().Region; got != "eu-north-1" {
			t.Errorf("region %q, want the profile's eu-north-1", got)
		}
	})

	for _, viaEnv := range []bool{false, true} {
		name := "missing in Config"
		if viaEnv {
			name = "missing in AWS_PROFILE"
		}
		t.Run(name, func(t *testing.T) {
			f := newFakeS3(t)
			writeAWSFiles(t, config, creds)
			cfg := testConfig(f)
			if viaEnv {
				t.Setenv("AWS_PROFILE", "no-such-profile")
			} else {
				cfg.Profile = "no-such-profile"
			}
			st, err := Open(t.Context(), "s3://bucket", cfg)
			if err == nil {
				t.Fatalf("Open = %v, nil; want an error", st)
			}
			t.Logf("Open: %v", err)
			want := `s3://bucket: AWS profile "no-such-profile" is in neither ` + os.Getenv("AWS_CONFIG_FILE") +
				" nor " + os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
			if !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to say %q", err, want)
			}
		})
	}
}

// Config.Anonymous sends unsigned requests and needs no credentials,
// for Open as for NewS3Client.
func TestOpenAnonymous(t *testing.T) {
	checkGoroutines(t)
	f := newFakeS3(t)
	data := []byte("public bytes")
	etag := f.put("bucket", "k", data)
	writeAWSFiles(t, "", "")
	t.Setenv("AWS_REGION", "us-east-1")
	// A public bucket: unsigned requests are served (as the fake serves
	// its own key's), signed ones refused.
	public := newFrontServer(t, f, nil, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			writeError(w, r, http.StatusBadRequest, "InvalidRequest", "this bucket takes unsigned requests only")
			return
		}
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+testAccessKey+"/")
		f.serve(w, r)
	})
	cfg := testConfig(f)
	cfg.Endpoint = public.srv.URL

	if _, err := Open(t.Context(), "s3://bucket", cfg); err == nil || !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("Open without credentials, signed = %v; want no usable credentials", err)
	}
	cfg.Anonymous = true
	st, err := Open(t.Context(), "s3://bucket", cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	objs, err := st.List(t.Context())
	if err != nil || len(objs) != 1 {
		t.Fatalf("List = %v, %v", objs, err)
	}
	p := make([]byte, len(data))
	if err := st.ReadRange(t.Context(), Object{Key: "k", Size: int64(len(data)), ETag: etag}, 0, p); err != nil || string(p) != string(data) {
		t.Fatalf("ReadRange = %q, %v", p, err)
	}
	for i, sc := range public.scopes() {
		if sc != "" {
			t.Errorf("request %d signed for %q", i, sc)
		}
	}
	if _, err := NewS3Client(t.Context(), "s3://bucket", cfg); err != nil {
		t.Errorf("NewS3Client: %v", err)
	}

	// A bucket that is not public says so, not that credentials are wrong.
	cfg.Endpoint = f.srv.URL
	_, err = Open(t.Context(), "s3://bucket", cfg)
	if err == nil || !errors.Is(err, ErrAccessDenied) || !strings.Contains(err.Error(), anonymousHint) {
		t.Errorf("Open of a private bucket, unsigned = %v; want access denied with %q", err, anonymousHint)
	}
}
