package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/restore"
	"github.com/segfs/segfs/tests/leakcheck"
	"github.com/segfs/segfs/tests/localstore"
	"github.com/segfs/segfs/tests/lucenegen"
	"github.com/segfs/segfs/tests/osremote"
)

// parseRestore parses `segfs restore ARGS...` as the command line would.
func parseRestore(t *testing.T, args ...string) *restoreCmd {
	t.Helper()
	var c cli
	p, err := kong.New(&c, kong.Name("segfs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(append([]string{"restore"}, args...)); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return &c.Restore
}

// runRestore restores source into dest with args and returns the summary
// and the exit code Run would end with (0 for none).
func runRestore(t *testing.T, source, dest string, args ...string) (*restore.Summary, int, error) {
	t.Helper()
	return runRestoreCtx(t, context.Background(), slog.New(slog.DiscardHandler), source, dest, args...)
}

func runRestoreCtx(t *testing.T, ctx context.Context, log *slog.Logger, source, dest string, args ...string) (*restore.Summary, int, error) {
	t.Helper()
	t.Setenv("GOMEMLIMIT", "off") // the test process keeps its own memory limit
	c := parseRestore(t, append(args, source, dest)...)
	if err := c.validate(); err != nil {
		return nil, 2, err
	}
	sum, err := c.restore(ctx, log, os.Stderr)
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return sum, ee.code, err
	case err != nil:
		return sum, 1, err
	case len(sum.Failed) > 0:
		return sum, 1, nil
	}
	return sum, 0, nil
}

func fileURL(dir string) string { return (&url.URL{Scheme: "file", Path: dir}).String() }

// sameTree fails the test unless got holds exactly want, byte-exact.
func sameTree(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s is missing", name)
		case !bytes.Equal(g, w):
			t.Errorf("%s: %d bytes, want %d, not the same", name, len(g), len(w))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s should not be there", name)
		}
	}
}

