package reliability

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
)

// canary returns prefix followed by random letters and digits, n bytes in
// all: a string that appears nowhere unless something copied it.
func canary(prefix string, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n-len(prefix))
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b)
}

// TestPlan25CanaryCredentials runs segfs with canary credentials, debug
// logging and every FUSE request logged, through a remote that fails in
// every way the proxy knows, and a second time with a wrong canary secret.
// Then it runs segfs mount and segfs push with a credential_process that
// prints malformed JSON holding the canary credentials: both must refuse,
// naming the provider. Neither secret may appear in segfs's output, its
// error messages, its metrics and profiles, or its cache; nor may the
// access key id. Profiles are served only on --pprof-addr, never on
// --metrics-addr.
func TestPlan25CanaryCredentials(t *testing.T) {
	t.Parallel()
	harness.SkipOrFail(t, binsError)
	access, secret := canary("CANARYKEYID", 20), canary("CANARYSECRET", 40)
	wrong := canary("CANARYWRONGSECRET", 40)
	srv := harness.StartServerT(t, harness.Options{Bin: binaries.Versitygw, Dir: t.TempDir(), AccessKey: access, SecretKey: secret})
	objs := bodyObjects(2500)
	objs["seg/broken.fdt"] = randomBytes(2503, 300<<10)
	e := newEnv(t, srv, 25, objs)
	dir := cacheDir(t)
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", port)
	m := e.mount(t, dir, "--part-size", bodyPartSize, "--prefetch", "open", "--debug", "--log-level", "debug", "--idle-timeout", "1s",
		"--pprof-addr", pprofAddr)
	e.rules(
		faults.Rule{Key: "seg/broken.fdt", Fault: faults.InternalError},
		faults.Rule{Fault: faults.SlowDown, Prob: 0.2, Times: 1, PerRequest: true},
		faults.Rule{Fault: faults.Reset, Bytes: -1, Prob: 0.15},
		faults.Rule{Fault: faults.ShiftRange, Bytes: -1, Prob: 0.1},
		faults.Rule{Fault: faults.ErrorBody200, Prob: 0.1},
		faults.Rule{Fault: faults.Stall, Bytes: -1, Prob: 0.05},
	)
	var evidence []string // every text segfs produced
	for _, key := range sortedKeys(objs) {
		b, err := os.ReadFile(filepath.Join(m.Dir, key))
		if err != nil {
			evidence = append(evidence, err.Error())
		} else if !bytes.Equal(b, objs[key]) {
			t.Errorf("%s: other bytes", key)
		}
	}
	if _, err := os.ReadFile(filepath.Join(m.Dir, "seg/broken.fdt")); err == nil {
		t.Errorf("the always-failing object read without error")
	}
	harness.WaitIdle(t, m)
	evidence = append(evidence, httpGet(t, "http://"+m.MetricsAddr()+"/stats"))
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=2", "/debug/pprof/heap?debug=1"} {
		evidence = append(evidence, httpGet(t, "http://"+pprofAddr+path))
		if code, _ := httpDo(t, "http://"+m.MetricsAddr()+path); code != http.StatusNotFound {
			t.Errorf("GET %s on --metrics-addr: status %d, want 404 (profiles only on --pprof-addr)", path, code)
		}
	}
	evidence = append(evidence, mountinfo(t))
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	logText := m.Log()
	evidence = append(evidence, logText)

	// The same with a wrong secret: segfs refuses to mount and says why.
	opts := e.mountOptions(cacheDir(t), "--debug", "--log-level", "debug")
	opts.Env = harness.SetEnv(srv.Env(), "AWS_SECRET_ACCESS_KEY", wrong)
	opts.ReadyTimeout = hangGuard
	_, err = harness.StartMount(context.Background(), opts)
	var exit *harness.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("mount with a wrong secret: %v; want segfs to refuse", err)
	}
	evidence = append(evidence, exit.Log)

	// A credential_process that prints malformed JSON holding the canary
	// credentials: mount and push refuse, naming the provider.
	procEnv := credentialProcessEnv(t, fmt.Sprintf(`{"Version": 1, "AccessKeyId": %q, "SecretAccessKey": %q`, access, secret))
	opts = e.mountOptions(cacheDir(t), "--debug", "--log-level", "debug")
	opts.Env = procEnv
	opts.ReadyTimeout = hangGuard
	_, err = harness.StartMount(context.Background(), opts)
	var procExit *harness.ExitError
	if !errors.As(err, &procExit) || procExit.Code == 0 {
		t.Fatalf("mount with a malformed credential_process: %v; want segfs to exit non-zero", err)
	}
	evidence = append(evidence, procExit.Log)
	pushOut, pushCode := runPush(t, e, procEnv)
	evidence = append(evidence, pushOut)
	t.Logf("with a malformed credential_process, mount said: %s; push (status %d) said: %s",
		lastLine(procExit.Log), pushCode, lastLine(pushOut))
	if pushCode == 0 {
		t.Errorf("segfs push with a malformed credential_process exited 0; output:\n%s", pushOut)
	}
	for name, out := range map[string]string{"mount": procExit.Log, "push": pushOut} {
		if !strings.Contains(out, "AWS credentials from credential_process") {
			t.Errorf("segfs %s's output does not name the credential provider:\n%s", name, out)
		}
	}

	p := e.proxy.Stats()
	t.Logf("%d faults injected %v; segfs wrote %d bytes of log (%d lines); the refused mount said: %s",
		p.TotalFaults(), p.Faults, len(logText), strings.Count(logText, "\n"), lastLine(exit.Log))
	if p.TotalFaults() == 0 || !strings.Contains(logText, "level=DEBUG") || !strings.Contains(logText, "READ") {
		t.Errorf("no faults, or no debug or FUSE request logging: the test would not see a leak")
	}
	all := strings.Join(evidence, "\n")
	for name, s := range map[string]string{"secret": secret, "wrong secret": wrong, "access key id": access} {
		if i := strings.Index(all, s); i >= 0 {
			t.Errorf("the %s appears in segfs's output: …%s…", name, all[max(0, i-200):min(len(all), i+len(s)+50)])
		}
		if n := grepTree(t, dir, s); n != "" {
			t.Errorf("the %s appears in the cache, in %s", name, n)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// httpGet returns the body of a GET of url, which must succeed.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	code, body := httpDo(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, code)
	}
	return body
}

