package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The real Lucene, driven through tests/lucene/LuceneTool.java: Debian's
// liblucene8-java on a JRE (`make deps` installs both). The tool runs as
// a single-file source program, so a JRE is enough: no javac, no build
// tool.

// Environment variables that override where Lucene is looked for.
const (
	// EnvJava names the java binary. Default: java on PATH.
	EnvJava = "SEGFS_JAVA"
	// EnvLuceneClasspath is the classpath holding lucene-core. Default:
	// the newest /usr/share/java/lucene-core-8*.jar.
	EnvLuceneClasspath = "SEGFS_LUCENE_CLASSPATH"
)

// ErrLuceneMissing is wrapped by FindLucene's error when java or the
// Lucene jar is not there.
var ErrLuceneMissing = errors.New("lucene not found")

// luceneJarGlobs are where Debian's liblucene8-java puts lucene-core,
// best first.
var luceneJarGlobs = []string{"/usr/share/java/lucene-core-8*.jar", "/usr/share/java/lucene-core.jar"}

// Lucene runs LuceneTool. Its fields are set by FindLucene and may be
// changed before use; its methods may be called concurrently.
type Lucene struct {
	// Java is the java binary.
	Java string
	// Classpath holds the Lucene jar(s).
	Classpath string
	// Tool is tests/lucene/LuceneTool.java.
	Tool string
	// JVMArgs go before the classpath, e.g. -XX:TieredStopAtLevel=1 for
	// a faster start where the JIT's best code does not matter.
	JVMArgs []string
}

// FindLucene locates java, the Lucene jar and the tool. The error wraps
// ErrLuceneMissing and says how to install what is missing.
func FindLucene() (Lucene, error) {
	var l Lucene
	root, err := RepoRoot()
	if err != nil {
		return l, err
	}
	l.Tool = filepath.Join(root, "tests", "lucene", "LuceneTool.java")
	if _, err := os.Stat(l.Tool); err != nil {
		return l, fmt.Errorf("lucene tool: %w", err)
	}
	var errs []error
	if l.Java = os.Getenv(EnvJava); l.Java == "" {
		if l.Java, err = exec.LookPath("java"); err != nil {
			errs = append(errs, fmt.Errorf("no java on PATH (set %s): %w", EnvJava, ErrLuceneMissing))
		}
	} else if !isExecutable(l.Java) {
		errs = append(errs, fmt.Errorf("%s=%s is not an executable: %w", EnvJava, l.Java, ErrLuceneMissing))
	}
	if l.Classpath = os.Getenv(EnvLuceneClasspath); l.Classpath == "" {
		for _, g := range luceneJarGlobs {
			m, _ := filepath.Glob(g)
			if len(m) > 0 {
				slices.Sort(m) // 8.7.0 before 8.11.0 does not matter: Debian installs one
				l.Classpath = m[len(m)-1]
				break
			}
		}
		if l.Classpath == "" {
			errs = append(errs, fmt.Errorf("no lucene-core jar at %s (set %s): %w", strings.Join(luceneJarGlobs, " or "), EnvLuceneClasspath, ErrLuceneMissing))
		}
	}
	if len(errs) > 0 {
		return l, fmt.Errorf("%w; install with `make deps`, or apt-get install default-jre-headless liblucene8-java", errors.Join(errs...))
	}
	return l, nil
}

// RequireLucene returns Lucene, or ends the test when it is missing: it
// fails when E2ERequired, else it skips saying what is missing.
func RequireLucene(tb testing.TB) Lucene {
	tb.Helper()
	l, err := FindLucene()
	if err == nil {
		return l
	}
	if E2ERequired() {
		tb.Fatalf("%s is set but Lucene is missing: %v", EnvRequireE2E, err)
	}
	tb.Skipf("skipping the Lucene test (set %s=1 to fail instead; `make test` does): %v", EnvRequireE2E, err)
	return l
}

