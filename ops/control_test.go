package ops

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/tests/leakcheck"
)

func TestSelectEntries(t *testing.T) {
	var entries []entry.Entry
	for _, n := range []string{"idx/_0.cfs", "idx/_0.si", "idx2/x", "top"} {
		entries = append(entries, entry.Entry{Name: n})
	}
	names := func(es []entry.Entry) string {
		var out []string
		for _, e := range es {
			out = append(out, e.Name)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		paths []string
		want  string
		err   string
	}{
		{nil, "idx/_0.cfs idx/_0.si idx2/x top", ""},
		{[]string{"."}, "idx/_0.cfs idx/_0.si idx2/x top", ""},
		{[]string{"idx"}, "idx/_0.cfs idx/_0.si", ""}, // not idx2: a directory is a whole name
		{[]string{"idx/", "idx/_0.si", "top"}, "idx/_0.cfs idx/_0.si top", ""},
		{[]string{"nope"}, "", "nope: no such file"},
		{[]string{"../etc"}, "", "outside the mount"},
		{[]string{"id"}, "", "no such file"},
	} {
		got, err := selectEntries(entries, c.paths)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%v: err %v, want %q", c.paths, err, c.err)
		case c.err == "" && (err != nil || names(got) != c.want):
			t.Errorf("%v: %q, %v; want %q", c.paths, names(got), err, c.want)
		}
	}
}

