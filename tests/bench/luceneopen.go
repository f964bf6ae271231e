package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// Case 8 replays a Lucene open of the shard, single-threaded, as a
// reader of the index makes it: segments_N, then segment by segment its
// .si, .fnm and each codec file, a metadata file (at most openWhole
// bytes) read whole, a data file's header (openHead bytes at offset 0)
// then its footer (the last 16 bytes), each in the read sizes
// BufferedIndexInput sends; then openPreads seeded 4 KiB preads across
// the large files, the search after the open. Against a cold mount with
// --prefetch none and --no-segment-prefetch (every read a round trip), a
// cold mount with --prefetch none (the segment-aware prefetch alone), a
// cold mount with segfs's defaults, and the local files with the page
// cache dropped.
const (
	caseLuceneOpen = "8-lucene-open"
	openWhole      = 1 << 20
	openHead       = 1024
	openPreads     = 200
)

// openRead is one read of the replay.
type openRead struct {
	name     string // below the shard directory
	off, len int64
}

// luceneOpenReads returns the replay's reads of objs, in the order of
// an open.
func luceneOpenReads(objs []object) []openRead {
	names := make([]string, 0, len(objs))
	size := map[string]int64{}
	for _, o := range objs {
		n := path.Base(o.Key)
		if !strings.HasPrefix(n, "segments_") && !strings.HasPrefix(n, "_") {
			continue
		}
		names = append(names, n)
		size[n] = o.Size
	}
	slices.SortFunc(names, compareOpen)
	var reads []openRead
	for _, n := range names {
		s := size[n]
		if s <= openWhole {
			for off := int64(0); off < s; off += 1024 {
				reads = append(reads, openRead{n, off, min(1024, s-off)})
			}
			continue
		}
		reads = append(reads, openRead{n, 0, openHead}, openRead{n, s - 16, 16})
	}
	return reads
}

// compareOpen orders file names as an open reads them.
func compareOpen(a, b string) int {
	rank := func(n string) (string, int) {
		if strings.HasPrefix(n, "segments_") {
			return "", 0
		}
		seg := n
		if i := strings.IndexAny(n[1:], "._"); i >= 0 {
			seg = n[:i+1]
		}
		switch path.Ext(n) {
		case ".si":
			return seg, 1
		case ".fnm":
			return seg, 2
		}
		return seg, 3
	}
	sa, ra := rank(a)
	sb, rb := rank(b)
	if len(sa) != len(sb) {
		return len(sa) - len(sb)
	}
	if c := strings.Compare(sa, sb); c != 0 {
		return c
	}
	if ra != rb {
		return ra - rb
	}
	return strings.Compare(a, b)
}

// openPreadSet returns the seeded preads across the files larger than
// openWhole.
func openPreadSet(objs []object, seed int64) []openRead {
	var large []object
	for _, o := range objs {
		if o.Size > openWhole && !strings.HasSuffix(o.Key, ".json") {
			large = append(large, o)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 8))
	out := make([]openRead, openPreads)
	for i := range out {
		o := large[rng.IntN(len(large))]
		out[i] = openRead{path.Base(o.Key), rng.Int64N(o.Size - 4096), 4096}
	}
	return out
}

// wantOf reads the bytes each read must return from the local files.
// Call it before the page cache is dropped: it reads them.
func wantOf(local string, reads []openRead) ([][]byte, error) {
	want := make([][]byte, len(reads))
	for i, rd := range reads {
		want[i] = make([]byte, rd.len)
		lf, err := os.Open(filepath.Join(local, rd.name))
		if err != nil {
			return nil, err
		}
		_, err = lf.ReadAt(want[i], rd.off)
		lf.Close()
		if err != nil {
			return nil, fmt.Errorf("local %s: %w", rd.name, err)
		}
	}
	return want, nil
}

