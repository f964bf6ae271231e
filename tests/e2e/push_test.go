package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/segfs/segfs/tests/harness"
)

// pushShard writes a small shard-like directory: a compressible 3 MiB
// stored-fields file, a 7 MiB random file (a multipart upload), small
// files and an empty one. It returns the files by relative path.
func pushShard(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{
		"seg/_0.fdt":  jsonLines(11, 3<<20+777),
		"seg/_0.doc":  randomBytes(12, 7<<20+3),
		"seg/_0.si":   randomBytes(13, 1234),
		"segments_1":  randomBytes(14, 300),
		"write.lock":  {},
		"seg/_0.tiny": []byte("x"),
	}
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), data)
	}
	return dir, files
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runPush runs segfs push against the shared server and returns its
// stdout and stderr together.
func runPush(t *testing.T, srv *harness.Server, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{"push", "--endpoint", srv.Endpoint(), "--path-style"}, args...)
	cmd := exec.CommandContext(ctx, needSegfs(t), full...)
	cmd.Env = harness.ChildEnv(srv.Env()...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustPush(t *testing.T, srv *harness.Server, args ...string) string {
	t.Helper()
	out, err := runPush(t, srv, args...)
	if err != nil {
		t.Fatalf("segfs push %v: %v\n%s", args, err, out)
	}
	t.Logf("segfs push: %s", strings.TrimSpace(out))
	return out
}

// listETags returns the bucket's keys with their ETags.
func listETags(t *testing.T, srv *harness.Server, bucket string) map[string]string {
	t.Helper()
	out, err := srv.Client().ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, o := range out.Contents {
		m[aws.ToString(o.Key)] = aws.ToString(o.ETag)
	}
	return m
}

func getObject(t *testing.T, srv *harness.Server, bucket, key string) ([]byte, map[string]string) {
	t.Helper()
	out, err := srv.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, out.Metadata
}

func sortedKeys(m map[string]string) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

// checkTree checks that dir holds exactly files, byte-exact.
func checkTree(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	seen := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		want, ok := files[rel]
		if !ok {
			t.Errorf("unexpected file %s in the mount", rel)
			return nil
		}
		seen++
		got, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if len(got) != len(want) || sha256.Sum256(got) != sha256.Sum256(want) {
			t.Errorf("%s: %d bytes, want %d, or contents differ", rel, len(got), len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(files) {
		t.Errorf("mount shows %d files, want %d", seen, len(files))
	}
}

// TestPushS3 pushes a shard, mounts it, pushes it again unchanged, with
// one file changed, and with the compression policy changed.
func TestPushS3(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	dir, files := pushShard(t)
	dest := "s3://" + bucket + "/idx"

	out := mustPush(t, srv, "--compress-min-size", "1MiB", dir, dest)
	if !strings.Contains(out, "5 raw") || !strings.Contains(out, "1 compressed") || !strings.Contains(out, "0 skipped") {
		t.Errorf("first push summary: %s", out)
	}
	etags := listETags(t, srv, bucket)
	wantKeys := []string{"idx/seg/_0.doc", "idx/seg/_0.fdt.zst", "idx/seg/_0.si", "idx/seg/_0.tiny", "idx/segments_1", "idx/write.lock"}
	if got := sortedKeys(etags); !slices.Equal(got, wantKeys) {
		t.Fatalf("keys %v, want %v", got, wantKeys)
	}

	if !strings.Contains(etags["idx/seg/_0.doc"], "-") {
		t.Errorf("the 7 MiB file was not a multipart upload: ETag %s", etags["idx/seg/_0.doc"])
	}

	// The compressed object is readable by the format's reference reader
	// and carries the local file's digest and size.
	obj, meta := getObject(t, srv, bucket, "idx/seg/_0.fdt.zst")
	if got := libDecode(t, obj); !bytes.Equal(got, files["seg/_0.fdt"]) {
		t.Errorf("library decode of _0.fdt.zst: %d bytes, differ from the local file", len(got))
	}
	if len(obj) >= len(files["seg/_0.fdt"])/2 {
		t.Errorf("_0.fdt.zst is %d bytes for %d logical: not compressed", len(obj), len(files["seg/_0.fdt"]))
	}
	sum := sha256.Sum256(files["seg/_0.fdt"])
	if meta["segfs-source-sha256"] != hexString(sum[:]) || meta["segfs-source-size"] != "3146505" {
		t.Errorf("metadata %v", meta)
	}

	m := mountS3(t, srv, "s3://"+bucket+"/idx", "--part-size", "1MiB")
	checkTree(t, m.Dir, files)

	// Unchanged: nothing is uploaded.
	out = mustPush(t, srv, "--compress-min-size", "1MiB", dir, dest)
	if !strings.Contains(out, "0 raw") || !strings.Contains(out, "0 compressed") || !strings.Contains(out, "6 skipped") {
		t.Errorf("second push summary: %s", out)
	}
	if got := listETags(t, srv, bucket); !mapsEqual(got, etags) {
		t.Errorf("objects changed on a push of an unchanged directory:\n%v\n%v", etags, got)
	}

	// One file changed: only it is uploaded.
	files["seg/_0.si"] = randomBytes(99, 1234)
	writeFile(t, filepath.Join(dir, "seg/_0.si"), files["seg/_0.si"])
	out = mustPush(t, srv, "--compress-min-size", "1MiB", dir, dest)
	if !strings.Contains(out, "1 raw") || !strings.Contains(out, "0 compressed") || !strings.Contains(out, "5 skipped") {
		t.Errorf("third push summary: %s", out)
	}
	after := listETags(t, srv, bucket)
	for k, e := range etags {
		if changed := after[k] != e; changed != (k == "idx/seg/_0.si") {
			t.Errorf("%s: changed %v", k, changed)
		}
	}

	// Policy changed: _0.fdt is now raw and its compressed form is gone.
	out = mustPush(t, srv, "--compress-match", "", dir, dest)
	if !strings.Contains(out, "1 raw") || !strings.Contains(out, "1 other forms deleted") {
		t.Errorf("fourth push summary: %s", out)
	}
	after = listETags(t, srv, bucket)
	if _, ok := after["idx/seg/_0.fdt.zst"]; ok {
		t.Error("idx/seg/_0.fdt.zst still there")
	}
	if _, ok := after["idx/seg/_0.fdt"]; !ok {
		t.Error("idx/seg/_0.fdt not uploaded")
	}
	m2 := mountS3(t, srv, "s3://"+bucket+"/idx", "--part-size", "1MiB")
	checkTree(t, m2.Dir, files)
}

// TestPushFile pushes to a file:// destination and mounts it.
func TestPushFile(t *testing.T) {
	srv := needServer(t)
	dir, files := pushShard(t)
	dest := t.TempDir()
	u := (&url.URL{Scheme: "file", Path: dest}).String()
	mustPush(t, srv, "--compress-min-size", "1MiB", dir, u)
	if _, err := os.Stat(filepath.Join(dest, "seg/_0.fdt.zst")); err != nil {
		t.Fatal(err)
	}
	out := mustPush(t, srv, "--compress-min-size", "1MiB", dir, u)
	if !strings.Contains(out, "0 raw") || !strings.Contains(out, "5 skipped") {
		t.Errorf("second push summary: %s", out)
	}
	m := mountFile(t, dest)
	checkTree(t, m.Dir, files)
}

// TestPushErrors checks that user mistakes fail with one clear line and a
// non-zero status.
func TestPushErrors(t *testing.T) {
	srv := needServer(t)
	dir, _ := pushShard(t)
	bucket := newBucket(t, srv)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"missing bucket", []string{dir, "s3://no-such-bucket-here/x"}, "no such bucket"},
		{"missing dir", []string{filepath.Join(dir, "nope"), "s3://" + bucket}, "no such file or directory"},
		{"bad dest", []string{dir, "http://example/x"}, "scheme must be s3:// or file://"},
		{"bad glob", []string{"--compress-match", "[", dir, "s3://" + bucket}, "--compress-match"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runPush(t, srv, c.args...)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("want a non-zero exit, got %v:\n%s", err, out)
			}
			if !containsAny(out, c.want) {
				t.Errorf("output does not say %q:\n%s", c.want, out)
			}
			if n := strings.Count(strings.TrimSpace(out), "\n"); n > 0 {
				t.Errorf("want one line, got %d:\n%s", n+1, out)
			}
		})
	}
	if wrong, err := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, needSegfs(t), "push", "--endpoint", srv.Endpoint(), "--path-style", dir, "s3://"+bucket)
		cmd.Env = harness.ChildEnv(harness.SetEnv(srv.Env(), "AWS_SECRET_ACCESS_KEY", "wrong"+srv.SecretKey())...)
		o, err := cmd.CombinedOutput()
		return string(o), err
	}(); err == nil || !containsAny(wrong, "credential", "access denied") {
		t.Errorf("wrong credentials: err %v, output:\n%s", err, wrong)
	}
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	s := make([]byte, 0, 2*len(b))
	for _, c := range b {
		s = append(s, digits[c>>4], digits[c&15])
	}
	return string(s)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
