package push

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/fetcher"
)

// jsonLines returns n bytes of compressible JSON records.
func jsonLines(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, `{"vendor_id":%d,"fare":%.2f,"payment":"%s"}`+"\n",
			rng.IntN(3), rng.Float64()*80, []string{"cash", "card"}[rng.IntN(2)])
	}
	return b.Bytes()[:n]
}

func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed)}).Read(b)
	return b
}

// testShard writes a small shard and returns its directory and files.
// With testOptions, seg/_0.fdt (300 KiB) is compressed; seg/_1.fdt is
// below the size threshold and seg/_0.doc does not match.
func testShard(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	files := map[string][]byte{
		"seg/_0.fdt": jsonLines(1, 300<<10+17),
		"seg/_1.fdt": jsonLines(2, 10<<10),
		"seg/_0.doc": randomBytes(3, 200<<10),
		"segments_1": randomBytes(4, 321),
		"write.lock": {},
	}
	dir := t.TempDir()
	for name, data := range files {
		writeLocal(t, filepath.Join(dir, name), data)
	}
	return dir, files
}

func writeLocal(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func testOptions(dir string) Options {
	return Options{
		Dir:             dir,
		CompressMinSize: 100 << 10,
		CompressMatch:   []string{"*.fdt"},
		Encoder:         compress.EncoderOptions{FrameSize: 64 << 10},
		Parallel:        3,
		TmpDir:          os.TempDir(),
		Store:           fetcher.Config{Logger: slog.New(slog.DiscardHandler)},
	}
}

// pushTo runs a push of opt.Dir to tgt as Run does after opening the
// destination, and returns the per-file results sorted by target key.
func pushTo(ctx context.Context, opt Options, tgt target) (Summary, []FileResult, error) {
	var mu sync.Mutex
	var results []FileResult
	opt.OnFile = func(r FileResult) {
		mu.Lock()
		defer mu.Unlock()
		results = append(results, r)
	}
	if err := opt.validate(); err != nil {
		return Summary{}, nil, err
	}
	files, err := walk(&opt)
	if err != nil {
		return Summary{}, nil, err
	}
	sum, err := run(ctx, &opt, tgt, files)
	slices.SortFunc(results, func(a, b FileResult) int { return strings.Compare(a.Target, b.Target) })
	return sum, results, err
}

func mustPush(t *testing.T, opt Options, tgt target) (Summary, []FileResult) {
	t.Helper()
	sum, res, err := pushTo(context.Background(), opt, tgt)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	return sum, res
}

func shaHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestWantCompressed(t *testing.T) {
	for _, c := range []struct {
		match []string
		name  string
		size  int64
		want  bool
	}{
		{[]string{"*.fdt"}, "_0.fdt", 100, true},
		{[]string{"*.fdt"}, "_0.fdt", 99, false}, // below the threshold
		{[]string{"*.fdt"}, "_0.doc", 1000, false},
		{[]string{"*.fdt"}, "_0.fdtx", 1000, false},
		{[]string{"*.doc", "*.fdt"}, "_0.fdt", 100, true},
		{[]string{"*"}, "segments_1", 100, true},
		{nil, "_0.fdt", 1 << 40, false}, // an empty match compresses nothing
		{[]string{"_0.*"}, "_0.si", 100, true},
	} {
		opt := Options{CompressMinSize: 100, CompressMatch: c.match}
		if got := opt.wantCompressed(c.name, c.size); got != c.want {
			t.Errorf("match %q: wantCompressed(%s, %d) = %v, want %v", c.match, c.name, c.size, got, c.want)
		}
	}
}

// TestPushStoresPolicyAndMetadata: the first push stores each file in the
// form the policy picks, with its digest and size, and a compressed
// object decodes to the local file.
func TestPushStoresPolicyAndMetadata(t *testing.T) {
	dir, files := testShard(t)
	tgt := newMemTarget()
	sum, res := mustPush(t, testOptions(dir), tgt)

	wantKeys := []string{"seg/_0.doc", "seg/_0.fdt.zst", "seg/_1.fdt", "segments_1", "write.lock"}
	if got := tgt.keys(); !slices.Equal(got, wantKeys) {
		t.Fatalf("stored keys %v, want %v", got, wantKeys)
	}
	if sum.Raw != 4 || sum.Compressed != 1 || sum.Skipped != 0 || sum.Removed != 0 || sum.Deleted != 0 {
		t.Errorf("summary %+v", sum)
	}
	zst, _ := tgt.get("seg/_0.fdt.zst")
	if sum.CompressedIn != int64(len(files["seg/_0.fdt"])) || sum.CompressedOut != int64(len(zst.data)) {
		t.Errorf("compressed %d -> %d, want %d -> %d", sum.CompressedIn, sum.CompressedOut, len(files["seg/_0.fdt"]), len(zst.data))
	}
	if sum.Ratio() < 2 {
		t.Errorf("ratio %.2f on JSON lines", sum.Ratio())
	}
	if got := decodeObject(t, zst.data); !bytes.Equal(got, files["seg/_0.fdt"]) {
		t.Error("seg/_0.fdt.zst does not decode to seg/_0.fdt")
	}
	for name, data := range files {
		key := name
		if name == "seg/_0.fdt" {
			key += CompressedSuffix
		} else if o, _ := tgt.get(key); !bytes.Equal(o.data, data) {
			t.Errorf("%s: stored bytes differ", key)
		}
		o, _ := tgt.get(key)
		if o.meta[MetaSHA256] != shaHex(data) || o.meta[MetaSize] != strconv.Itoa(len(data)) {
			t.Errorf("%s: metadata %v", key, o.meta)
		}
	}
	for _, r := range res {
		want := Raw
		if r.Key == "seg/_0.fdt" {
			want = Compressed
		}
		if r.Action != want || r.Size != int64(len(files[r.Key])) {
			t.Errorf("result %+v: want action %s size %d", r, want, len(files[r.Key]))
		}
	}
}

// TestPushSkipsWhatIsThere: a second push uploads nothing; a file whose
// content changed (same size) and an object whose metadata does not match
// are uploaded again, and only they.
func TestPushSkipsWhatIsThere(t *testing.T) {
	dir, files := testShard(t)
	tgt := newMemTarget()
	mustPush(t, testOptions(dir), tgt)
	before := len(tgt.putKeys())

	sum, _ := mustPush(t, testOptions(dir), tgt)
	if sum.Skipped != len(files) || sum.Raw+sum.Compressed != 0 || len(tgt.putKeys()) != before {
		t.Fatalf("second push: %+v, %d puts", sum, len(tgt.putKeys())-before)
	}

	changed := slices.Clone(files["seg/_0.doc"])
	changed[100] ^= 1
	writeLocal(t, filepath.Join(dir, "seg/_0.doc"), changed)
	tgt.mu.Lock()
	o := tgt.objs["segments_1"]
	o.meta[MetaSHA256] = shaHex(nil) // an object written by someone else
	tgt.mu.Unlock()

	sum, _ = mustPush(t, testOptions(dir), tgt)
	if got := tgt.putKeys()[before:]; !slices.Equal(slices.Sorted(slices.Values(got)), []string{"seg/_0.doc", "segments_1"}) {
		t.Errorf("third push put %v, want seg/_0.doc and segments_1", got)
	}
	if sum.Raw != 2 || sum.Skipped != len(files)-2 {
		t.Errorf("third push summary %+v", sum)
	}
	if o, _ := tgt.get("seg/_0.doc"); !bytes.Equal(o.data, changed) {
		t.Error("seg/_0.doc: not the changed content")
	}
}

// TestPolicyChangeReplacesOtherForm: when a file changes form, the new
// object is stored first and the old form removed after; if the new one
// fails, the old one stays.
func TestPolicyChangeReplacesOtherForm(t *testing.T) {
	dir, files := testShard(t)
	tgt := newMemTarget()
	mustPush(t, testOptions(dir), tgt)

	raw := testOptions(dir)
	raw.CompressMatch = nil
	tgt.failPut = map[string]error{"seg/_0.fdt": errors.New("injected")}
	if _, _, err := pushTo(context.Background(), raw, tgt); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("push with a failing upload: %v", err)
	}
	if _, ok := tgt.get("seg/_0.fdt.zst"); !ok {
		t.Fatal("the compressed form was removed although the raw upload failed")
	}

	tgt.failPut = nil
	sum, res := mustPush(t, raw, tgt)
	if _, ok := tgt.get("seg/_0.fdt.zst"); ok {
		t.Error("seg/_0.fdt.zst still stored")
	}
	if o, _ := tgt.get("seg/_0.fdt"); !bytes.Equal(o.data, files["seg/_0.fdt"]) {
		t.Error("seg/_0.fdt not stored raw")
	}
	if sum.Removed != 1 || sum.Raw != 1 {
		t.Errorf("summary %+v", sum)
	}
	i := slices.IndexFunc(res, func(r FileResult) bool { return r.Key == "seg/_0.fdt" })
	if i < 0 || res[i].Removed != "seg/_0.fdt.zst" || res[i].Action != Raw {
		t.Errorf("results %+v", res)
	}
	if !slices.Equal(tgt.removedKeys(), []string{"seg/_0.fdt.zst"}) {
		t.Errorf("removed %v", tgt.removedKeys())
	}
}

