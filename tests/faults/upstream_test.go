package faults

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The unit tests run the proxy in front of fakeUpstream: a small S3-like
// server that checks SigV4 signatures the way a real server does (so that
// forwarding and re-signing are tested), serves one bucket of objects with
// Range through http.ServeContent, lists them, and accepts PUTs.

const (
	testAccess = "AKIDFAULTSTEST000001"
	testSecret = "faultsTestSecretKey0000000000000000000000"
	testRegion = "us-east-1"
)

type fakeUpstream struct {
	srv *httptest.Server

	mu      sync.Mutex
	objects map[string][]byte
	badSigs int
	ranges  []string // Range header of each object GET
}

func newUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{objects: map[string][]byte{}}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *fakeUpstream) put(key string, data []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.objects[key] = data
}

func (u *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	if !verifySignature(r) {
		u.mu.Lock()
		u.badSigs++
		u.mu.Unlock()
		http.Error(w, "SignatureDoesNotMatch", http.StatusForbidden)
		return
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if bucket != "bucket" {
		http.Error(w, "NoSuchBucket", http.StatusNotFound)
		return
	}
	switch {
	case key == "" && r.Method == http.MethodGet:
		u.list(w, r)
	case r.Method == http.MethodPut:
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		u.put(key, b.Bytes())
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		u.mu.Lock()
		data, ok := u.objects[key]
		if r.Method == http.MethodGet {
			u.ranges = append(u.ranges, r.Header.Get("Range"))
		}
		u.mu.Unlock()
		if !ok {
			http.Error(w, "NoSuchKey", http.StatusNotFound)
			return
		}
		w.Header().Set("ETag", `"etag-`+key+`"`)
		http.ServeContent(w, r, key, time.Unix(1700000000, 0), bytes.NewReader(data))
	default:
		http.Error(w, "NotImplemented", http.StatusNotImplemented)
	}
}

func (u *fakeUpstream) list(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var b strings.Builder
	b.WriteString(xml.Header + "<ListBucketResult><Name>bucket</Name>")
	for k, v := range u.objects {
		if strings.HasPrefix(k, r.URL.Query().Get("prefix")) {
			// Size before Key, and an empty EncodingType after the
			// objects, as versitygw sends them.
			fmt.Fprintf(&b, "<Contents><Size>%d</Size><Key>%s</Key></Contents>", len(v), xmlEscape(k))
		}
	}
	b.WriteString("<EncodingType></EncodingType></ListBucketResult>")
	w.Header().Set("Content-Type", "application/xml")
	_, _ = w.Write([]byte(b.String()))
}

// verifySignature signs a copy of r again with the same date and the
// headers it says it signed, and compares.
func verifySignature(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	_, signed, ok := strings.Cut(auth, "SignedHeaders=")
	if !ok {
		return false
	}
	signed, _, _ = strings.Cut(signed, ",")
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return false
	}
	c, err := http.NewRequest(r.Method, "http://"+r.Host+r.RequestURI, nil)
	if err != nil {
		return false
	}
	c.Host = r.Host
	for _, h := range strings.Split(signed, ";") {
		if h != "host" {
			c.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	hash := r.Header.Get("X-Amz-Content-Sha256")
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), awsCredentials(testAccess, testSecret), c, hash, "s3", testRegion, when); err != nil {
		return false
	}
	return c.Header.Get("Authorization") == auth
}

// client sends signed requests, as an S3 SDK does.
type client struct {
	t    *testing.T
	base string
	http *http.Client
}

func newClient(t *testing.T, base string) *client {
	tr := &http.Transport{Proxy: nil, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, base: base, http: &http.Client{Transport: tr}}
}

// request builds a signed request for path (with query) and the given
// Range (none if empty).
func (c *client) request(ctx context.Context, method, path, rng string) *http.Request {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(ctx, awsCredentials(testAccess, testSecret), req, emptySHA256, "s3", testRegion, time.Now()); err != nil {
		c.t.Fatal(err)
	}
	return req
}

// do sends a request and reads the whole body; err is the body's error.
func (c *client) do(method, path, rng string) (*http.Response, []byte, error) {
	c.t.Helper()
	resp, err := c.http.Do(c.request(context.Background(), method, path, rng))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp, b.Bytes(), err
}

// setup starts an upstream holding obj under "bucket/obj" and a proxy in
// front of it, closed at the end of the test.
func setup(t *testing.T, seed uint64) (*fakeUpstream, *Proxy, *client, []byte) {
	t.Helper()
	u := newUpstream(t)
	obj := make([]byte, 300<<10)
	rand.NewChaCha8([32]byte{byte(seed)}).Read(obj)
	u.put("obj", obj)
	p, err := New(Config{Upstream: u.srv.URL, Seed: seed, AccessKey: testAccess, SecretKey: testSecret, Region: testRegion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return u, p, newClient(t, p.URL()), obj
}

func mustRules(t *testing.T, p *Proxy, rules ...Rule) {
	t.Helper()
	if err := p.SetRules(rules...); err != nil {
		t.Fatal(err)
	}
}