// The control directory must be the user's own and closed to others.
func TestOwnDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ctl")
	if err := ownDir(dir); err != nil {
		t.Fatalf("a fresh directory: %v", err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("created with mode %o", fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(open, 0o777)
	if err := ownDir(open); err == nil || !strings.Contains(err.Error(), "others") {
		t.Errorf("a directory others may write: %v", err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if err := ownDir(link); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlink: %v", err)
	}
	// Two mountpoints, two sockets; the same one spelled twice, one.
	a, _ := SocketPath(dir, filepath.Join(base, "m1"))
	b, _ := SocketPath(dir, filepath.Join(base, "m2"))
	c, _ := SocketPath(dir, filepath.Join(base, ".", "m1"))
	if a == b || a != c || filepath.Dir(a) != dir {
		t.Errorf("socket paths %s %s %s", a, b, c)
	}
}

// A socket no daemon listens on is removed; a live one, and files
// that are not segfs's sockets, are left.
func TestSweepStaleSockets(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "00112233445566aa.sock")
	ln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stale := filepath.Join(dir, "00112233445566bb.sock")
	l2, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l2.(*net.UnixListener).SetUnlinkOnClose(false)
	l2.Close() // the socket file stays, with nobody listening
	other := filepath.Join(dir, "notes.sock")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sweepStaleSockets(dir, slog.New(slog.DiscardHandler))
	for p, want := range map[string]bool{live: true, stale: false, other: true} {
		_, err := os.Lstat(p)
		if got := err == nil; got != want {
			t.Errorf("%s: present %v, want %v", filepath.Base(p), got, want)
		}
	}
}

// startTestControl serves the control socket, held to lim, of an engine
// over files of a local directory (files × 64 KiB, parts of 64 KiB),
// whose background fetches, a warm's, start at rate bytes per second.
// It returns the control directory and mountpoint that reach it.
func startTestControl(t *testing.T, lim Limits, files int, rate int64) (string, string) {
	t.Helper()
	const ps = 64 << 10
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	src := t.TempDir()
	rng := rand.New(rand.NewPCG(3, uint64(files)))
	for i := range files {
		b := make([]byte, ps)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store, err := fetcher.Open(ctx, "file://"+src, fetcher.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := entry.FromObjects(ctx, store, objs, 2, log)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := cache.Open(cache.Config{Dir: filepath.Join(t.TempDir(), "cache"), MinFree: -1, IO: cache.IOBuffered, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sched := prefetch.New(prefetch.Config{Workers: 2, BackgroundRate: rate})
	rd, err := reader.New(store, pc, sched, reader.Config{Source: fetcher.CacheSource(store), PartSize: ps, Prefetch: prefetch.None, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	root := segfs.NewRoot(entries, rd, segfs.DefaultAttr(), log)
	dir := filepath.Join(t.TempDir(), "ctl")
	mnt := t.TempDir()
	c, err := StartControl(dir, mnt, lim, Daemon{Store: store, Disk: pc, Sched: sched, Reader: rd, Root: root}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		rd.Close()
		sched.Close()
		pc.Close()
	})
	return dir, mnt
}

// A warm that outlasts the control server's read and write timeouts
// runs to its end: the handler lifts the read deadline once it has the
// body, and each line sets its own write deadline.
func TestControlWarmOutlastsTimeouts(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { leakcheck.Settle(t, before, 5*time.Second) })
	lim := ControlLimits()
	lim.ReadTimeout, lim.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	// 4 parts of 64 KiB at 128 KiB/s: about 2 s.
	f, mnt := startTestControl(t, lim, 4, 128<<10)
	client, err := Client(f, mnt)
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	start := time.Now()
	resp, err := client.Post("http://segfs/warm", "application/json", strings.NewReader(`{"paths":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /warm: %s", resp.Status)
	}
	var last WarmEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
	}
	took := time.Since(start)
	if !last.Done || last.Failed != 0 || last.Bytes != 4<<16 {
		t.Errorf("after %v the warm ended with %+v (%v), want done with every byte cached", took, last, sc.Err())
	}
	if took < lim.ReadTimeout+lim.WriteTimeout {
		t.Errorf("the warm took %v, no longer than the timeouts: the test shows nothing", took)
	}
	// A status afterwards, on the same client, is answered.
	st, err := client.Get("http://segfs/status")
	if err != nil {
		t.Fatal(err)
	}
	st.Body.Close()
	if st.StatusCode != http.StatusOK {
		t.Errorf("GET /status: %s", st.Status)
	}
}

// The control socket serves at most its cap of connections at once;
// one that sends nothing is closed after the header timeout.
func TestControlSocketCapped(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() { leakcheck.Settle(t, before, 5*time.Second) })
	lim := ControlLimits()
	lim.MaxConns, lim.IdleTimeout = 2, time.Minute
	lim.ReadHeaderTimeout = 500 * time.Millisecond
	f, mnt := startTestControl(t, lim, 1, 0)
	path, err := SocketPath(f, mnt)
	if err != nil {
		t.Fatal(err)
	}
	var cs []*idleClient
	for range 5 {
		cs = append(cs, dialIdle(t, "unix", path, "GET /status HTTP/1.1\r\nHost: segfs\r\n\r\n"))
	}
	deadline := time.Now().Add(10 * time.Second)
	answered, _ := pollAll(cs, 50*time.Millisecond)
	for answered < lim.MaxConns && time.Now().Before(deadline) {
		answered, _ = pollAll(cs, 50*time.Millisecond)
	}
	if answered, _ = pollAll(cs, 300*time.Millisecond); answered != lim.MaxConns {
		t.Errorf("%d of %d idle clients answered, want the cap, %d", answered, len(cs), lim.MaxConns)
	}
	silent := dialIdle(t, "unix", path, "")
	for _, c := range cs {
		c.conn.Close()
		c.eof = true
	}
	silent.poll(10 * time.Second)
	if !silent.eof {
		t.Errorf("a connection that sent nothing was not closed: read %q", silent.got)
	}
}

// A status sums a repository mount's files by shard directory, largest
// first, and lists no directories for a mount of one.
func TestStatusByDirectory(t *testing.T) {
	files := []FileStatus{
		{Name: "u1/0/_0.cfs", Size: 100, Cached: 100}, {Name: "u1/0/segments_2", Size: 10},
		{Name: "u1/1/_0.cfs", Size: 500, Cached: 250}, {Name: "u2/0/_0.si", Size: 5, Cached: 5},
	}
	got := byDirectory(files)
	want := []DirStatus{
		{Name: "u1/1", Files: 1, Size: 500, Cached: 250, Fraction: 0.5},
		{Name: "u1/0", Files: 2, Size: 110, Cached: 100, Fraction: 100.0 / 110},
		{Name: "u2/0", Files: 1, Size: 5, Cached: 5, Fraction: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("byDirectory = %+v, want %+v", got, want)
	}
	if got := byDirectory(files[:2]); got != nil {
		t.Errorf("one directory: %+v, want none", got)
	}
}
