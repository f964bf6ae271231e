package reliability

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
)

// TestPlan21InterruptedReader stalls the remote in the middle of a part's
// body, has one thread of this process wait in a raw pread(2) for that
// part and three dd processes wait on the same part, then interrupts the
// thread with a signal. The thread's read must fail with EINTR while the
// others keep waiting; once the remote goes on, they must get the right
// bytes from the one GET that was in flight, which the interrupt must not
// have cancelled.
func TestPlan21InterruptedReader(t *testing.T) {
	t.Parallel()
	const key, size = "intr/_0.fdt", 4 << 20
	data := randomBytes(2101, size)
	e := newEnv(t, nil, 21, map[string][]byte{key: data})
	// One part for the whole object, and a stall far below the idle
	// timeout, so that only the test decides when the body goes on.
	// --split-size 0: the part is one GET, which the stall holds.
	m := e.mount(t, cacheDir(t), "--part-size", "4MiB", "--prefetch", "none", "--idle-timeout", "10m", "--split-size", "0")
	path := filepath.Join(m.Dir, key)
	e.rules(faults.Rule{Fault: faults.Stall, Key: key, Bytes: 64 << 10, Times: 1})
	before := harness.MustStats(t, m)

	type result struct {
		n   int
		err error
	}
	tids := make(chan int, 1)
	victim := make(chan result, 1)
	go func() {
		// The signal goes to this thread. Unlock it before returning:
		// a locked thread exits with its goroutine, and the children
		// this thread happened to start (segfs among them) would get
		// their parent-death signal.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
		if err != nil {
			tids <- -1
			victim <- result{err: err}
			return
		}
		defer unix.Close(fd)
		tids <- unix.Gettid()
		buf := make([]byte, 1<<20)
		n, err := unix.Pread(fd, buf, 1<<20) // raw: EINTR is not retried
		if err == nil && !bytes.Equal(buf[:n], data[1<<20:1<<20+n]) {
			err = fmt.Errorf("read %d other bytes", n)
		}
		victim <- result{n, err}
	}()
	tid := <-tids
	if tid < 0 {
		t.Fatal((<-victim).err)
	}
	waitFor(t, "the part's GET to stall mid-body", func() bool { return e.proxy.Stats().Faults["stall_body"] == 1 })

	// Three other readers of the same part, in processes that get no
	// signal: an EINTR would fail dd.
	type ddRun struct {
		skip int
		out  string
		cmd  *exec.Cmd
		done chan error
		log  bytes.Buffer
	}
	var dds []*ddRun
	for _, skip := range []int{0, 2, 3} {
		d := &ddRun{skip: skip, out: filepath.Join(t.TempDir(), "dd.out"), done: make(chan error, 1)}
		d.cmd = exec.Command("dd", "if="+path, "of="+d.out, "bs=1M", "count=1", fmt.Sprintf("skip=%d", skip), "iflag=direct", "status=none")
		d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
		if err := d.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { d.done <- d.cmd.Wait() }()
		t.Cleanup(func() {
			d.cmd.Process.Kill()
			<-d.done
		})
		dds = append(dds, d)
	}
	harness.WaitStats(t, m, "the three dd reads to join the stalled fetch", func(s map[string]int64) bool {
		return harness.Delta(before, s, "joins") >= int64(len(dds))
	})

	// Interrupt the thread: repeat the signal until its read returns, in
	// case one lands before the kernel handed the request to segfs.
	var got result
	deadline := time.After(hangGuard)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	signals := 0
wait:
	for {
		if err := unix.Tgkill(os.Getpid(), tid, unix.SIGURG); err != nil {
			t.Fatalf("tgkill: %v", err)
		}
		signals++
		select {
		case got = <-victim:
			break wait
		case <-deadline:
			t.Fatalf("the interrupted read did not return within %v of %d signals", hangGuard, signals)
		case <-tick.C:
		}
	}
	t.Logf("interrupted read: n=%d err=%v after %d signal(s)", got.n, got.err, signals)
	if got.err != unix.EINTR {
		t.Errorf("interrupted read: %d bytes, %v; want EINTR", got.n, got.err)
	}
	for _, d := range dds {
		select {
		case err := <-d.done:
			t.Errorf("dd skip=%d ended while the remote was still stalled: %v %s", d.skip, err, d.log.String())
			d.done <- err
		default:
		}
	}

	e.proxy.ReleaseStalls()
	for _, d := range dds {
		select {
		case err := <-d.done:
			d.done <- err
			if err != nil {
				t.Errorf("dd skip=%d: %v: %s", d.skip, err, strings.TrimSpace(d.log.String()))
				continue
			}
		case <-time.After(hangGuard):
			t.Fatalf("dd skip=%d still blocked %v after the remote went on", d.skip, hangGuard)
		}
		out, err := os.ReadFile(d.out)
		if err != nil || !bytes.Equal(out, data[d.skip<<20:(d.skip+1)<<20]) {
			t.Errorf("dd skip=%d read other bytes (%v)", d.skip, err)
		}
	}
	after := harness.WaitIdle(t, m)
	p := e.proxy.Stats()
	t.Logf("%d GETs (%d distinct), %d joins, %d fetch errors, %d parts fetched",
		p.Requests["get"], p.DistinctGets, harness.Delta(before, after, "joins"), harness.Delta(before, after, "fetch_errors"), harness.Delta(before, after, "parts_fetched"))
	if p.Requests["get"] != 1 || harness.Delta(before, after, "fetch_errors") != 0 || harness.Delta(before, after, "parts_fetched") != 1 {
		t.Errorf("%d GETs, %d fetch errors, %d parts fetched; want the one fetch to serve everyone, uncancelled",
			p.Requests["get"], harness.Delta(before, after, "fetch_errors"), harness.Delta(before, after, "parts_fetched"))
	}
	// The interrupted reader can read again, now from the cache.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if errno, err := readExact(f, data, 1<<20, 1<<20); err != nil || errno != 0 {
		t.Errorf("the interrupted range read again: %v %v\nsegfs log:\n%s", errnoName(errno), err, tail(m.Log(), 4096))
	}
}

