package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/segfs/segfs/tests/harness"
)

// TestPushInterruptAbortsUpload sends SIGINT to a `segfs push` in the
// middle of a multipart upload (slowed down by a throttling proxy) and
// checks that it exits with status 130 leaving no object under the key
// and no multipart upload in progress: nothing partial stays stored.
func TestPushInterruptAbortsUpload(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "_0.doc"), randomBytes(21, 48<<20))
	// 4 parts in flight at 4 MB/s each: the 48 MiB upload takes about
	// three seconds, the first 5 MiB part a little over one.
	proxy := startSlowProxy(t, srv.Endpoint(), 4_000_000)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, needSegfs(t), "push", "--endpoint", proxy.Endpoint(), "--path-style",
		"--log-level", "debug", "--compress-match", "", dir, "s3://"+bucket+"/idx")
	cmd.Env = harness.ChildEnv(srv.Env()...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Interrupt once the upload has a part stored: segfs knows the
	// upload's id by then.
	client := srv.Client()
	deadline := time.Now().Add(time.Minute)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no multipart upload with a stored part appeared\n%s", out.String())
		}
		select {
		case err := <-done:
			t.Fatalf("segfs push ended before it could be interrupted: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if uploadHasPart(ctx, t, client, bucket, "idx/_0.doc") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("segfs push still running a minute after SIGINT\n%s", out.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit: %v, want status 130\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "interrupted") || !strings.Contains(out.String(), "aborted multipart upload") {
		t.Errorf("output does not report the interrupt and the abort:\n%s", out.String())
	}

	objs, lerr := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(objs.Contents) != 0 {
		var keys []string
		for _, o := range objs.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		t.Errorf("objects after an interrupted push: %v", keys)
	}
	// Parts that were on the wire at the interrupt can land after the
	// abort and bring the upload back; push rechecks for that. Look now,
	// and again once any part still in the proxy (5 MiB at 4 MB/s) has
	// had time to land.
	for _, wait := range []time.Duration{0, 3 * time.Second} {
		time.Sleep(wait)
		ups, lerr := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
		if lerr != nil {
			t.Fatal(lerr)
		}
		for _, u := range ups.Uploads {
			t.Errorf("multipart upload left in progress %v after exit: key %s id %s", wait, aws.ToString(u.Key), aws.ToString(u.UploadId))
		}
	}
}

// uploadHasPart reports whether key has a multipart upload in progress
// with at least one part stored.
func uploadHasPart(ctx context.Context, t *testing.T, client *s3.Client, bucket, key string) bool {
	t.Helper()
	ups, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ups.Uploads {
		if aws.ToString(u.Key) != key {
			continue
		}
		parts, err := client.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId})
		if err != nil {
			t.Fatal(err)
		}
		if len(parts.Parts) > 0 {
			return true
		}
	}
	return false
}

// TestPushDeleteS3: --delete removes the objects of files deleted
// locally, in both forms, and nothing else; without it they stay.
func TestPushDeleteS3(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	dir, files := pushShard(t)
	dest := "s3://" + bucket + "/idx"
	mustPush(t, srv, "--compress-min-size", "1MiB", dir, dest)
	ctx := context.Background()
	for _, k := range []string{"idx/seg/_9.fdt.zst", "idx/seg/_9.si", "other/keep"} {
		if _, err := srv.PutBytes(ctx, bucket, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "seg/_0.fdt")); err != nil {
		t.Fatal(err)
	}
	delete(files, "seg/_0.fdt")

	out := mustPush(t, srv, "--compress-min-size", "1MiB", dir, dest)
	if got := sortedKeys(listETags(t, srv, bucket)); !slices.Contains(got, "idx/seg/_0.fdt.zst") || !slices.Contains(got, "idx/seg/_9.si") {
		t.Errorf("a push without --delete deleted objects: %v\n%s", got, out)
	}
	out = mustPush(t, srv, "--compress-min-size", "1MiB", "--delete", dir, dest)
	if !strings.Contains(out, "3 without a local file deleted") {
		t.Errorf("summary: %s", out)
	}
	want := []string{"idx/seg/_0.doc", "idx/seg/_0.si", "idx/seg/_0.tiny", "idx/segments_1", "idx/write.lock", "other/keep"}
	if got := sortedKeys(listETags(t, srv, bucket)); !slices.Equal(got, want) {
		t.Errorf("keys after --delete %v, want %v", got, want)
	}
	m := mountS3(t, srv, dest, "--part-size", "1MiB")
	checkTree(t, m.Dir, files)
}