func lucenFile(t *testing.T, name string, size int64, seed uint64) []byte {
	t.Helper()
	b, err := lucenegen.GenerateFile(name, size, seed)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func randomData(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// plainShard writes a plain source: Lucene files of several parts and of
// less than one, nested names, a file that is not a Lucene file, an empty
// lock file, and a seekable zstd object. It returns the source's
// directory and the files a restore must write.
func plainShard(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	logical := bytes.Repeat([]byte(`{"field":"a value that compresses","n":12345}`+"\n"), 9000)
	var zst bytes.Buffer
	if _, _, err := compress.Encode(context.Background(), &zst, bytes.NewReader(logical), compress.EncoderOptions{FrameSize: 50 << 10}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{
		"index/_0.cfs":     lucenFile(t, "_0.cfs", 300<<10+17, 1),
		"index/_0.si":      lucenFile(t, "_0.si", 500, 2),
		"index/_1.doc":     lucenFile(t, "_1.doc", 64<<10, 3),
		"index/sub/_2.tim": lucenFile(t, "_2.tim", 130<<10, 4),
		"notes.txt":        randomData(5, 70<<10+3),
		"write.lock":       {},
		"index/_0.fdt":     logical,
	}
	src := t.TempDir()
	objs := map[string][]byte{}
	for n, b := range want {
		objs[n] = b
	}
	delete(objs, "index/_0.fdt")
	objs["index/_0.fdt.zst"] = zst.Bytes()
	localstore.WriteTree(t, src, objs)
	return src, want
}

// A plain file:// source restores byte-exact, with the objects'
// modification times, leaving no temporary file; a second run fetches
// nothing; a run after damage fetches only the files that are not as the
// source has them, at the level of --verify.
func TestRestorePlainAndResume(t *testing.T) {
	t.Cleanup(func(before int) func() {
		return func() { leakcheck.Settle(t, before, 5*time.Second) }
	}(runtime.NumGoroutine()))
	src, want := plainShard(t)
	dest := filepath.Join(t.TempDir(), "new", "dest") // created
	for _, cacheArgs := range [][]string{{"--no-cache"}, {"--cache-dir", filepath.Join(t.TempDir(), "cache")}} {
		t.Run(cacheArgs[0], func(t *testing.T) {
			os.RemoveAll(dest)
			args := append([]string{"--part-size", "64KiB", "--max-fetches", "3"}, cacheArgs...)
			sum, code, err := runRestore(t, fileURL(src), dest, args...)
			if code != 0 {
				t.Fatalf("exit %d: %v %v", code, err, sum)
			}
			if sum.Restored != len(want) || sum.Skipped != 0 {
				t.Errorf("summary %v: want %d restored", sum, len(want))
			}
			sameTree(t, localstore.ReadTree(t, dest), want)
			fi, err := os.Stat(filepath.Join(dest, "index/_0.cfs"))
			si, err2 := os.Stat(filepath.Join(src, "index/_0.cfs"))
			if err != nil || err2 != nil || !fi.ModTime().Equal(si.ModTime()) {
				t.Errorf("restored modification time %v, the source's %v (%v %v)", fi.ModTime(), si.ModTime(), err, err2)
			}

			// Nothing to do: every file is skipped without a GET.
			sum, code, err = runRestore(t, fileURL(src), dest, args...)
			if code != 0 || sum.Restored != 0 || sum.Skipped != len(want) {
				t.Errorf("second run: exit %d (%v), %v; want every file skipped", code, err, sum)
			}
			// Listing reads the seek table of the one .zst object; no
			// other GET.
			if sum.Gets > 2 {
				t.Errorf("second run made %d GETs; want only the seek table's", sum.Gets)
			}

			// Damage: one file removed, one truncated, one with its footer
			// checksum changed (same length and time), one with a byte
			// changed in the middle (a new modification time), and a
			// crashed run's temporary file.
			at := func(n string) string { return filepath.Join(dest, filepath.FromSlash(n)) }
			if err := os.Remove(at("index/_0.si")); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(at("notes.txt"), 100); err != nil {
				t.Fatal(err)
			}
			flipAt(t, at("index/_1.doc"), int64(len(want["index/_1.doc"])-1), true)
			flipAt(t, at("index/sub/_2.tim"), 5000, false)
			localstore.WriteTree(t, dest, map[string][]byte{"index/._0.cfs.segfs-restore": []byte("partial")})

			sum, code, err = runRestore(t, fileURL(src), dest, args...)
			if code != 0 {
				t.Fatalf("after damage: exit %d: %v", code, err)
			}
			// The footer check does not read the body, and a plain source
			// has no checksum to hold the footer to: _1.doc, whose footer
			// still parses, stays.
			if sum.Restored != 3 {
				t.Errorf("after damage: %v; want 3 restored (_0.si, notes.txt, _2.tim)", sum)
			}
			got := localstore.ReadTree(t, dest)
			if bytes.Equal(got["index/_1.doc"], want["index/_1.doc"]) {
				t.Errorf("_1.doc was fetched again; the footer check cannot tell")
			}
			got["index/_1.doc"] = want["index/_1.doc"]
			sameTree(t, got, want) // the temporary file is gone too

			sum, code, err = runRestore(t, fileURL(src), dest, append(args, "--verify", "deep")...)
			if code != 0 || sum.Restored != 1 || sum.Skipped != len(want)-1 {
				t.Errorf("--verify deep: exit %d (%v), %v; want _1.doc fetched again, the rest skipped", code, err, sum)
			}
			sameTree(t, localstore.ReadTree(t, dest), want)
		})
	}
}

// flipAt changes the byte at off of the file; with keepTime the file's
// modification time is put back.
func flipAt(t *testing.T, p string, off int64, keepTime bool) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x5a
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	mt := fi.ModTime()
	if !keepTime {
		mt = mt.Add(-time.Hour)
	}
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
}

// A restore interrupted after its first file leaves every file under its
// final name complete, and no temporary file; the next run fetches the
// rest only.
func TestRestoreInterrupted(t *testing.T) {
	src, want := plainShard(t)
	dest := t.TempDir()
	args := []string{"--part-size", "16KiB", "--max-fetches", "2", "--no-cache"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sum, _, err := runRestoreCtx(t, ctx, slog.New(onMessage{"restored", cancel}), fileURL(src), dest, args...)
	if err != nil || ctx.Err() == nil {
		t.Fatalf("interrupted run: %v, %v (context %v)", sum, err, ctx.Err())
	}
	if sum.Restored == 0 || sum.Restored == len(want) || len(sum.Failed) != 0 {
		t.Fatalf("interrupted run: %v; want some files restored, none failed", sum)
	}
	got := localstore.ReadTree(t, dest)
	if len(got) != sum.Restored {
		t.Errorf("%d files in DEST_DIR, %d restored: a temporary file is left", len(got), sum.Restored)
	}
	for name, b := range got {
		if !bytes.Equal(b, want[name]) {
			t.Errorf("%s is under its final name but not the source's bytes", name)
		}
	}
	first := sum.Restored
	sum, code, err := runRestore(t, fileURL(src), dest, args...)
	if code != 0 || sum.Skipped != first || sum.Restored != len(want)-first {
		t.Errorf("second run: exit %d (%v), %v; want the %d restored skipped and the rest fetched", code, err, sum, first)
	}
	sameTree(t, localstore.ReadTree(t, dest), want)
}

// An OpenSearch shard in a local repository restores as its Lucene
// directory, segments_N from the metadata; a blob changed after its
// metadata (same length, its footer intact) passes the footer check, and
// the deep check refuses it, leaving no file under its name.
func TestRestoreOpenSearch(t *testing.T) {
	root := t.TempDir()
	o := osremote.Options{IndexUUID: "restoreUUID0123456789a", Shard: 4, PathType: layout.Fixed, Version: 2, Seed: 77}
	r := osremote.New(osremote.DirPut(root), o)
	files, err := osremote.ShardFiles([]string{"_0", "_1"}, 5, 150<<10, 77)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Upload(files, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for n, b := range files {
		want[n] = b
	}
	want[layout.SegmentsFileName(ref.Metadata.Generation)] = ref.SegmentInfos
	layoutArgs := []string{"--layout", "opensearch", "--index-uuid", o.IndexUUID, "--shard", "4", "--no-cache", "--part-size", "32KiB"}

	dest := t.TempDir()
	if sum, code, err := runRestore(t, fileURL(root), dest, layoutArgs...); code != 0 {
		t.Fatalf("exit %d: %v %v", code, err, sum)
	}
	sameTree(t, localstore.ReadTree(t, dest), want)

	// Change a byte in the middle of a blob, the length and footer kept.
	var victim string
	for n := range files {
		if strings.HasSuffix(n, ".fdt") && strings.HasPrefix(n, "_1") {
			victim = n
		}
	}
	blob := filepath.Join(root, filepath.FromSlash(ref.Blobs[victim]))
	flipAt(t, blob, int64(len(files[victim])/2), true)

	dest2 := t.TempDir()
	sum, code, err := runRestore(t, fileURL(root), dest2, layoutArgs...)
	if code != 0 {
		t.Fatalf("footer check: exit %d: %v %v; the footer still matches the metadata", code, err, sum)
	}
	dest3 := t.TempDir()
	sum, code, _ = runRestore(t, fileURL(root), dest3, append(layoutArgs, "--verify", "deep")...)
	if code != 1 || len(sum.Failed) != 1 || sum.Failed[0].Name != victim || !errors.Is(sum.Failed[0].Err, lucene.ErrChecksum) {
		t.Fatalf("deep check: exit %d, %v, failed %v; want %s failed on its checksum", code, sum, sum.Failed, victim)
	}
	got := localstore.ReadTree(t, dest3)
	if _, ok := got[victim]; ok {
		t.Errorf("%s is under its name after failing the deep check", victim)
	}
	delete(want, victim)
	sameTree(t, got, want) // and no temporary file
}

// A DEST_DIR holding something else is refused with exit 2, untouched.
func TestRestoreRefusesForeignDest(t *testing.T) {
	src, _ := plainShard(t)
	dest := t.TempDir()
	localstore.WriteTree(t, dest, map[string][]byte{"index/_0.si": []byte("old"), "index/mine.txt": []byte("keep me")})
	before := localstore.ReadTree(t, dest)
	_, code, err := runRestore(t, fileURL(src), dest, "--no-cache")
	if code != 2 || err == nil || !strings.Contains(err.Error(), "index/mine.txt") {
		t.Fatalf("exit %d, %v; want 2 naming index/mine.txt", code, err)
	}
	sameTree(t, localstore.ReadTree(t, dest), before)
}

// A DEST_DIR that is a symlink is checked where it leads: a foreign
// directory behind a link is refused as it would be without one.
func TestRestoreRefusesForeignDestBehindALink(t *testing.T) {
	src, _ := plainShard(t)
	foreign := t.TempDir()
	localstore.WriteTree(t, foreign, map[string][]byte{"index/_0.si": []byte("old"), "index/mine.txt": []byte("keep me")})
	before := localstore.ReadTree(t, foreign)
	link := filepath.Join(t.TempDir(), "dest")
	if err := os.Symlink(foreign, link); err != nil {
		t.Fatal(err)
	}
	_, code, err := runRestore(t, fileURL(src), link, "--no-cache")
	if code != 2 || err == nil || !strings.Contains(err.Error(), "index/mine.txt") {
		t.Fatalf("exit %d, %v; want 2 naming index/mine.txt", code, err)
	}
	sameTree(t, localstore.ReadTree(t, foreign), before)
}

// A --cache-dir inside DEST_DIR is refused however it is named: through
// a symlink to DEST_DIR, or with DEST_DIR named through one.
func TestRestoreRefusesCacheInDestBehindALink(t *testing.T) {
	src, _ := plainShard(t)
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "dest")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range [][2]string{
		{link, filepath.Join(real, "cache")},
		{real, filepath.Join(link, "cache", "deeper")},
	} {
		_, code, err := runRestore(t, fileURL(src), tc[0], "--cache-dir", tc[1])
		if code != 2 || err == nil || !strings.Contains(err.Error(), "is inside DEST_DIR") {
			t.Errorf("DEST_DIR %s, --cache-dir %s: exit %d, %v; want 2, the cache inside DEST_DIR", tc[0], tc[1], code, err)
		}
	}
	if ents, _ := os.ReadDir(real); len(ents) != 0 {
		t.Errorf("DEST_DIR holds %d entries after the refusals; want none", len(ents))
	}
}

// Usage errors exit 2 before anything is read.
func TestRestoreUsage(t *testing.T) {
	dest := t.TempDir()
	file := filepath.Join(dest, "f")
	localstore.WriteTree(t, dest, map[string][]byte{"f": nil})
	for _, args := range [][]string{
		{"--no-cache", "--cache-dir", dest, "file:///x", dest},
		{"--part-size", "1KiB", "file:///x", dest},
		{"--max-fetches", "0", "file:///x", dest},
		{"--shard", "1", "file:///x", dest},
		{"not-a-url", dest},
		{"file:///x", file},
		{"--cache-dir", filepath.Join(dest, "sub", "cache"), "file:///x", dest},
	} {
		if err := parseRestore(t, args...).validate(); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}

// onMessage is a log handler that runs do for each record with msg.
type onMessage struct {
	msg string
	do  func()
}

func (h onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h onMessage) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h onMessage) WithGroup(string) slog.Handler            { return h }
func (h onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.do()
	}
	return nil
}

// A file whose object goes after the listing fails alone, and once one
// of its pieces has failed the rest of it is not fetched (its temporary
// file refuses them): the GETs it costs are those of the pieces already
// running, not of its size.
func TestRestoreStopsAFailedFile(t *testing.T) {
	src, want := plainShard(t)
	args := []string{"--part-size", "16KiB", "--max-fetches", "2", "--no-cache"}
	base, code, err := runRestore(t, fileURL(src), t.TempDir(), args...)
	if code != 0 {
		t.Fatalf("restore without the big file: exit %d: %v", code, err)
	}

	const big = "index/_9.fdt"
	localstore.WriteTree(t, src, map[string][]byte{big: randomData(9, 4<<20)}) // 256 pieces
	dest := t.TempDir()
	gone := onMessage{"restoring", func() { os.Remove(filepath.Join(src, filepath.FromSlash(big))) }}
	sum, code, err := runRestoreCtx(t, context.Background(), slog.New(gone), fileURL(src), dest, args...)
	if code != 1 || len(sum.Failed) != 1 || sum.Failed[0].Name != big || sum.Restored != len(want) {
		t.Fatalf("exit %d (%v), %v; want 1, %s failed and the %d others restored", code, err, sum, big, len(want))
	}
	if _, err := os.Stat(filepath.Join(dest, filepath.FromSlash(big))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after its failure: %v; want no file under its name", big, err)
	}
	extra := sum.Gets - base.Gets
	t.Logf("the failed file cost %d GETs (%d for the shard without it)", extra, base.Gets)
	if limit := int64(2 * restoreWorkers(2)); extra > limit {
		t.Errorf("the failed file cost %d GETs; want at most %d (the pieces running when it failed)", extra, limit)
	}
}

// restoreMark is the extended attribute restore marks DEST_DIR with.
const restoreMark = "user.segfs.restore"