// TestPlan21GoReader builds a Go program and has it read many files of the
// mount at once, in three ways, while busy goroutines and garbage keep the
// runtime's preemption signals (SIGURG) coming; the remote pauses now and
// then so that reads block. Every file must read byte-exact, and the case
// must really have happened: some GETs paused and some raw pread of the
// program returned EINTR (which it retried). Signals land where they land,
// so the program runs again, up to goReaderRuns times, until it has seen
// an EINTR; if none of them does, the test fails.
func TestPlan21GoReader(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{}
	var manifest []goReaderFile
	for i := range 12 {
		name := fmt.Sprintf("go/_%d.fdt", i)
		objs[name] = randomBytes(2150+uint64(i), 1<<20+i*100_000)
		sum := sha256.Sum256(objs[name])
		manifest = append(manifest, goReaderFile{name, int64(len(objs[name])), hex.EncodeToString(sum[:])})
	}
	tmp := t.TempDir()
	manifestPath := filepath.Join(tmp, "manifest.json")
	b, _ := json.Marshal(manifest)
	if err := os.WriteFile(manifestPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := buildGoReader(t, tmp)

	e := newEnv(t, nil, 2102, objs)
	// A cache far smaller than the files, so that reads keep going to
	// the remote, where half the GETs pause mid-body.
	m := e.mount(t, cacheDir(t), "--part-size", "256KiB", "--prefetch", "none", "--cache-size", "2MiB")
	e.rules(faults.Rule{Fault: faults.Stall, Bytes: -1, Stall: 20 * time.Millisecond, Prob: 0.5})

	var eintr int64
	runs := 0
	for runs < goReaderRuns && eintr == 0 {
		runs++
		res := runGoReader(t, bin, m.Dir, manifestPath)
		eintr += res.EINTR
		t.Logf("goreader run %d: %d whole-file reads, %d bytes, %d raw preads returned EINTR (retried), %d spin rounds",
			runs, res.Reads, res.Bytes, res.EINTR, res.SpinRounds)
		if want := int64(3 * 3 * len(manifest)); res.Reads != want {
			t.Errorf("goreader run %d made %d whole-file reads, want %d", runs, res.Reads, want)
		}
		if t.Failed() {
			return
		}
	}
	p := e.proxy.Stats()
	t.Logf("%d run(s): %d EINTRs; %d of %d GETs paused", runs, eintr, p.Faults["stall_body"], p.Requests["get"])
	if p.Faults["stall_body"] == 0 {
		t.Errorf("no GET paused: the reads never blocked on the remote, the case was not tested")
	}
	if eintr == 0 {
		t.Errorf("no raw pread returned EINTR in %d runs: no read was interrupted, the case was not tested", runs)
	}
}

// goReaderRuns bounds the runs of TestPlan21GoReader. Four runs in five
// see an EINTR (0 to 5 a run, 1.6 on average, in the runs seen); thirty
// without one mean that no reader is interrupted any more.
const goReaderRuns = 30

// goReaderFile is an entry of testdata/goreader's manifest.
type goReaderFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// goReaderResult is testdata/goreader's output.
type goReaderResult struct {
	Reads      int64    `json:"reads"`
	Bytes      int64    `json:"bytes"`
	EINTR      int64    `json:"eintr"`
	Mismatches int64    `json:"mismatches"`
	SpinRounds int64    `json:"spin_rounds"`
	Errors     []string `json:"errors"`
}

// runGoReader runs the Go reader over dir once, 16 readers, three rounds,
// with the runtime's defaults, and fails the test unless every file read
// byte-exact.
func runGoReader(t *testing.T, bin, dir, manifest string) goReaderResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-dir", dir, "-manifest", manifest, "-workers", "16", "-rounds", "3")
	cmd.Env = withoutGODEBUG(harness.ChildEnv())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var res goReaderResult
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		t.Fatalf("goreader: %v (%v); stdout %q; stderr %q", err, jerr, stdout.String(), stderr.String())
	}
	if err != nil || res.Mismatches != 0 || len(res.Errors) != 0 {
		t.Errorf("goreader: %v; %d mismatches; errors: %q; stderr %q", err, res.Mismatches, res.Errors, stderr.String())
	}
	return res
}

// buildGoReader builds testdata/goreader into dir with the go command that
// runs the tests.
func buildGoReader(t *testing.T, dir string) string {
	t.Helper()
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goCmd); err != nil {
		if goCmd, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to build the Go reader: %v", err)
		}
	}
	bin := filepath.Join(dir, "goreader")
	cmd := exec.Command(goCmd, "build", "-o", bin, "./testdata/goreader")
	cmd.Env = withoutGODEBUG(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/goreader: %v\n%s", err, out)
	}
	return bin
}

// withoutGODEBUG drops GODEBUG, so that the child runs with the runtime's
// defaults (asynchronous preemption on).
func withoutGODEBUG(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			out = append(out, kv)
		}
	}
	return out
}