// TestDelete: objects no local file accounts for stay without Delete, are
// reported but kept in a dry run, and are removed with Delete, in both
// forms; the local files' objects are not touched. A failed upload
// deletes nothing.
func TestDelete(t *testing.T) {
	dir, files := testShard(t)
	tgt := newMemTarget()
	mustPush(t, testOptions(dir), tgt)
	stale := []string{"gone.si", "old/_9.fdt", "old/_9.fdt.zst"}
	for _, k := range stale {
		tgt.objs[k] = memObject{data: []byte(k)}
	}
	all := tgt.keys()

	if sum, _ := mustPush(t, testOptions(dir), tgt); sum.Deleted != 0 || !slices.Equal(tgt.keys(), all) {
		t.Fatalf("push without Delete: %+v, keys %v", sum, tgt.keys())
	}

	opt := testOptions(dir)
	opt.Delete = true
	tgt.failPut = map[string]error{"seg/_0.doc": errors.New("injected")}
	os.WriteFile(filepath.Join(dir, "seg/_0.doc"), []byte("new content"), 0o644)
	if _, _, err := pushTo(context.Background(), opt, tgt); err == nil {
		t.Fatal("push with a failing upload succeeded")
	}
	if !slices.Equal(tgt.keys(), all) {
		t.Fatalf("a failed push deleted objects: %v", tgt.keys())
	}
	tgt.failPut = nil
	writeLocal(t, filepath.Join(dir, "seg/_0.doc"), files["seg/_0.doc"])

	dry := opt
	dry.DryRun = true
	sum, res := mustPush(t, dry, tgt)
	if sum.Deleted != 3 || !slices.Equal(tgt.keys(), all) {
		t.Errorf("dry run: %+v, keys %v", sum, tgt.keys())
	}
	var reported []string
	for _, r := range res {
		if r.Action == Deleted {
			reported = append(reported, r.Target)
		}
	}
	if !slices.Equal(reported, stale) {
		t.Errorf("dry run reported %v, want %v", reported, stale)
	}

	sum, _ = mustPush(t, opt, tgt)
	want := slices.DeleteFunc(slices.Clone(all), func(k string) bool { return slices.Contains(stale, k) })
	if sum.Deleted != 3 || !slices.Equal(tgt.keys(), want) {
		t.Errorf("push with Delete: %+v, keys %v, want %v", sum, tgt.keys(), want)
	}
}