// command returns the java command running the tool with args. It runs
// in a process group of its own, is killed if the harness dies, and sees
// no AWS credentials.
func (l Lucene) command(ctx context.Context, args ...string) *exec.Cmd {
	full := slices.Concat(l.JVMArgs, []string{"-cp", l.Classpath, l.Tool}, args)
	cmd := exec.CommandContext(ctx, l.Java, full...)
	cmd.Env = ChildEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A JVM stuck in a read of a hung mount may not die at once; after
	// ctx ends the pipes are closed regardless.
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs the tool and returns its stdout; an error carries its stderr.
func (l Lucene) run(ctx context.Context, args ...string) (string, error) {
	cmd := l.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("LuceneTool %s: %w\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, indent(stdout.String()), indent(tail(stderr.String(), 8192)))
	}
	return stdout.String(), nil
}

// LuceneIndex says what LuceneTool build writes.
type LuceneIndex struct {
	Docs     int   // documents; 0 means the tool's default (100000, ~150 MB)
	Segments int   // segments, one flush each; 0 means 8
	Seed     int64 // content seed
	// BodyWords is the mean number of words of a document's body
	// (which is stored); 0 means 200.
	BodyWords int
	// Append writes a new commit of the index in the directory (its
	// segments kept, Segments new ones added, the old segments_N
	// deleted) instead of a new index.
	Append bool
}

func (ix LuceneIndex) args() []string {
	var a []string
	add := func(flag string, v int64) {
		if v != 0 {
			a = append(a, flag, strconv.FormatInt(v, 10))
		}
	}
	add("--docs", int64(ix.Docs))
	add("--segments", int64(ix.Segments))
	add("--seed", ix.Seed)
	add("--body-words", int64(ix.BodyWords))
	if ix.Append {
		a = append(a, "--append")
	}
	return a
}

// Build writes a new index into dir with Lucene's IndexWriter.
func (l Lucene) Build(ctx context.Context, dir string, ix LuceneIndex) error {
	_, err := l.run(ctx, append([]string{"build", dir}, ix.args()...)...)
	return err
}

// Check runs Lucene's CheckIndex on dir; it returns an error unless the
// index is clean.
func (l Lucene) Check(ctx context.Context, dir string) error {
	_, err := l.run(ctx, "check", dir)
	return err
}

// LuceneOpen says how Open opens and searches.
type LuceneOpen struct {
	// Dirs are the index directories, opened in this order (or at once
	// with Concurrent).
	Dirs []string
	// Kind is the Lucene Directory: "mmap" (MMapDirectory) or "nio"
	// (NIOFSDirectory).
	Kind string
	// Warm, when set, is an index opened and searched first, in the same
	// JVM, so that the timed opens run in a warm JVM.
	Warm string
	// Queries per index (0: the tool's 200) and their seed; NoQueries
	// runs none (the open alone).
	Queries   int
	NoQueries bool
	Seed      int64
	// Concurrent opens every directory at once on threads of its own.
	Concurrent bool
	// BeforeOpen, when set, is called after the warm-up and before the
	// timed opens, while the JVM waits (to drop the page cache, say). An
	// error from it stops the JVM and is returned.
	BeforeOpen func() error
}

// LuceneOpened is one timed DirectoryReader.open.
type LuceneOpened struct {
	Dir      string
	Kind     string
	Ms       float64
	Segments int
	Docs     int64
}

// LuceneQueries are the seeded queries' figures on one index. Equal Hits
// and Digest mean the same results.
type LuceneQueries struct {
	Dir                  string
	Kind                 string
	N                    int
	Hits                 int64
	Digest               string
	P50, P99, Max, Total float64 // milliseconds
}

// LuceneResult is what Open measured, by directory in the order of Dirs.
type LuceneResult struct {
	WarmMs  float64
	Opens   []LuceneOpened
	Queries []LuceneQueries
}

// Open runs LuceneTool open and parses its lines.
func (l Lucene) Open(ctx context.Context, o LuceneOpen) (LuceneResult, error) {
	var res LuceneResult
	args := append([]string{"open"}, o.Dirs...)
	args = append(args, "--dir", o.Kind)
	if o.Warm != "" {
		args = append(args, "--warm", o.Warm)
	}
	switch {
	case o.NoQueries:
		args = append(args, "--queries", "0")
	case o.Queries != 0:
		args = append(args, "--queries", strconv.Itoa(o.Queries))
	}
	if o.Seed != 0 {
		args = append(args, "--seed", strconv.FormatInt(o.Seed, 10))
	}
	if o.Concurrent {
		args = append(args, "--concurrent")
	}
	if o.BeforeOpen != nil {
		args = append(args, "--ready-wait")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := l.command(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return res, fmt.Errorf("LuceneTool open: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, fmt.Errorf("LuceneTool open: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("LuceneTool open: %w", err)
	}
	var out strings.Builder
	perr := parseOpen(bufio.NewScanner(stdout), &out, &res, func() error {
		if o.BeforeOpen == nil {
			return errors.New(`"ready" without --ready-wait`)
		}
		if err := o.BeforeOpen(); err != nil {
			return err
		}
		_, err := io.WriteString(stdin, "go\n")
		return err
	})
	if perr != nil {
		cancel() // the JVM may be waiting on stdin: stop it
	}
	io.Copy(io.Discard, stdout) // let the JVM finish writing before Wait closes the pipe
	werr := cmd.Wait()
	if err := errors.Join(perr, werr); err != nil {
		return res, fmt.Errorf("LuceneTool %s: %w\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, indent(out.String()), indent(tail(stderr.String(), 8192)))
	}
	if len(res.Opens) != len(o.Dirs) || len(res.Queries) != len(o.Dirs) {
		return res, fmt.Errorf("LuceneTool %s: %d opens and %d query lines for %d directories\nstdout:\n%s", strings.Join(args, " "), len(res.Opens), len(res.Queries), len(o.Dirs), indent(out.String()))
	}
	return res, nil
}

// parseOpen reads the tool's lines into res, keeping them in out, and
// calls ready at the "ready" line.
func parseOpen(sc *bufio.Scanner, out *strings.Builder, res *LuceneResult, ready func() error) error {
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		word, rest, _ := strings.Cut(line, " ")
		kv, dir := parseKV(rest)
		var err error
		switch word {
		case "ready":
			err = ready()
		case "warm":
			res.WarmMs, err = kv.float("ms")
		case "open":
			o := LuceneOpened{Dir: dir, Kind: kv["kind"]}
			o.Ms, err = kv.float("ms")
			if err == nil {
				o.Segments, err = kv.int("segments")
			}
			if err == nil {
				o.Docs, err = kv.int64("docs")
			}
			res.Opens = append(res.Opens, o)
		case "queries":
			q := LuceneQueries{Dir: dir, Kind: kv["kind"], Digest: kv["digest"]}
			var errs [6]error
			q.N, errs[0] = kv.int("n")
			q.Hits, errs[1] = kv.int64("hits")
			q.P50, errs[2] = kv.float("p50")
			q.P99, errs[3] = kv.float("p99")
			q.Max, errs[4] = kv.float("max")
			q.Total, errs[5] = kv.float("total")
			err = errors.Join(errs[:]...)
			res.Queries = append(res.Queries, q)
		}
		if err != nil {
			return fmt.Errorf("line %q: %w", line, err)
		}
	}
	return sc.Err()
}

// kvLine is a line's key=value fields.
type kvLine map[string]string

// parseKV splits "k=v k=v ... dir=PATH" into its fields and the path,
// which is last and may hold spaces.
func parseKV(s string) (kvLine, string) {
	kv := kvLine{}
	var dir string
	if i := strings.Index(s, "dir="); i >= 0 && (i == 0 || s[i-1] == ' ') {
		s, dir = s[:i], s[i+len("dir="):]
	}
	for _, f := range strings.Fields(s) {
		if k, v, ok := strings.Cut(f, "="); ok {
			kv[k] = v
		}
	}
	return kv, dir
}

func (kv kvLine) float(k string) (float64, error) {
	v, err := strconv.ParseFloat(kv[k], 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", k, err)
	}
	return v, nil
}

func (kv kvLine) int64(k string) (int64, error) {
	v, err := strconv.ParseInt(kv[k], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", k, err)
	}
	return v, nil
}

func (kv kvLine) int(k string) (int, error) {
	v, err := kv.int64(k)
	return int(v), err
}

// LuceneFollower is a JVM holding a DirectoryReader open on one index,
// reopened (openIfChanged) at each Reopen, as a search engine's refresh
// does. Close ends it.
type LuceneFollower struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stdin  io.WriteCloser
	sc     *bufio.Scanner
	stderr *bytes.Buffer
	out    strings.Builder
	closed sync.Once
	err    error // Close's
	// Opened is the first open.
	Opened LuceneOpened
}

// LuceneReopen is what one openIfChanged found.
type LuceneReopen struct {
	Changed  bool
	Segments int
	Docs     int64
	Hits     int64 // of 20 queries on the reader
}

// Follow starts LuceneTool follow on dir with the Directory kind and
// waits for its first open.
func (l Lucene) Follow(ctx context.Context, dir, kind string) (*LuceneFollower, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &LuceneFollower{cancel: cancel, stderr: &bytes.Buffer{}}
	f.cmd = l.command(ctx, "follow", dir, "--dir", kind)
	f.cmd.Stderr = f.stderr
	var err error
	if f.stdin, err = f.cmd.StdinPipe(); err == nil {
		var stdout io.ReadCloser
		if stdout, err = f.cmd.StdoutPipe(); err == nil {
			f.sc = bufio.NewScanner(stdout)
			err = f.cmd.Start()
		}
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("LuceneTool follow: %w", err)
	}
	line, err := f.next("open")
	if err == nil {
		kv, d := parseKV(line)
		f.Opened = LuceneOpened{Dir: d, Kind: kv["kind"]}
		f.Opened.Ms, err = kv.float("ms")
		if err == nil {
			f.Opened.Segments, err = kv.int("segments")
		}
		if err == nil {
			f.Opened.Docs, err = kv.int64("docs")
		}
	}
	if err == nil {
		_, err = f.next("ready")
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// next returns the rest of the tool's next line, which must start with
// word.
func (f *LuceneFollower) next(word string) (string, error) {
	if !f.sc.Scan() {
		return "", fmt.Errorf("LuceneTool follow: ended before %q: %v\nstdout:\n%s\nstderr:\n%s", word, f.sc.Err(), indent(f.out.String()), indent(tail(f.stderr.String(), 8192)))
	}
	line := f.sc.Text()
	f.out.WriteString(line + "\n")
	w, rest, _ := strings.Cut(line, " ")
	if w != word {
		return "", fmt.Errorf("LuceneTool follow: %q where %q was due\nstdout:\n%s", line, word, indent(f.out.String()))
	}
	return rest, nil
}

// Reopen has the JVM call openIfChanged and search the reader.
func (f *LuceneFollower) Reopen() (LuceneReopen, error) {
	var r LuceneReopen
	if _, err := io.WriteString(f.stdin, "reopen\n"); err != nil {
		return r, fmt.Errorf("LuceneTool follow: %w", err)
	}
	line, err := f.next("reopen")
	if err != nil {
		return r, err
	}
	kv, _ := parseKV(line)
	r.Changed = kv["changed"] == "true"
	var errs [3]error
	r.Segments, errs[0] = kv.int("segments")
	r.Docs, errs[1] = kv.int64("docs")
	r.Hits, errs[2] = kv.int64("hits")
	if err := errors.Join(errs[:]...); err != nil {
		return r, fmt.Errorf("LuceneTool follow: line %q: %w", line, err)
	}
	_, err = f.next("ready")
	return r, err
}

// Close has the JVM close its reader and exit, and waits for it. Later
// calls return the first's error.
func (f *LuceneFollower) Close() error {
	f.closed.Do(func() {
		defer f.cancel()
		io.WriteString(f.stdin, "quit\n")
		f.stdin.Close()
		for f.sc.Scan() {
		}
		if err := f.cmd.Wait(); err != nil {
			f.err = fmt.Errorf("LuceneTool follow: %w\nstderr:\n%s", err, indent(tail(f.stderr.String(), 8192)))
		}
	})
	return f.err
}
