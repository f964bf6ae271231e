package harness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/segfs/segfs/tests/shard"
)

func TestChildEnvDropsAWSSettings(t *testing.T) {
	t.Setenv("AWS_PROFILE", "real")
	t.Setenv("VGW_PORT", ":1")
	env := ChildEnv("AWS_REGION=us-east-1")
	for _, kv := range env {
		if kv == "AWS_PROFILE=real" || kv == "VGW_PORT=:1" {
			t.Errorf("ChildEnv kept %s", kv)
		}
	}
	if env[len(env)-1] != "AWS_REGION=us-east-1" {
		t.Errorf("extra not appended last: %v", env[len(env)-1])
	}
	env = SetEnv([]string{"A=1", "B=2"}, "A", "3")
	if len(env) != 2 || env[1] != "A=3" {
		t.Errorf("SetEnv = %v", env)
	}
}

// TestServer runs versitygw and checks what the harness and segfs rely on:
// uploads, ranged reads, and If-Match failing once an object changes.
func TestServer(t *testing.T) {
	b := RequireVersitygw(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := StartServerT(t, Options{Bin: b.Versitygw, Dir: t.TempDir()})
	if err := s.CreateBucket(ctx, "harness"); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	m, err := shard.Generate(dir, shard.Spec{Seed: 1, Scale: 4 << 20, Segments: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UploadFiles(ctx, "harness", "idx/0", dir, m.Names()); err != nil {
		t.Fatal(err)
	}
	list, err := s.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("harness"), Prefix: aws.String("idx/0/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Contents) != len(m.Files) {
		t.Fatalf("listed %d objects, uploaded %d", len(list.Contents), len(m.Files))
	}
	f := m.Largest()
	want, err := os.ReadFile(filepath.Join(dir, f.Name))
	if err != nil {
		t.Fatal(err)
	}
	got := getRange(ctx, t, s, "idx/0/"+f.Name, "bytes=100-4195", "")
	if !bytes.Equal(got, want[100:4196]) {
		t.Errorf("ranged GET returned other bytes")
	}

	etag, err := s.PutBytes(ctx, "harness", "obj", []byte("old bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if got := getRange(ctx, t, s, "obj", "bytes=0-2", etag); string(got) != "old" {
		t.Errorf("GET with matching If-Match = %q", got)
	}
	if _, err := s.PutBytes(ctx, "harness", "obj", []byte("new bytes")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("harness"), Key: aws.String("obj"), IfMatch: aws.String(etag)})
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "PreconditionFailed" {
		t.Errorf("GET with a stale If-Match: %v, want PreconditionFailed", err)
	}

	for _, kv := range s.Env() {
		if kv == "AWS_SECRET_ACCESS_KEY="+s.SecretKey() {
			return
		}
	}
	t.Errorf("Env lacks the secret key: %v", s.Env())
}

func getRange(ctx context.Context, t *testing.T, s *Server, key, rng, ifMatch string) []byte {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String("harness"), Key: aws.String(key), Range: aws.String(rng)}
	if ifMatch != "" {
		in.IfMatch = aws.String(ifMatch)
	}
	out, err := s.Client().GetObject(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStopRemovesEverything(t *testing.T) {
	b := RequireVersitygw(t)
	s, err := StartServer(context.Background(), Options{Bin: b.Versitygw, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("server dir still there: %v", err)
	}
	if _, err := s.Client().ListBuckets(context.Background(), &s3.ListBucketsInput{}, func(o *s3.Options) { o.Retryer = aws.NopRetryer{} }); err == nil {
		t.Errorf("server still answers after Stop")
	}
}

func TestStartMountReportsMissingBinary(t *testing.T) {
	_, err := StartMount(context.Background(), MountOptions{Bin: filepath.Join(t.TempDir(), "nope"), Source: "file:///tmp", TempDir: t.TempDir()})
	if err == nil {
		t.Fatal("StartMount with a missing binary succeeded")
	}
}

// TestMountLifecycle mounts a local directory through segfs and checks
// what the harness promises: the mount is there when StartMount returns,
// Stats answers, Unmount is clean and repeatable, and nothing is left.
func TestMountLifecycle(t *testing.T) {
	b := RequireSegfs(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	m, err := StartMount(context.Background(), MountOptions{Bin: b.Segfs, Source: "file://" + src, TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := IsMounted(m.Dir); !ok || err != nil {
		t.Fatalf("IsMounted(%s) = %v, %v after StartMount", m.Dir, ok, err)
	}
	if got, err := os.ReadFile(filepath.Join(m.Dir, "f")); err != nil || string(got) != "hello" {
		t.Errorf("read through the mount: %q, %v", got, err)
	}
	st, err := m.Stats(context.Background())
	if err != nil {
		t.Error(err)
	} else if _, ok := st["reads"]; !ok {
		t.Errorf("stats lack reads: %v", st)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmount(); err != nil {
		t.Errorf("second Unmount: %v", err)
	}
	if ok, _ := IsMounted(m.Dir); ok {
		t.Errorf("%s still mounted", m.Dir)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left behind in TempDir: %v", ents)
	}
}

// TestMountKill checks that Kill detaches the mount a killed segfs leaves.
func TestMountKill(t *testing.T) {
	b := RequireSegfs(t)
	m, err := StartMount(context.Background(), MountOptions{Bin: b.Segfs, Source: "file://" + t.TempDir(), TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := IsMounted(m.Dir); ok {
		t.Errorf("%s still mounted after Kill", m.Dir)
	}
	if m.Log() == "" {
		t.Log("segfs wrote nothing before it was killed")
	}
}

// TestStartMountExitError checks that a segfs that refuses to mount yields
// an *ExitError carrying its output.
func TestStartMountExitError(t *testing.T) {
	b := RequireSegfs(t)
	_, err := StartMount(context.Background(), MountOptions{Bin: b.Segfs, Source: "bogus://x", TempDir: t.TempDir()})
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code == 0 || exit.Log == "" {
		t.Fatalf("StartMount = %v; want an *ExitError with a non-zero code and output", err)
	}
}

// TestMountCrash checks that Crash leaves a dead mount behind and that a
// mount with OverDeadMount on the same directory replaces it.
func TestMountCrash(t *testing.T) {
	b := RequireSegfs(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := MountOptions{Bin: b.Segfs, Source: "file://" + src, TempDir: t.TempDir(), Dir: dir}
	m, err := StartMount(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Crash(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of the crashed mount: %v, want ENOTCONN", err)
	}
	if err := m.Unmount(); err != nil {
		t.Errorf("Unmount after Crash: %v", err)
	}
	if _, err := StartMount(context.Background(), opts); err == nil {
		t.Fatal("StartMount over a dead mount without OverDeadMount succeeded")
	}
	opts.OverDeadMount = true
	m2, err := StartMount(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Unmount()
	if got, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(got) != "hello" {
		t.Errorf("read through the new mount: %q, %v", got, err)
	}
}