// TestFileChangedDuringPush: a file that changes after it was hashed
// fails with ErrChanged naming it, and nothing is stored under its key.
func TestFileChangedDuringPush(t *testing.T) {
	for _, c := range []struct {
		name   string
		file   string
		change func(old []byte) []byte
	}{
		{"raw same size", "seg/_0.doc", func(b []byte) []byte { b = slices.Clone(b); b[len(b)-1] ^= 1; return b }},
		{"raw grew", "seg/_0.doc", func(b []byte) []byte { return append(slices.Clone(b), 'x') }},
		{"raw shrank", "seg/_0.doc", func(b []byte) []byte { return b[:len(b)-1] }},
		{"compressed same size", "seg/_0.fdt", func(b []byte) []byte { b = slices.Clone(b); b[0] ^= 1; return b }},
		{"compressed grew", "seg/_0.fdt", func(b []byte) []byte { return append(slices.Clone(b), b...) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, files := testShard(t)
			p := filepath.Join(dir, c.file)
			tgt := newMemTarget()
			var once sync.Once
			tgt.beforeCheck = func(key string) {
				if strings.TrimSuffix(key, CompressedSuffix) == c.file {
					once.Do(func() { writeLocal(t, p, c.change(files[c.file])) })
				}
			}
			_, _, err := pushTo(context.Background(), testOptions(dir), tgt)
			if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v, want ErrChanged naming %s", err, p)
			}
			for _, k := range tgt.keys() {
				if strings.HasPrefix(k, c.file) {
					t.Errorf("%s stored after the file changed", k)
				}
			}
		})
	}
	t.Run("between listing and hashing", func(t *testing.T) {
		dir, _ := testShard(t)
		opt := testOptions(dir)
		if err := opt.validate(); err != nil {
			t.Fatal(err)
		}
		files, err := walk(&opt)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "segments_1")
		writeLocal(t, p, []byte("shorter"))
		tgt := newMemTarget()
		if _, err := run(context.Background(), &opt, tgt, files); !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), p) {
			t.Fatalf("err = %v, want ErrChanged naming %s", err, p)
		}
		if _, ok := tgt.get("segments_1"); ok {
			t.Error("segments_1 stored")
		}
	})
}

