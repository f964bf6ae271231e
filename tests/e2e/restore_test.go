package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/localstore"
	"github.com/segfs/segfs/tests/osremote"
)

// segfs restore: a shard written from the store to a local directory,
// each file verified before it gets its name, resumable, and warming the
// cache a mount reads.

// restoreTimeout bounds every segfs restore a test runs.
const restoreTimeout = 2 * time.Minute

// restoreResult is one segfs restore's exit status, output (stdout and
// stderr), and the GETs its summary line reports.
type restoreResult struct {
	code           int
	out            string
	gets, getBytes int64
}

var restoreGets = regexp.MustCompile(`GETs (\d+) \((\d+) bytes\)`)

// parseRestore fills in the GETs of the summary line, if there is one.
func parseRestore(r *restoreResult) {
	if m := restoreGets.FindStringSubmatch(r.out); m != nil {
		r.gets, _ = strconv.ParseInt(m[1], 10, 64)
		r.getBytes, _ = strconv.ParseInt(m[2], 10, 64)
	}
}

// restoreCommand returns `segfs restore` of source into dest through
// endpoint (the server's own when ""), with args before SOURCE. Its
// default cache directory is inside the test's temporary directory.
func restoreCommand(ctx context.Context, t *testing.T, srv *harness.Server, endpoint, source, dest string, args ...string) *exec.Cmd {
	t.Helper()
	if endpoint == "" {
		endpoint = srv.Endpoint()
	}
	full := slices.Concat([]string{"restore", "--endpoint", endpoint, "--path-style", "--region", harness.Region}, args, []string{source, dest})
	cmd := exec.CommandContext(ctx, needSegfs(t), full...)
	cmd.Env = harness.ChildEnv(append(srv.Env(), "XDG_CACHE_HOME="+filepath.Join(t.TempDir(), "xdg"))...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// runRestoreCmd runs segfs restore to its end.
func runRestoreCmd(t *testing.T, srv *harness.Server, endpoint, source, dest string, args ...string) restoreResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	out, err := restoreCommand(ctx, t, srv, endpoint, source, dest, args...).CombinedOutput()
	r := restoreResult{out: string(out)}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("segfs restore still running after %v:\n%s", restoreTimeout, out)
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("segfs restore: %v", err)
	}
	parseRestore(&r)
	t.Logf("segfs restore %s: exit %d: %s", source, r.code, lastLine(r.out))
	return r
}

// mustRestore runs segfs restore and ends the test unless it exits 0.
func mustRestore(t *testing.T, srv *harness.Server, source, dest string, args ...string) restoreResult {
	t.Helper()
	r := runRestoreCmd(t, srv, "", source, dest, args...)
	if r.code != 0 {
		t.Fatalf("segfs restore %s: exit %d:\n%s", source, r.code, r.out)
	}
	return r
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// sameFiles fails the test unless got holds exactly want, byte-exact.
func sameFiles(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: not restored", name)
		case !bytes.Equal(g, want[name]):
			t.Errorf("%s: %d bytes, want %d, first difference at %d", name, len(g), len(want[name]), firstDiff(g, want[name]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: in DEST_DIR, not a file of the source", name)
		}
	}
}

// isTemp reports whether name is a restore's temporary file.
func isTemp(name string) bool {
	return strings.HasPrefix(filepath.Base(name), ".") && strings.HasSuffix(name, ".segfs-restore")
}

// finalNames returns got without restore's temporary files, which a
// failed or interrupted restore may leave.
func finalNames(got map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for n, b := range got {
		if !isTemp(n) {
			out[n] = b
		}
	}
	return out
}

// A plain shard restores byte-exact, each file under its name and no
// temporary file left; a second run with --verify deep checks every byte
// of every file and fetches nothing.
func TestRestorePlain(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "idx")
	dest := filepath.Join(t.TempDir(), "restored")
	args := []string{"--part-size", "1MiB", "--cache-dir", filepath.Join(t.TempDir(), "cache")}
	r := mustRestore(t, srv, "s3://"+bucket+"/idx", dest, args...)
	sameFiles(t, localstore.ReadTree(t, dest), shared.local)
	if total := shared.shard.TotalSize(); r.getBytes < total {
		t.Errorf("the restore's GETs received %d bytes; the shard has %d", r.getBytes, total)
	}
	r = mustRestore(t, srv, "s3://"+bucket+"/idx", dest, append(args, "--verify", "deep")...)
	if r.gets != 0 || !strings.Contains(r.out, fmt.Sprintf("%d already present and verified", len(shared.local))) {
		t.Errorf("second run, --verify deep: %d GETs; want 0 and every file present:\n%s", r.gets, r.out)
	}
	sameFiles(t, localstore.ReadTree(t, dest), shared.local)
}

