package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
)

// The layout flags go together or fail with a line saying why.
func TestLayoutFlags(t *testing.T) {
	plain := layoutFlags{Layout: "plain", Shard: -1, Metadata: "newest"}
	os := layoutFlags{Layout: "opensearch", IndexUUID: "u", Shard: 0, Metadata: "newest"}
	for _, tc := range []struct {
		name string
		f    layoutFlags
		err  string // "" for none
	}{
		{"plain", plain, ""},
		{"plain with a shard", func() layoutFlags { f := plain; f.Shard = 2; return f }(), "need --layout opensearch"},
		{"plain with a path type", func() layoutFlags { f := plain; f.PathType = "fixed"; return f }(), "need --layout opensearch"},
		{"opensearch", os, ""},
		{"opensearch without a uuid", func() layoutFlags { f := os; f.IndexUUID = ""; return f }(), "--index-uuid"},
		{"one index of a repository", func() layoutFlags { f := os; f.Shard = -1; return f }(), ""},
		{"a whole repository", func() layoutFlags { f := os; f.Shard, f.IndexUUID = -1, ""; return f }(), ""},
		{"a repository with a path type", func() layoutFlags { f := os; f.Shard, f.PathType = -1, "fixed"; return f }(), "--path-type"},
		{"a repository at a named metadata file", func() layoutFlags { f := os; f.Shard, f.Metadata = -1, "metadata__x"; return f }(), "--metadata"},
		{"bad path type", func() layoutFlags { f := os; f.PathType = "hashed"; return f }(), "--path-type"},
		{"bad hash", func() layoutFlags { f := os; f.HashAlgorithm = "md5"; return f }(), "--hash-algorithm"},
		{"snapshot", layoutFlags{Layout: "snapshot", Index: "logs", Shard: 0, Metadata: "newest", Snapshot: "newest"}, ""},
		{"snapshot without an index", layoutFlags{Layout: "snapshot", Shard: 0, Metadata: "newest"}, "needs --index"},
		{"snapshot without a shard", layoutFlags{Layout: "snapshot", Index: "logs", Shard: -1, Metadata: "newest"}, "--shard"},
		{"snapshot with an index uuid", layoutFlags{Layout: "snapshot", Index: "logs", Shard: 0, IndexUUID: "u", Metadata: "newest"}, "--layout opensearch's"},
		{"plain with an index", func() layoutFlags { f := plain; f.Index = "logs"; return f }(), "need --layout snapshot"},
		{"opensearch with a snapshot", func() layoutFlags { f := os; f.Snapshot = "s1"; return f }(), "need --layout snapshot"},
	} {
		err := tc.f.check()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error about %s", tc.name, err, tc.err)
		}
	}
	o, err := layoutFlags{Layout: "opensearch", IndexUUID: "u", Shard: 1, PathType: "HASHED_INFIX", HashAlgorithm: "fnv_1a_base64"}.opensearch()
	if err != nil || o.PathType != layout.HashedInfix || !o.PathTypeSet || o.HashAlgorithm != layout.FNV1aBase64 || !o.HashSet {
		t.Errorf("opensearch() = %+v, %v", o, err)
	}
	if o, _ := os.opensearch(); o.PathTypeSet || o.HashSet || o.PathType != layout.Fixed || o.HashAlgorithm != layout.FNV1aComposite1 {
		t.Errorf("defaults: %+v", o)
	}
}

// Every command that opens a store parses the store flags alike, and
// storeFlags.config carries each into the fetcher's Config.
func TestStoreFlagsConfig(t *testing.T) {
	flags := []string{"--endpoint", "http://127.0.0.1:7070", "--region", "eu-west-3", "--path-style",
		"--profile", "archive", "--no-sign-request"}
	for _, cmd := range [][]string{
		{"mount", "s3://bucket", "/mnt"},
		{"verify", "s3://bucket"},
		{"push", "/tmp/shard", "s3://bucket"},
		{"restore", "s3://bucket", "/tmp/dest"},
	} {
		var c cli
		p, err := kong.New(&c, kong.Name("segfs"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Parse(append(cmd[:1:1], append(flags, cmd[1:]...)...)); err != nil {
			t.Fatalf("%s: %v", cmd[0], err)
		}
		f := map[string]storeFlags{"mount": c.Mount.storeFlags, "verify": c.Verify.storeFlags, "push": c.Push.storeFlags, "restore": c.Restore.storeFlags}[cmd[0]]
		log := slog.New(slog.DiscardHandler)
		got := f.config(7*time.Second, 12, log)
		want := fetcher.Config{Region: "eu-west-3", Endpoint: "http://127.0.0.1:7070", PathStyle: true,
			Profile: "archive", Anonymous: true, IdleTimeout: 7 * time.Second, MaxConns: 12, Logger: log}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: config = %+v, want %+v", cmd[0], got, want)
		}
	}
	if got := (storeFlags{}).config(0, 0, nil); !reflect.DeepEqual(got, fetcher.Config{}) {
		t.Errorf("no flags: config = %+v, want the zero Config (the fetcher's defaults)", got)
	}
}

// useAWSFiles points the AWS chain at an empty config and credentials
// file, with nothing in the environment and no instance metadata.
func useAWSFiles(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"config", "credentials"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("[default]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} {
		t.Setenv(k, "") // restored at cleanup
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
}

// --profile naming a profile that does not exist fails, naming it.
func TestStoreFlagsUnknownProfile(t *testing.T) {
	useAWSFiles(t)
	f := storeFlags{Endpoint: "http://127.0.0.1:1", PathStyle: true, Region: "us-east-1", Profile: "no-such-profile"}
	_, err := fetcher.Open(t.Context(), "s3://bucket", f.config(0, 0, slog.New(slog.DiscardHandler)))
	if err == nil || !strings.Contains(err.Error(), `AWS profile "no-such-profile"`) {
		t.Errorf("Open = %v, want an error naming the profile", err)
	}
}

// --no-sign-request opens a public bucket with no credentials anywhere,
// its region asked of the service; without it the same open fails for
// want of credentials.
func TestStoreFlagsNoSignRequest(t *testing.T) {
	useAWSFiles(t)
	var signed, heads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			signed.Add(1)
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if r.Method == http.MethodHead {
			heads.Add(1)
			w.Header().Set("X-Amz-Bucket-Region", "eu-west-3")
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bucket</Name><KeyCount>0</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`)
	}))
	defer srv.Close()
	f := storeFlags{Endpoint: srv.URL, PathStyle: true, NoSignRequest: true}
	log := slog.New(slog.DiscardHandler)
	st, err := fetcher.Open(t.Context(), "s3://bucket", f.config(0, 0, log))
	if err != nil {
		t.Fatalf("Open --no-sign-request: %v", err)
	}
	if objs, err := st.List(t.Context()); err != nil || len(objs) != 0 {
		t.Errorf("List = %v, %v", objs, err)
	}
	if signed.Load() != 0 || heads.Load() != 1 {
		t.Errorf("%d signed requests, %d HeadBuckets; want none and one", signed.Load(), heads.Load())
	}
	f.NoSignRequest = false
	if _, err := fetcher.Open(t.Context(), "s3://bucket", f.config(0, 0, log)); !errors.Is(err, fetcher.ErrAccessDenied) {
		t.Errorf("Open without --no-sign-request = %v, want no usable credentials", err)
	}
}