// TestCancelStopsUploads: cancelling the context stops a push with an
// error wrapping context.Canceled; the upload in flight stores nothing,
// and Run returns only once every upload has stopped.
func TestCancelStopsUploads(t *testing.T) {
	dir, _ := testShard(t)
	tgt := newMemTarget()
	started := make(chan string, 16)
	tgt.putStarted = started
	tgt.holdPut = map[string]<-chan any{"seg/_0.doc": make(chan any)} // never released
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for k := range started {
			if k == "seg/_0.doc" {
				cancel()
				return
			}
		}
	}()
	opt := testOptions(dir)
	opt.Parallel = 1
	_, _, err := pushTo(ctx, opt, tgt)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, ok := tgt.get("seg/_0.doc"); ok {
		t.Error("seg/_0.doc stored by a cancelled upload")
	}
}

func TestPushErrors(t *testing.T) {
	dir, _ := testShard(t)
	// seg/_0.fdt is compressed to seg/_0.fdt.zst, also a local file's key.
	writeLocal(t, filepath.Join(dir, "seg/_0.fdt.zst"), []byte("x"))
	for _, c := range []struct {
		name  string
		opt   func(*Options)
		tgt   func(*memTarget)
		want  string
		wants error
	}{
		{name: "two files, one key", want: "would both be stored as seg/_0.fdt.zst"},
		{name: "bad glob", opt: func(o *Options) { o.CompressMatch = []string{"["} }, want: "--compress-match"},
		{name: "negative min size", opt: func(o *Options) { o.CompressMinSize = -1 }, want: "must not be negative"},
		{name: "missing dir", opt: func(o *Options) { o.Dir = filepath.Join(dir, "nope") }, wants: os.ErrNotExist},
		{name: "dir is a file", opt: func(o *Options) { o.Dir = filepath.Join(dir, "segments_1") }, want: "not a directory"},
		{name: "list fails", opt: func(o *Options) { o.CompressMatch = nil },
			tgt: func(m *memTarget) { m.listErr = errors.New("injected list") }, want: "list mem://: injected list"},
		{name: "upload fails", opt: func(o *Options) { o.CompressMatch = nil },
			tgt:  func(m *memTarget) { m.failPut = map[string]error{"segments_1": io.ErrUnexpectedEOF} },
			want: "to segments_1: unexpected EOF", wants: io.ErrUnexpectedEOF},
		{name: "other form cannot be removed", opt: func(o *Options) { o.CompressMatch = nil },
			tgt: func(m *memTarget) {
				m.objs["segments_1.zst"] = memObject{}
				m.failRemove = map[string]error{"segments_1.zst": errors.New("injected remove")}
			}, want: "delete segments_1.zst (the other form of segments_1): injected remove"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opt := testOptions(dir)
			if c.opt != nil {
				c.opt(&opt)
			}
			tgt := newMemTarget()
			if c.tgt != nil {
				c.tgt(tgt)
			}
			_, _, err := pushTo(context.Background(), opt, tgt)
			if err == nil || !strings.Contains(err.Error(), c.want) || (c.wants != nil && !errors.Is(err, c.wants)) {
				t.Fatalf("err = %v, want one saying %q (and wrapping %v)", err, c.want, c.wants)
			}
		})
	}
}