// replay makes reads below dir, checking each against want, and returns
// the time of the whole and each read's latency.
func replay(ctx context.Context, dir string, reads []openRead, want [][]byte) (time.Duration, []time.Duration, error) {
	files := map[string]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	lat := make([]time.Duration, len(reads))
	buf := make([]byte, 1<<20)
	start := time.Now()
	for i, rd := range reads {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		t0 := time.Now()
		f := files[rd.name]
		if f == nil {
			var err error
			if f, err = os.Open(filepath.Join(dir, rd.name)); err != nil {
				return 0, nil, err
			}
			files[rd.name] = f
		}
		p := buf[:rd.len]
		if _, err := f.ReadAt(p, rd.off); err != nil {
			return 0, nil, fmt.Errorf("%s at %d: %w", rd.name, rd.off, err)
		}
		lat[i] = time.Since(t0)
		if !bytes.Equal(p, want[i]) {
			return 0, nil, fmt.Errorf("%s at %d: other bytes than the generated file's", rd.name, rd.off)
		}
	}
	return time.Since(start), lat, nil
}

// luceneOpen is case 8.
func (b *bench) luceneOpen(ctx context.Context) ([]Record, error) {
	reads := luceneOpenReads(b.shardObjs)
	preads := openPreadSet(b.shardObjs, b.cfg.seed)
	wantReads, err := wantOf(b.shardDir, reads)
	if err != nil {
		return nil, err
	}
	wantPreads, err := wantOf(b.shardDir, preads)
	if err != nil {
		return nil, err
	}
	run := func(rec Record, dir string) (Record, error) {
		d, _, err := replay(ctx, dir, reads, wantReads)
		if err != nil {
			return rec, fmt.Errorf("open replay: %w", err)
		}
		_, lat, err := replay(ctx, dir, preads, wantPreads)
		if err != nil {
			return rec, fmt.Errorf("preads after the open: %w", err)
		}
		l := Summarize(lat)
		rec.Seconds, rec.Latency, rec.Verified = d.Seconds(), &l, true
		rec.Note = fmt.Sprintf("open: %d reads of %d files in %.3f s; then %d preads of 4 KiB", len(reads), countFiles(reads), d.Seconds(), len(preads))
		return rec, nil
	}
	var recs []Record
	local := Record{System: sysLocal, Case: caseLuceneOpen, What: "the open replay and preads on the local files, page cache dropped"}
	if err := b.dropLocal(); err != nil {
		return failed(local, err)
	}
	local, err = run(local, b.shardDir)
	if err != nil {
		return failed(local, err)
	}
	recs = append(recs, local)
	for _, sys := range []struct {
		name  string
		extra []string
	}{
		{sysSegfs + "-no-segment-prefetch", []string{"--prefetch", "none", "--no-segment-prefetch"}},
		{sysSegfs + "-prefetch-none", []string{"--prefetch", "none"}},
		{sysSegfs, nil},
	} {
		if strings.Contains(strings.Join(sys.extra, " "), "segment-prefetch") && !segfsHasBoolFlag(ctx, b.bins.Segfs, "segment-prefetch") {
			continue // an older segfs: it has no segment prefetch to turn off
		}
		rec := Record{System: sys.name, Case: caseLuceneOpen, What: "cold mount: the open replay, then the preads"}
		cache, err := b.freshCache()
		if err != nil {
			return append(recs, mustFail(rec, err)), err
		}
		res, err := b.mounted(ctx, mountOpts{cacheDir: cache, prep: b.shardObjs, extra: sys.extra}, func(ctx context.Context, m *harness.Mount, mnt string) error {
			var err error
			rec, err = run(rec, filepath.Join(mnt, shardPrefix))
			return err
		})
		rec.Resources = &res
		if err != nil {
			return append(recs, mustFail(rec, err)), err
		}
		if local.Seconds > 0 {
			rec.Note += fmt.Sprintf("; open %.2fx the local open", rec.Seconds/local.Seconds)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

func mustFail(rec Record, err error) Record {
	r, _ := failed(rec, err)
	return r[0]
}

func countFiles(reads []openRead) int {
	seen := map[string]bool{}
	for _, r := range reads {
		seen[r.name] = true
	}
	return len(seen)
}
