package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
)

// segfs lists the bucket once, when it mounts (one LIST of at most one key
// to check the bucket and the credentials, then the full listing), reads
// the tails of seekable zstd objects, and never lists again: the tree is
// fixed for the life of the mount. It sends no HEAD at all. So a LIST
// failure can only matter at mount time, where segfs must either get a
// complete listing (the SDK retries each request) or refuse to mount,
// never serve an empty or partial tree; and after mounting it must not
// matter at all.

// listingObjects are plain objects and one seekable zstd object.
func listingObjects(t *testing.T) (objs map[string][]byte, logical []byte) {
	objs = map[string][]byte{
		"idx/_0.fdt": randomBytes(1201, 2<<20+5),
		"idx/_0.si":  randomBytes(1202, 400),
		"idx/_1.tim": randomBytes(1203, 300<<10),
	}
	var b strings.Builder
	for i := 0; b.Len() < 3<<20; i++ {
		fmt.Fprintf(&b, `{"id":%d,"body":"document number %d of the listing test"}`+"\n", i, i*7)
	}
	logical = []byte(b.String())
	var packed bytes.Buffer
	if _, _, err := compress.Encode(context.Background(), &packed, bytes.NewReader(logical), compress.EncoderOptions{FrameSize: 256 << 10}); err != nil {
		t.Fatal(err)
	}
	objs["idx/_1.fdt.zst"] = packed.Bytes()
	return objs, logical
}

// shown is the tree a mount of listingObjects must show: the zstd object
// under its name without ".zst", at its logical size.
func shown(objs map[string][]byte, logical []byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range objs {
		if name, ok := strings.CutSuffix(k, ".zst"); ok {
			out[name] = logical
			continue
		}
		out[k] = v
	}
	return out
}

// checkTree fails the test unless the files under dir are exactly want,
// with the right sizes and bytes.
func checkTree(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	got := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			got[filepath.ToSlash(rel)] = info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	for name, data := range want {
		size, ok := got[name]
		if !ok {
			t.Errorf("%s is missing from the mount (it shows %v)", name, slices.Sorted(maps.Keys(got)))
			continue
		}
		if size != int64(len(data)) {
			t.Errorf("%s shows %d bytes, want %d", name, size, len(data))
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s: read %v (bytes equal: %v)", name, err, bytes.Equal(b, data))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("the mount shows %s, which it should not", name)
		}
	}
}

