package cache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	c := openTest(t, testConfig(t))
	for _, n := range []int{1, testBlock - 1, testBlock, testBlock + 1, 4 * testBlock, testPart} {
		k := key("round/trip", int64(n))
		want := partData(k, n)
		mustPut(t, c, k, want)
		got, ok := read(t, c, k, 0, testPart)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("size %d: read %d bytes (hit %v), want the %d put", n, len(got), ok, n)
		}
		if fi, err := os.Stat(partPath(c, k)); err != nil || fi.Size() != headerLen(k, int64(n), testBlock)+int64(n) {
			t.Errorf("size %d: part file %v, %v", n, fi, err)
		}
	}
	st := c.Stats()
	if st.Hits != 6 || st.Puts != 6 || st.Misses != 0 {
		t.Errorf("stats %+v", st)
	}
	checkAccounting(t, c)
}

// TestReadAtBorders reads ranges that start, end and straddle block
// borders of a part of 5.5 blocks.
func TestReadAtBorders(t *testing.T) {
	c := openTest(t, testConfig(t))
	const n = 5*testBlock + testBlock/2
	k := key("borders", 0)
	data := partData(k, n)
	mustPut(t, c, k, data)
	const B = testBlock
	for _, tc := range []struct {
		name    string
		off     int64
		len     int
		wantLen int
	}{
		{"inside the first block", 10, 100, 100},
		{"one whole block", B, B, B},
		{"up to a border", B / 2, B / 2, B / 2},
		{"from a border", 2 * B, 10, 10},
		{"across one border", B - 1, 2, 2},
		{"across three borders", B / 2, 3 * B, 3 * B},
		{"whole blocks then a partial one", 0, 2*B + 7, 2*B + 7},
		{"a partial block then whole ones", B - 7, 2*B + 7, 2*B + 7},
		{"the short last block", 5 * B, B / 2, B / 2},
		{"to the end", n - 3, 3, 3},
		{"past the end is clamped", n - 3, 100, 3},
		{"everything", 0, n, n},
		{"at the end", n, 10, 0},
		{"past the end", n + 10, 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := read(t, c, k, tc.off, tc.len)
			if !ok {
				t.Fatal("miss")
			}
			want := data[min(tc.off, n):min(tc.off+int64(tc.wantLen), n)]
			if !bytes.Equal(got, want) {
				t.Errorf("read [%d,+%d): %d bytes, not the expected %d", tc.off, tc.len, len(got), len(want))
			}
		})
	}
}

func TestMissAndContains(t *testing.T) {
	c := openTest(t, testConfig(t))
	k := key("absent", 3)
	if _, ok := read(t, c, k, 0, 10); ok {
		t.Fatal("hit on an empty cache")
	}
	if c.Contains(k) {
		t.Fatal("Contains on an empty cache")
	}
	mustPut(t, c, k, []byte("x"))
	if !c.Contains(k) {
		t.Fatal("!Contains after Put")
	}
	other := k
	other.ETag = `"etag-2"`
	if c.Contains(other) {
		t.Fatal("Contains for another ETag")
	}
	if st := c.Stats(); st.Misses != 1 {
		t.Errorf("misses %d, want 1", st.Misses)
	}
}

func TestPutExistingIsNoop(t *testing.T) {
	c := openTest(t, testConfig(t))
	k := key("twice", 0)
	mustPut(t, c, k, []byte("first"))
	mustPut(t, c, k, []byte("first"))
	if st := c.Stats(); st.Puts != 1 || st.Parts != 1 {
		t.Errorf("puts %d parts %d, want 1 and 1", st.Puts, st.Parts)
	}
}

func TestInvalidArguments(t *testing.T) {
	c := openTest(t, testConfig(t))
	ctx := context.Background()
	k := key("bad", 0)
	for name, err := range map[string]error{
		"empty data":       c.Put(ctx, k, nil),
		"data too long":    c.Put(ctx, k, make([]byte, testPart+1)),
		"zero part size":   c.Put(ctx, Key{Object: "x", Index: 0}, []byte("x")),
		"negative index":   c.Put(ctx, Key{Object: "x", PartSize: 10, Index: -1}, []byte("x")),
		"offset overflow":  c.Put(ctx, Key{Object: "x", PartSize: 1 << 40, Index: 1 << 30}, []byte("x")),
		"object too long":  c.Put(ctx, Key{Object: strings.Repeat("x", 1<<16), PartSize: 10}, []byte("x")),
		"negative offset":  func() error { _, _, err := c.ReadAt(ctx, k, make([]byte, 1), -1); return err }(),
		"offset past part": func() error { _, _, err := c.ReadAt(ctx, k, make([]byte, 1), testPart); return err }(),
	} {
		if !errors.Is(err, errBadKey) {
			t.Errorf("%s: %v, want an error wrapping errBadKey", name, err)
		}
	}
}