// httpDo returns the status and body of a GET of url.
func httpDo(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// credentialProcessEnv returns the environment of a segfs whose only AWS
// credentials come from a profile's credential_process printing output:
// no keys in the environment, no credentials file, no instance metadata.
func credentialProcessEnv(t *testing.T, output string) []string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "output.json")
	prog := filepath.Join(dir, "creds.sh")
	conf := filepath.Join(dir, "config")
	for _, f := range []struct {
		path, data string
		mode       os.FileMode
	}{
		{out, output + "\n", 0o600},
		{prog, "#!/bin/sh\nexec cat " + out + "\n", 0o700},
		{conf, "[profile canary]\ncredential_process = " + prog + "\n", 0o600},
	} {
		if err := os.WriteFile(f.path, []byte(f.data), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return []string{
		"AWS_CONFIG_FILE=" + conf,
		"AWS_PROFILE=canary",
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "no-such-credentials"),
		"AWS_REGION=" + harness.Region,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// runPush runs segfs push of a small directory to e's bucket through the
// proxy with the environment env (after harness.ChildEnv) and returns its
// output and exit status.
func runPush(t *testing.T, e *env, env []string) (string, int) {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "segments_1"), randomBytes(2530, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, binaries.Segfs, "push", "--endpoint", e.proxy.URL(), "--path-style", "--region", harness.Region,
		src, "s3://"+e.bucket+"/pushed")
	cmd.Env = harness.ChildEnv(env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("segfs push: %v; output:\n%s", err, out)
	return "", 0
}

func mountinfo(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// grepTree returns the first file under dir that contains s, or "".
func grepTree(t *testing.T, dir, s string) string {
	t.Helper()
	found := ""
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			found = p
		}
		return nil
	})
	return found
}
