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
// Neither secret may appear in segfs's output, its error messages, its
// metrics and profiles, or its cache; nor may the access key id.
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
	m := e.mount(t, dir, "--part-size", bodyPartSize, "--prefetch", "open", "--debug", "--log-level", "debug", "--idle-timeout", "1s")
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
	for _, path := range []string{"/stats", "/debug/pprof/", "/debug/pprof/goroutine?debug=2", "/debug/pprof/heap?debug=1"} {
		evidence = append(evidence, httpGet(t, "http://"+m.MetricsAddr()+path))
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
	_, err := harness.StartMount(context.Background(), opts)
	var exit *harness.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("mount with a wrong secret: %v; want segfs to refuse", err)
	}
	evidence = append(evidence, exit.Log)

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

// httpGet returns the body of a GET of url.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(b)
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

// TestPlan25HostilePaths mounts a bucket whose listing holds keys with
// "..", "." and empty elements, absolute keys, over-long names, a key that
// is also a directory, a directory marker with content, names that differ
// only by case, and very long names and paths. Most are real objects;
// those the server cannot hold are added to its listing by the proxy.
// segfs must show exactly the usable names, read them byte-exact, skip the
// rest with a warning, and keep every file it writes inside its cache
// directory, under hashed names.
func TestPlan25HostilePaths(t *testing.T) {
	t.Parallel()
	long255 := strings.Repeat("l", 251) + ".fdt"
	var longPath strings.Builder
	for i := range 4 {
		fmt.Fprintf(&longPath, "%s/", strings.Repeat(string(rune('p'+i)), 200))
	}
	longPath.WriteString("deep.fdt")
	real := map[string][]byte{
		"case/Seg.fdt":     randomBytes(2510, 3000),
		"case/seg.fdt":     randomBytes(2511, 3001),
		"case/SEG.FDT":     randomBytes(2512, 3002),
		"long/" + long255:  randomBytes(2513, 70<<10),
		longPath.String():  randomBytes(2514, 1<<20+3),
		"odd/a..b":         randomBytes(2515, 10),
		"odd/...":          randomBytes(2516, 11),
		"odd/sp ace":       randomBytes(2517, 12),
		"odd/uni-é":        randomBytes(2518, 13),
		"odd/per%cent":     randomBytes(2519, 14),
		`odd/back\slash`:   randomBytes(2520, 15),
		"odd/q?mark":       randomBytes(2521, 16),
		"odd/hash#":        randomBytes(2522, 17),
		"conflict/f/child": randomBytes(2523, 18),
		"trail/file":       randomBytes(2524, 19),
	}
	// Keys the server cannot hold, listed by the proxy; none is usable.
	hostile := []string{
		"../escape.fdt", "..", ".", "a/../../escape2.fdt", "./dot.fdt", "x//y.fdt", "/abs.fdt",
		"e/.", "dots/..", "../evil.fdt.zst", "long/" + strings.Repeat("m", 256),
		"conflict/f",  // also a directory
		"trail/file/", // a directory marker with content
	}
	var entries []faults.ListEntry
	for i, k := range hostile {
		entries = append(entries, faults.ListEntry{Key: k, Size: int64(100 + i)})
	}
	e := newEnv(t, nil, 2502, real)
	base := t.TempDir()
	dir := filepath.Join(base, "cache")
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	e.rules(faults.Rule{Ops: faults.OpList, Fault: faults.ListAppend, Entries: entries})
	opts := e.mountOptions(dir, "--part-size", "64KiB", "--prefetch", "all")
	opts.Dir = mnt
	m := harness.StartMountT(t, opts)
	if n := e.proxy.Stats().Fired["list_append"]; n == 0 {
		t.Fatal("the hostile listing was not served")
	}
	checkTree(t, mnt, real)
	s := harness.WaitIdle(t, m)
	logText := m.Log()
	warned := strings.Count(logText, "skipping object")
	t.Logf("%d hostile keys listed; segfs warned %d times; %d parts cached", len(hostile), warned, s["cache_parts"])
	// "trail/file/" is dropped by the listing code without a warning.
	if warned < len(hostile)-1 {
		t.Errorf("segfs warned about %d skipped objects; want one per unusable key (%d)", warned, len(hostile)-1)
	}
	checkCache(t, dir, real)
	siblings, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range siblings {
		if d.Name() != "cache" && d.Name() != "mnt" {
			t.Errorf("%s appeared beside the cache directory and the mountpoint", filepath.Join(base, d.Name()))
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(base), "escape.fdt")); err == nil {
		t.Errorf("a file escaped to %s", filepath.Dir(base))
	}
}