// Seekable zstd objects (segfs push) restore as their logical files,
// without a cache, each compressed byte fetched about once: a compressed
// file is read in order, so the engine's readahead and its stream's held
// parts serve it.
func TestRestoreCompressed(t *testing.T) {
	srv := needServer(t)
	bucket := newBucket(t, srv)
	dir, files := pushShard(t)
	files["seg/_1.fdt"] = jsonLines(15, 9<<20+4321) // several parts compressed
	writeFile(t, filepath.Join(dir, "seg/_1.fdt"), files["seg/_1.fdt"])
	mustPush(t, srv, "--compress-min-size", "1MiB", dir, "s3://"+bucket+"/p")
	var stored int64
	for key := range listETags(t, srv, bucket) {
		b, _ := getObject(t, srv, bucket, key)
		stored += int64(len(b))
		if key == "p/seg/_1.fdt" {
			t.Fatalf("%s is stored raw; want it compressed", key)
		}
	}
	dest := t.TempDir()
	r := mustRestore(t, srv, "s3://"+bucket+"/p", dest, "--part-size", "256KiB", "--no-cache", "--max-fetches", "4")
	sameFiles(t, localstore.ReadTree(t, dest), files)
	// The seek tables are read at listing (their objects' tails), and a
	// frame across a part border reads both parts: allow an eighth.
	if r.getBytes > stored+stored/8 {
		t.Errorf("GETs received %d bytes; the objects hold %d: compressed parts were fetched more than once", r.getBytes, stored)
	}
}

// An OpenSearch shard restores as its Lucene directory, segments_N from
// the metadata; a blob changed after its metadata was written (same
// length, its footer intact) passes the default footer check, and
// --verify deep finds it: exit 1 naming it, not under its name.
func TestRestoreOpenSearch(t *testing.T) {
	srv := needServer(t)
	o := osremote.Options{Base: "repo", IndexUUID: osIndexUUID, Shard: 2, PathType: layout.HashedPrefix,
		HashAlgorithm: layout.FNV1aComposite1, Version: 2, Seed: 41}
	s := writeShard(t, srv, o)
	args := slices.Concat(s.args(true), []string{"--part-size", "64KiB"})
	cached := func(name string, more ...string) []string {
		return slices.Concat(args, []string{"--cache-dir", filepath.Join(t.TempDir(), name)}, more)
	}
	wantFiles := want(s.curFiles, s.cur)
	segN := layout.SegmentsFileName(s.cur.Metadata.Generation)

	dest := t.TempDir()
	mustRestore(t, srv, s.source(), dest, cached("c1")...)
	checkShardDir(t, dest, wantFiles) // exactly these names: no temporary file
	if got, _ := os.ReadFile(filepath.Join(dest, segN)); !bytes.Equal(got, s.cur.SegmentInfos) {
		t.Errorf("%s is not the metadata's SegmentInfos", segN)
	}

	key := s.cur.Blobs["_1.fdt"]
	data := s.get(t, key)
	data[len(data)/2] ^= 0x01
	s.put(t, key, data)
	changed := maps.Clone(wantFiles)
	changed["_1.fdt"] = data

	// The default check reads footers only: the file restores as the
	// store now holds it.
	plain := t.TempDir()
	mustRestore(t, srv, s.source(), plain, cached("c2")...)
	sameFiles(t, localstore.ReadTree(t, plain), changed)

	deep := t.TempDir()
	r := runRestoreCmd(t, srv, "", s.source(), deep, cached("c3", "--verify", "deep")...)
	if r.code != 1 || !strings.Contains(r.out, "restore: _1.fdt: ") || !strings.Contains(r.out, "checksum") {
		t.Fatalf("--verify deep of a changed blob: exit %d, want 1 and a line naming _1.fdt's checksum:\n%s", r.code, r.out)
	}
	got := localstore.ReadTree(t, deep)
	if _, ok := got["_1.fdt"]; ok {
		t.Errorf("_1.fdt is under its name after failing the deep check")
	}
	delete(wantFiles, "_1.fdt")
	sameFiles(t, finalNames(got), wantFiles)
}