// TestDirTarget pushes to a local directory: files land under their keys,
// a second push skips raw files (a compressed one is rewritten: the
// directory keeps no metadata), Delete removes stale files, and an upload
// that fails leaves neither the file nor a temporary file behind.
func TestDirTarget(t *testing.T) {
	dir, files := testShard(t)
	dest := filepath.Join(t.TempDir(), "dest")
	tgt := &dirTarget{dir: dest}
	if keys, err := tgt.list(context.Background()); err != nil || len(keys) != 0 {
		t.Fatalf("list of a missing directory: %v, %v", keys, err)
	}
	mustPush(t, testOptions(dir), tgt)
	for name, data := range files {
		p := filepath.Join(dest, name)
		if name == "seg/_0.fdt" {
			b, err := os.ReadFile(p + CompressedSuffix)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(decodeObject(t, b), data) {
				t.Errorf("%s.zst does not decode to the file", name)
			}
			continue
		}
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s: %v, or content differs", name, err)
		}
	}
	sum, _ := mustPush(t, testOptions(dir), tgt)
	if sum.Skipped != len(files)-1 || sum.Compressed != 1 {
		t.Errorf("second push: %+v", sum)
	}

	writeLocal(t, filepath.Join(dest, "old/_9.fdt.zst"), []byte("stale"))
	opt := testOptions(dir)
	opt.Delete = true
	if sum, _ := mustPush(t, opt, tgt); sum.Deleted != 1 {
		t.Errorf("delete: %+v", sum)
	}
	if _, err := os.Stat(filepath.Join(dest, "old/_9.fdt.zst")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale file: %v", err)
	}

	err := tgt.put(context.Background(), "seg/new", io.MultiReader(strings.NewReader("abc"), iotest{}), 6, nil)
	if err == nil {
		t.Fatal("put from a failing reader succeeded")
	}
	entries, _ := os.ReadDir(filepath.Join(dest, "seg"))
	for _, e := range entries {
		if e.Name() == "new" || strings.HasPrefix(e.Name(), ".segfs-push-") {
			t.Errorf("%s left behind by a failed put", e.Name())
		}
	}
}

// iotest is a reader that fails.
type iotest struct{}

func (iotest) Read([]byte) (int, error) { return 0, errors.New("injected read error") }

func TestVerifyingReader(t *testing.T) {
	data := jsonLines(9, 5000)
	for _, c := range []struct {
		name    string
		src     []byte
		changed bool
	}{
		{"same", data, false},
		{"flipped", append(slices.Clone(data[:4999]), data[4999]^1), true},
		{"short", data[:4999], true},
		{"long", append(slices.Clone(data), 0), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := &verifyingReader{r: bytes.NewReader(c.src), h: sha256.New(), path: "f", size: int64(len(data)), sha: shaHex(data)}
			// io.ReadFull with a buffer the data fills exactly drops an
			// error returned with the last bytes: the next read must
			// return it again.
			buf := make([]byte, len(data))
			_, err1 := io.ReadFull(v, buf)
			_, err2 := v.Read(make([]byte, 10))
			got := errors.Is(err1, ErrChanged) || errors.Is(err2, ErrChanged)
			if got != c.changed {
				t.Errorf("errors %v, %v; want ErrChanged: %v", err1, err2, c.changed)
			}
			if !c.changed && err2 != io.EOF {
				t.Errorf("unchanged: second read %v, want EOF", err2)
			}
		})
	}
}

// TestFrameSizeLimit: push refuses a frame size past the limit a mount
// decodes by default, before anything is written, and accepts the limit
// itself; objects it writes are then readable by any default mount.
func TestFrameSizeLimit(t *testing.T) {
	dir, _ := testShard(t)
	for _, c := range []struct {
		frameSize int
		ok        bool
	}{
		{0, true}, // the default, far below the limit
		{compress.DefaultFrameLimit, true},
		{compress.DefaultFrameLimit + 1, false},
		{compress.MaxFrameSize, false},
	} {
		opt := testOptions(dir)
		opt.Encoder.FrameSize = c.frameSize
		tgt := newMemTarget()
		_, _, err := pushTo(context.Background(), opt, tgt)
		switch {
		case c.ok && err != nil:
			t.Errorf("frame size %d: %v", c.frameSize, err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "largest frame a segfs mount decodes")):
			t.Errorf("frame size %d: err = %v, want the frame size refused", c.frameSize, err)
		case !c.ok && len(tgt.objs) != 0:
			t.Errorf("frame size %d refused, yet %d objects were written", c.frameSize, len(tgt.objs))
		}
	}
}