func TestPermissions(t *testing.T) {
	t.Run("created private", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.Dir = filepath.Join(t.TempDir(), "a", "b", "cache")
		c := openTest(t, cfg)
		mustPut(t, c, key("perm", 0), []byte("data"))
		for path, want := range map[string]os.FileMode{
			cfg.Dir:                       0o700 | os.ModeDir,
			filepath.Join(cfg.Dir, "tmp"): 0o700 | os.ModeDir,
			filepath.Dir(partPath(c, key("perm", 0))): 0o700 | os.ModeDir,
			partPath(c, key("perm", 0)):               0o600,
			filepath.Join(cfg.Dir, "lock"):            0o600,
		} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != want {
				t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
			}
		}
	})
	for _, mode := range []os.FileMode{0o777, 0o770, 0o702, 0o1777} {
		t.Run("refuses "+mode.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "open")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(t)
			cfg.Dir = dir
			if c, err := Open(cfg); !errors.Is(err, ErrUnsafeDir) {
				if c != nil {
					c.Close()
				}
				t.Fatalf("Open of a %v directory: %v, want ErrUnsafeDir", mode, err)
			}
		})
	}
	t.Run("refuses another user's directory", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to chown")
		}
		dir := filepath.Join(t.TempDir(), "theirs")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t)
		cfg.Dir = dir
		if _, err := Open(cfg); !errors.Is(err, ErrUnsafeDir) {
			t.Fatalf("Open: %v, want ErrUnsafeDir", err)
		}
	})
	t.Run("refuses a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t)
		cfg.Dir = path
		if _, err := Open(cfg); err == nil {
			t.Fatal("Open of a regular file succeeded")
		}
	})
}