// syncBuffer is a bytes.Buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newFaultProxy starts a fault-injecting proxy in front of the server,
// closed at the test's cleanup.
func newFaultProxy(t *testing.T, srv *harness.Server, rules ...faults.Rule) *faults.Proxy {
	t.Helper()
	p, err := faults.New(faults.Config{Upstream: srv.Endpoint(), Seed: 1,
		AccessKey: srv.AccessKey(), SecretKey: srv.SecretKey(), Region: harness.Region})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := p.SetRules(rules...); err != nil {
		t.Fatal(err)
	}
	return p
}

// missingBytes is the size of the files of want that got does not hold
// under their names.
func missingBytes(got, want map[string][]byte) (files int, n int64) {
	for name, b := range want {
		if _, ok := got[name]; !ok {
			files++
			n += int64(len(b))
		}
	}
	return files, n
}

// SIGINT in the middle of a restore (each GET slowed by a proxy) exits
// 130 and leaves every file under its final name complete; the next run
// completes the restore, fetching only the files that were missing.
func TestRestoreInterrupted(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "idx")
	source := "s3://" + bucket + "/idx"
	proxy := newFaultProxy(t, srv, faults.Rule{Name: "slow", Fault: faults.Stall, Stall: 150 * time.Millisecond})
	dest := t.TempDir()
	args := []string{"--part-size", "1MiB", "--max-fetches", "2", "--no-cache"}

	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	cmd := restoreCommand(ctx, t, srv, proxy.URL(), source, dest, args...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Interrupt once a third of the files are in place (one log line
	// each, smallest first): larger files' pieces are in flight then.
	deadline := time.After(time.Minute)
	for strings.Count(out.String(), "msg=restored ") < len(shared.local)/3 {
		select {
		case err := <-done:
			t.Fatalf("segfs restore ended before it could be interrupted: %v\n%s", err, out.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("no file restored within a minute:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("segfs restore still running a minute after SIGINT:\n%s", out.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 || !strings.Contains(out.String(), "interrupted") {
		t.Fatalf("exit %v after SIGINT, want status 130 and a word of the interrupt:\n%s", err, out.String())
	}
	got := finalNames(localstore.ReadTree(t, dest))
	for name, b := range got {
		if !bytes.Equal(b, shared.local[name]) {
			t.Errorf("%s is under its final name, %d bytes, but not the source's %d bytes", name, len(b), len(shared.local[name]))
		}
	}
	missing, missingSize := missingBytes(got, shared.local)
	if missing == 0 || len(got) == 0 {
		t.Fatalf("the interrupt left %d files restored and %d missing; want some of each", len(got), missing)
	}
	t.Logf("interrupted with %d files restored, %d (%d bytes) missing", len(got), missing, missingSize)

	// The same endpoint: DEST_DIR's mark names the service (a restore
	// through another endpoint is another source's), now without faults.
	if err := proxy.SetRules(); err != nil {
		t.Fatal(err)
	}
	r := runRestoreCmd(t, srv, proxy.URL(), source, dest, args...)
	if r.code != 0 {
		t.Fatalf("the second run: exit %d:\n%s", r.code, r.out)
	}
	sameFiles(t, finalNames(localstore.ReadTree(t, dest)), shared.local)
	if r.getBytes > missingSize {
		t.Errorf("the second run's GETs received %d bytes; the missing files hold %d", r.getBytes, missingSize)
	}
	if !strings.Contains(r.out, fmt.Sprintf("%d already present and verified", len(got))) {
		t.Errorf("the second run does not report the %d files present:\n%s", len(got), r.out)
	}
}

// A remote that fails every GET of one object fails that file alone: exit
// 1 naming it, the others restored, nothing under its name. Once the
// remote recovers, the next run fetches that file only.
func TestRestoreFailingObject(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "idx")
	source := "s3://" + bucket + "/idx"
	var victim string
	for _, f := range shared.shard.Files {
		if f.Size > 4<<10 && f.Size < 1<<20 && (victim == "" || f.Size > int64(len(shared.local[victim]))) {
			victim = f.Name
		}
	}
	if victim == "" {
		t.Fatal("the shard has no file between 4KiB and 1MiB")
	}
	proxy := newFaultProxy(t, srv, faults.Rule{Name: "broken", Key: "idx/" + victim, Fault: faults.InternalError})
	dest := t.TempDir()
	args := []string{"--part-size", "1MiB", "--no-cache"}
	r := runRestoreCmd(t, srv, proxy.URL(), source, dest, args...)
	if r.code != 1 || !strings.Contains(r.out, "restore: "+victim+": ") {
		t.Fatalf("exit %d, want 1 and a line naming %s:\n%s", r.code, victim, r.out)
	}
	if st := proxy.Stats(); st.Fired["broken"] == 0 {
		t.Errorf("the proxy failed no GET of %s", victim)
	}
	got := localstore.ReadTree(t, dest)
	if _, ok := got[victim]; ok {
		t.Errorf("%s is under its name though its fetch failed", victim)
	}
	rest := maps.Clone(shared.local)
	delete(rest, victim)
	sameFiles(t, finalNames(got), rest)

	if err := proxy.SetRules(); err != nil {
		t.Fatal(err)
	}
	r = runRestoreCmd(t, srv, proxy.URL(), source, dest, args...)
	if r.code != 0 {
		t.Fatalf("after the remote recovers: exit %d:\n%s", r.code, r.out)
	}
	sameFiles(t, localstore.ReadTree(t, dest), shared.local)
	if size := int64(len(shared.local[victim])); r.getBytes > size {
		t.Errorf("the second run's GETs received %d bytes; the missing file has %d", r.getBytes, size)
	}
}

// A restore with --cache-dir leaves a mount with the same cache directory
// and part size reading every file with no GET.
func TestRestoreWarmsMount(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "idx")
	source := "s3://" + bucket + "/idx"
	cacheDir := filepath.Join(t.TempDir(), "cache")
	mustRestore(t, srv, source, t.TempDir(), "--part-size", "1MiB", "--cache-dir", cacheDir)

	m := mountS3(t, srv, source, "--cache-dir", cacheDir, "--part-size", "1MiB", "--no-segment-prefetch", "--prefetch", "none")
	before := harness.WaitStats(t, m, "the cache's index loaded", func(s map[string]int64) bool {
		return s["cache_index_loaded"] == 1
	})
	checkObjects(t, m.Dir, shared.local)
	after := harness.MustStats(t, m)
	if n := harness.Delta(before, after, "gets"); n != 0 {
		t.Errorf("reading every file of the mount made %d GETs; want 0, the restore cached every part", n)
	}
	if n := harness.Delta(before, after, "disk_hits"); n == 0 {
		t.Errorf("no read was a disk hit")
	}
}

// A DEST_DIR holding a file that is not the source's is refused with exit
// 2, naming it, and nothing in it is touched.
func TestRestoreRefusesForeignDest(t *testing.T) {
	srv := needServer(t)
	bucket := uploadShard(t, srv, "idx")
	dest := t.TempDir()
	name := shared.shard.Files[0].Name
	writeTestFile(t, filepath.Join(dest, name), "an older copy")
	writeTestFile(t, filepath.Join(dest, "notes", "mine.txt"), "not the source's")
	before := localstore.ReadTree(t, dest)
	stamp := func() time.Time {
		fi, err := os.Stat(filepath.Join(dest, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.ModTime()
	}
	mtime := stamp()
	r := runRestoreCmd(t, srv, "", "s3://"+bucket+"/idx", dest, "--no-cache")
	if r.code != 2 || !strings.Contains(r.out, "notes/") {
		t.Errorf("exit %d, want 2 naming notes/:\n%s", r.code, r.out)
	}
	sameFiles(t, localstore.ReadTree(t, dest), before)
	if !stamp().Equal(mtime) {
		t.Errorf("%s was touched", name)
	}
}