// cacheFiles returns the names and sizes of the files under a cache
// directory, to compare before and after.
func cacheFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".part") {
			info, err := d.Info()
			if err != nil {
				return err
			}
			out[p] = info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mountFails starts a mount that must exit non-zero before mounting and
// returns its output; nothing may be left mounted.
func mountFails(t *testing.T, e *env, cacheDir string, args ...string) string {
	t.Helper()
	opts := e.mountOptions(cacheDir, args...)
	opts.Dir = filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(opts.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	opts.ReadyTimeout = hangGuard
	start := time.Now()
	m, err := harness.StartMount(ctx, opts)
	if err == nil {
		defer m.Unmount()
		entries, _ := os.ReadDir(m.Dir)
		t.Fatalf("segfs mounted (showing %d entries); want it to refuse", len(entries))
	}
	var exit *harness.ExitError
	if !errors.As(err, &exit) || exit.Code == 0 {
		t.Fatalf("want segfs to exit non-zero before mounting; got %v", err)
	}
	if ok, _ := harness.IsMounted(opts.Dir); ok {
		t.Errorf("%s is mounted after segfs refused", opts.Dir)
	}
	lines := strings.Split(strings.TrimSpace(exit.Log), "\n")
	t.Logf("segfs refused after %v: %s", time.Since(start).Round(time.Millisecond), lines[len(lines)-1])
	return exit.Log
}

// TestPlan12ListFailures covers LIST failures, transient and lasting, at
// mount time and after, with a cache filled beforehand. The plan's HEAD
// failures cannot happen: segfs sends no HEAD, which the proxy's counts
// show.
func TestPlan12ListFailures(t *testing.T) {
	t.Parallel()
	objs, logical := listingObjects(t)
	tree := shown(objs, logical)
	e := newEnv(t, nil, 12, objs)
	dir := cacheDir(t)
	// It compares the cache's files before and after: no segment-aware
	// prefetch, whose range fetches could still be storing.
	args := []string{"--part-size", partSizeFlag, "--prefetch", "none", "--idle-timeout", "1s", "--no-segment-prefetch"}

	// Fill the cache with every object.
	m := e.mount(t, dir, args...)
	checkTree(t, m.Dir, tree)
	harness.WaitIdle(t, m)
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	filled := cacheFiles(t, dir)

	t.Run("transient at mount", func(t *testing.T) {
		// Each LIST and tail GET fails twice (for a LIST, the second
		// time with its body cut short), then succeeds.
		e.rules(faults.Rule{Ops: faults.OpList, Fault: faults.Short, Bytes: -1, After: 1, Times: 1, PerRequest: true},
			faults.Rule{Ops: faults.OpList, Fault: faults.InternalError, Times: 1, PerRequest: true},
			faults.Rule{Name: "tail", Key: "idx/_1.fdt.zst", Fault: faults.SlowDown, Times: sdkAttempts - 1, PerRequest: true})
		before := e.proxy.Stats()
		m := e.mount(t, dir, args...)
		mounted := e.proxy.Stats()
		checkTree(t, m.Dir, tree)
		after := e.proxy.Stats()
		t.Logf("mount: %d LISTs (%d failed, %d cut short), %d tail GETs (%d failed)",
			mounted.Requests["list"]-before.Requests["list"], mounted.Fired["internal_500"]-before.Fired["internal_500"],
			mounted.Fired["short_body"]-before.Fired["short_body"],
			mounted.GetsByKey["idx/_1.fdt.zst"]-before.GetsByKey["idx/_1.fdt.zst"], mounted.Fired["tail"]-before.Fired["tail"])
		if mounted.Fired["internal_500"] == before.Fired["internal_500"] || mounted.Fired["short_body"] == before.Fired["short_body"] {
			t.Errorf("no LIST failed or was cut short: the case was not tested")
		}
		// Only the seek table's tail is read again at mount; every byte
		// read through the mount comes from the cache.
		if n := after.Requests["get"] - mounted.Requests["get"]; n != 0 {
			t.Errorf("reading the cached tree made %d GETs; want 0", n)
		}
		if err := m.Unmount(); err != nil {
			t.Fatal(err)
		}
	})

	for _, tc := range []struct {
		name string
		rule faults.Rule
		want []string // the output names one of these
	}{
		{"bucket check fails", faults.Rule{Ops: faults.OpList, Fault: faults.InternalError}, []string{"InternalError", "500"}},
		{"listing fails", faults.Rule{Ops: faults.OpList, Fault: faults.InternalError, After: 1}, []string{"list"}},
		{"listing times out", faults.Rule{Ops: faults.OpList, Fault: faults.StallHeaders, After: 1}, []string{"list"}},
		{"seek table unreadable", faults.Rule{Key: "idx/_1.fdt.zst", Fault: faults.InternalError}, []string{"_1.fdt.zst"}},
		{"listing cut short", faults.Rule{Ops: faults.OpList, Fault: faults.Short, Bytes: -1, After: 1}, []string{"list"}},
		{"listing reset", faults.Rule{Ops: faults.OpList, Fault: faults.Reset, Bytes: -1, After: 1}, []string{"list"}},
		{"listing is an error document", faults.Rule{Ops: faults.OpList, Fault: faults.ErrorBody200, After: 1}, []string{"list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.rules(tc.rule)
			out := mountFails(t, e, dir, args...)
			if !containsAny(out, tc.want...) {
				t.Errorf("segfs's message names none of %q:\n%s", tc.want, out)
			}
			if e.proxy.Stats().TotalFaults() == 0 {
				t.Errorf("no fault injected")
			}
			if got := cacheFiles(t, dir); !maps.Equal(got, filled) {
				t.Errorf("the cache changed: %d part files before, %d after", len(filled), len(got))
			}
		})
	}

	t.Run("after mount", func(t *testing.T) {
		e.rules()
		m := e.mount(t, dir, args...)
		mounted := e.proxy.Stats()
		e.rules(faults.Rule{Ops: faults.OpList, Fault: faults.InternalError},
			faults.Rule{Ops: faults.OpOther, Fault: faults.StallHeaders})
		harness.DropPageCache(t)
		checkTree(t, m.Dir, tree)
		after := e.proxy.Stats()
		if n := after.Requests["list"] - mounted.Requests["list"]; n != 0 {
			t.Errorf("segfs sent %d LIST requests after mounting; the tree is fixed at mount", n)
		}
		if n := after.Requests["get"] - mounted.Requests["get"]; n != 0 {
			t.Errorf("reading the cached tree made %d GETs; want 0", n)
		}
	})
	checkCache(t, dir, objs)
	if n := e.proxy.Stats().Requests["head"]; n != 0 {
		t.Errorf("segfs sent %d HEAD requests in the test's mounts and failed mounts; want none", n)
	}
}

// containsAny reports whether s contains any of subs, ignoring case.
func containsAny(s string, subs ...string) bool {
	s = strings.ToLower(s)
	for _, sub := range subs {
		if strings.Contains(s, strings.ToLower(sub)) {
			return true
		}
	}
	return false
}