// TestKeysNeverBecomePaths puts parts under hostile keys and checks that
// every file lands in its hashed place inside the cache directory.
func TestKeysNeverBecomePaths(t *testing.T) {
	parent := t.TempDir()
	cfg := testConfig(t)
	cfg.Dir = filepath.Join(parent, "cache")
	c := openTest(t, cfg)
	keys := []string{"../../escape", "/etc/passwd", "a/../../b", strings.Repeat("long/", 200), "nul\x00byte", "", ".", "..", "ab/../../.."}
	for i, obj := range keys {
		k := key(obj, int64(i))
		k.Source = "../" + obj
		mustPut(t, c, k, []byte(obj+"!"))
		got, ok := read(t, c, k, 0, 2000)
		if !ok || string(got) != obj+"!" {
			t.Errorf("key %q: read %q (hit %v)", obj, got, ok)
		}
	}
	des, err := os.ReadDir(parent)
	if err != nil || len(des) != 1 || des[0].Name() != "cache" {
		t.Fatalf("the cache's parent holds %v (%v), want only the cache", des, err)
	}
	err = filepath.WalkDir(cfg.Dir, func(path string, de os.DirEntry, err error) error {
		rel, _ := filepath.Rel(cfg.Dir, path)
		switch {
		case err != nil:
			return err
		case de.IsDir():
			if rel != "." && rel != "tmp" && len(rel) != 2 {
				t.Errorf("unexpected directory %s", rel)
			}
		case rel == "lock":
		default:
			if _, ok := parsePartName(filepath.Dir(rel), filepath.Base(rel)); !ok {
				t.Errorf("unexpected file %s", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestInUse(t *testing.T) {
	cfg := testConfig(t)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c2, err := Open(cfg); !errors.Is(err, ErrInUse) {
		if c2 != nil {
			c2.Close()
		}
		t.Fatalf("second Open: %v, want ErrInUse", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	c2.Close()
}

// TestTempSweep: Open removes the temporary files a crash left, the names
// segfs gives them, and leaves everything else in tmp/ alone.
func TestTempSweep(t *testing.T) {
	cfg := testConfig(t)
	c, err := Open(cfg) // a cache directory, as a run leaves it
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	tmp := filepath.Join(cfg.Dir, "tmp")
	outside := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(outside, []byte("not the cache's"), 0o600); err != nil {
		t.Fatal(err)
	}
	ours := []string{"0123456789abcdef.1.tmp", "0123456789abcdef.2.tmp.seal", "fedcba9876543210.3.tmp"}
	for _, name := range ours[:2] {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte("half a part"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink under one of segfs's names: the link goes, not its target.
	if err := os.Symlink(outside, filepath.Join(tmp, ours[2])); err != nil {
		t.Fatal(err)
	}
	theirs := map[string]string{
		"torn.tmp":                          "a file",
		"nested/x":                          "in a directory",
		"0123456789abcdef.9.tmp/notes.txt":  "in a directory named as segfs names temporary files",
		"0123456789ABCDEF.1.tmp":            "upper case: not a name segfs makes",
		"0123456789abcdef.tmp":              "no sequence number",
		"0123456789abcdef.1.tmp.seal.extra": "a suffix segfs does not add",
	}
	for name, content := range theirs {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c = openTest(t, cfg)
	for _, name := range ours {
		if fileExists(filepath.Join(tmp, name)) {
			t.Errorf("tmp/%s is left after Open", name)
		}
	}
	for name, content := range theirs {
		if b, err := os.ReadFile(filepath.Join(tmp, name)); err != nil || string(b) != content {
			t.Errorf("tmp/%s: %q, %v after Open; want it left alone", name, b, err)
		}
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "not the cache's" {
		t.Errorf("the symlink's target: %q, %v; want it untouched", b, err)
	}
	mustPut(t, c, key("after sweep", 0), []byte("ok"))
	if got, ok := read(t, c, key("after sweep", 0), 0, 10); !ok || string(got) != "ok" {
		t.Errorf("after the sweep: read %q (hit %v)", got, ok)
	}
}

func TestRestart(t *testing.T) {
	cfg := testConfig(t)
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var keys []Key
	for i := range 50 {
		k := key("restart", int64(i))
		keys = append(keys, k)
		mustPut(t, c, k, partData(k, 1+i*97))
	}
	before := c.Stats()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = openTest(t, cfg)
	st := c.Stats()
	if !st.IndexLoaded || st.LoadedParts != 50 || st.Parts != 50 || st.Bytes != before.Bytes {
		t.Fatalf("after restart: %+v; before: %d parts, %d bytes", st, before.Parts, before.Bytes)
	}
	t.Logf("index of %d parts loaded in %v", st.LoadedParts, st.IndexLoadTime)
	for i, k := range keys {
		got, ok := read(t, c, k, 0, testPart)
		if !ok || !bytes.Equal(got, partData(k, 1+i*97)) {
			t.Fatalf("part %d after restart: hit %v, %d bytes", i, ok, len(got))
		}
	}
	if st := c.Stats(); st.Hits != 50 || st.Puts != 0 {
		t.Errorf("after restart: %+v", st)
	}
	checkAccounting(t, c)
}

func TestClosed(t *testing.T) {
	c, err := Open(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Put(context.Background(), key("x", 0), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, _, err := c.ReadAt(context.Background(), key("x", 0), make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadAt after Close: %v", err)
	}
}

func TestReadAtHonoursContext(t *testing.T) {
	c := openTest(t, testConfig(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := c.ReadAt(ctx, key("x", 0), make([]byte, 1), 0); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadAt on a done context: %v", err)
	}
}

// TestPutWaitsForWriterSlot checks that Put waits for a writer slot, that
// ctx bounds the wait and that Close ends it.
func TestPutWaitsForWriterSlot(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxWriters = 1
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, c)
	c.sem <- struct{}{} // the only slot is taken

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Put(ctx, key("wait", 0), []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a done context: %v", err)
	}
	done := make(chan error)
	go func() { done <- c.Put(context.Background(), key("wait", 1), []byte("x")) }()
	closed := make(chan error)
	go func() { closed <- c.Close() }()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("Put waiting when Close came: %v", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if fileExists(partPath(c, key("wait", 1))) {
		t.Error("a Put that failed left its part")
	}
}

func TestStaleFileDropped(t *testing.T) {
	c := openTest(t, testConfig(t))
	k := key("vanishes", 0)
	mustPut(t, c, k, []byte("x"))
	if err := os.Remove(partPath(c, k)); err != nil {
		t.Fatal(err)
	}
	if _, ok := read(t, c, k, 0, 1); ok {
		t.Fatal("hit on a removed file")
	}
	checkAccounting(t, c)
	mustPut(t, c, k, []byte("x"))
	if _, ok := read(t, c, k, 0, 1); !ok {
		t.Fatal("miss after Put again")
	}
}
