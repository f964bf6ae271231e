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
)

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
