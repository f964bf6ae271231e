package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/shard"
)

// failed returns rec marked with err, and err.
func failed(rec Record, err error) ([]Record, error) {
	err = fmt.Errorf("%s %s: %w", rec.Case, rec.System, err)
	rec.Error = err.Error()
	return []Record{rec}, err
}

func (b *bench) fileBasedSeq(ctx context.Context) ([]Record, error) {
	return b.fileBased(ctx, caseSeqRead, []object{b.big}, fmt.Sprintf("GET %s whole to disk", b.big.Key))
}

func (b *bench) fileBasedCopy(ctx context.Context) ([]Record, error) {
	return b.fileBased(ctx, caseCopy, b.shardObjs, fmt.Sprintf("GET each of the %d shard files whole to disk, one after another", len(b.shardObjs)))
}

// fileBased downloads objs one whole-object GET at a time into a fresh
// directory, then checks every file's SHA-256.
func (b *bench) fileBased(ctx context.Context, c string, objs []object, what string) ([]Record, error) {
	rec := Record{System: sysFileBased, Case: c, What: what}
	if err := b.prepare(ctx, objs); err != nil {
		return failed(rec, err)
	}
	dir, err := os.MkdirTemp(b.work, "file-based-")
	if err != nil {
		return failed(rec, err)
	}
	defer os.RemoveAll(dir)
	n, d, err := b.remote.fileBased(ctx, objs, dir)
	if err != nil {
		return failed(rec, err)
	}
	rec.Seconds, rec.Bytes, rec.MBps = d.Seconds(), n, MBps(n, d)
	if err := verifyDir(dir, objs); err != nil {
		return failed(rec, err)
	}
	rec.Verified = true
	return []Record{rec}, nil
}

// verifyDir checks the SHA-256 of each of objs, stored in dir under its
// base name.
func verifyDir(dir string, objs []object) error {
	m := shard.Manifest{}
	for _, o := range objs {
		m.Files = append(m.Files, shard.File{Name: filepath.Base(o.Key), Size: o.Size, SHA256: o.SHA256})
	}
	return shard.Verify(dir, m)
}

func (b *bench) limitSeq(ctx context.Context) ([]Record, error) {
	return b.limit(ctx, caseSeqRead, []object{b.big})
}

func (b *bench) limitCopy(ctx context.Context) ([]Record, error) {
	return b.limit(ctx, caseCopy, b.shardObjs)
}

func (b *bench) limit(ctx context.Context, c string, objs []object) ([]Record, error) {
	rec := Record{System: sysLimit, Case: c,
		What: fmt.Sprintf("%d parallel ranged GETs of %s into /dev/null, %d objects", b.cfg.maxFetches, partSizeFlag, len(objs))}
	if err := b.prepare(ctx, objs); err != nil {
		return failed(rec, err)
	}
	res, err := b.plainGets(ctx, spans(objs, partSize), b.cfg.maxFetches)
	if err != nil {
		return failed(rec, err)
	}
	if want := total(objs); res.Bytes != want {
		return failed(rec, fmt.Errorf("fetched %d bytes, want %d", res.Bytes, want))
	}
	rec.Seconds, rec.Bytes, rec.MBps = res.Wall.Seconds(), res.Bytes, MBps(res.Bytes, res.Wall)
	rec.CPUSeconds = res.CPU.Seconds()
	rec.Note = "a plain client in a process of its own; byte counts checked, contents not kept"
	return []Record{rec}, nil
}

func (b *bench) singleGets(ctx context.Context) ([]Record, error) {
	rec := Record{System: sysSingleGet, Case: caseRandom,
		What: fmt.Sprintf("%d ranged GETs of %d bytes of %s, one after another", len(b.offsets), b.cfg.readSize, b.rnd.Key)}
	if err := b.prepare(ctx, []object{b.rnd}); err != nil {
		return failed(rec, err)
	}
	start := time.Now()
	lat, err := b.remote.rangedReads(ctx, b.rnd.Key, b.offsets, b.cfg.readSize, b.want)
	if err != nil {
		return failed(rec, err)
	}
	rec.Seconds = time.Since(start).Seconds()
	rec.Bytes = int64(len(lat) * b.cfg.readSize)
	l := Summarize(lat)
	rec.Latency, rec.Verified = &l, true
	return []Record{rec}, nil
}

// mountOpts says how mounted mounts.
type mountOpts struct {
	cacheDir string   // the disk cache, when segfs has one
	prep     []object // objects made cold (page cache dropped) before mounting
	extra    []string // extra segfs flags
	prefix   string   // mount s3://bucket/prefix instead of the bucket
}

// mounted runs f against a fresh segfs mount of the bucket through the
// endpoint, with the disk cache mo.cacheDir when segfs has one, and a
// sampler of its resources running for the whole of f. If ctx ends, the mount is
// unmounted at once, which fails reads blocked in it, so f returns.
func (b *bench) mounted(ctx context.Context, mo mountOpts, f func(ctx context.Context, m *harness.Mount, mnt string) error) (res Resources, err error) {
	// Cold means the page cache is dropped before the mount starts, so
	// that a mount that fetches from its start (--prefetch all) gets no
	// head start from the time this takes.
	if err := b.prepare(ctx, mo.prep); err != nil {
		return res, err
	}
	args := []string{
		"--endpoint", b.endpoint, "--path-style", "--region", harness.Region,
		"--max-fetches", strconv.Itoa(b.cfg.maxFetches), "--part-size", partSizeFlag,
	}
	if b.warmable && mo.cacheDir != "" {
		args = append(args, cacheDirFlag, mo.cacheDir)
	}
	args = append(args, b.cfg.segfsArgs...)
	args = append(args, mo.extra...)
	source := "s3://" + bucket
	if mo.prefix != "" {
		source += "/" + mo.prefix
	}
	m, err := harness.StartMount(ctx, harness.MountOptions{
		Bin: b.bins.Segfs, Source: source, Env: b.srv.Env(), Args: args, TempDir: b.work,
	})
	if err != nil {
		return res, err
	}
	defer func() {
		uerr := m.Unmount()
		if b.cfg.keepLogs != "" {
			err = errors.Join(err, b.keepLog(m.Log()))
		}
		if uerr != nil {
			err = errors.Join(err, uerr)
		} else if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w\nsegfs log (tail):\n%s", err, tail(m.Log(), 3000))
		}
	}()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			m.Unmount() // its error comes back from the deferred call
		case <-done:
		}
	}()
	defer func() {
		close(done)
		wg.Wait()
	}()

	s, err := startSampler(ctx, m.Pid(), b.srv.Pid(), m.Stats, sampleEvery)
	if err != nil {
		return res, err
	}
	ferr := f(ctx, m, m.Dir)
	res, serr := s.Stop(ctx)
	if b.cfg.keepLogs != "" {
		serr = errors.Join(serr, b.keepInodes(m.Dir)) // after the case: its lookups are not timed
	}
	if ferr != nil {
		return res, ferr
	}
	return res, serr
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// copyDirs returns an empty cache directory for a cold mount and an empty
// destination for a copy out of it, and a cleanup that removes both.
func (b *bench) copyDirs() (cacheDir, dst string, cleanup func(), err error) {
	if cacheDir, err = b.freshCache(); err != nil {
		return "", "", nil, err
	}
	if dst, err = os.MkdirTemp(b.work, "copy-"); err != nil {
		os.RemoveAll(cacheDir)
		return "", "", nil, err
	}
	return cacheDir, dst, func() { os.RemoveAll(cacheDir); os.RemoveAll(dst) }, nil
}

// freshCache returns an empty directory for a cold mount's disk cache.
func (b *bench) freshCache() (string, error) {
	return os.MkdirTemp(b.work, "segfs-cache-")
}

// Case 1: cold sequential read of the big file.
func (b *bench) seqRead(ctx context.Context) ([]Record, error) {
	rec := Record{System: sysSegfs, Case: caseSeqRead, What: fmt.Sprintf("cold sequential read of %s through a fresh mount, 1 MiB reads", b.big.Key)}
	// Cases 1 and 3 fill the disk cache that case 5 remounts with.
	if err := os.RemoveAll(b.warmDir); err != nil {
		return failed(rec, err)
	}
	if err := os.MkdirAll(b.warmDir, 0o755); err != nil {
		return failed(rec, err)
	}
	return b.seqReadWith(ctx, rec, b.warmDir)
}

func (b *bench) seqReadWith(ctx context.Context, rec Record, cacheDir string) ([]Record, error) {
	want, err := b.sumsOf(b.big)
	if err != nil {
		return failed(rec, err)
	}
	var n int64
	var d time.Duration
	res, err := b.mounted(ctx, mountOpts{cacheDir: cacheDir, prep: []object{b.big}}, func(ctx context.Context, m *harness.Mount, mnt string) error {
		var err error
		n, d, err = seqRead(ctx, filepath.Join(mnt, filepath.FromSlash(b.big.Key)), want)
		return err
	})
	rec.Resources = &res
	if err != nil {
		return failed(rec, err)
	}
	rec.Seconds, rec.Bytes, rec.MBps, rec.Verified = d.Seconds(), n, MBps(n, d), true
	return []Record{rec}, nil
}

// Case 3: cold random reads of the largest shard file.
func (b *bench) randomReads(ctx context.Context) ([]Record, error) {
	rec := Record{System: sysSegfs, Case: caseRandom,
		What: fmt.Sprintf("cold: %d preads of %d bytes of %s at seeded offsets, one after another", len(b.offsets), b.cfg.readSize, b.rnd.Key)}
	return b.randomReadsWith(ctx, rec, b.warmDir, func(ctx context.Context, path string) ([]time.Duration, error) {
		lat, _, err := randomReads(ctx, path, b.offsets, b.cfg.readSize, b.want, nil)
		return lat, err
	})
}

// randomReadsWith mounts with cacheDir, times read of the random-read
// file and records its latencies.
func (b *bench) randomReadsWith(ctx context.Context, rec Record, cacheDir string, read func(ctx context.Context, path string) ([]time.Duration, error)) ([]Record, error) {
	var lat []time.Duration
	var d time.Duration
	res, err := b.mounted(ctx, mountOpts{cacheDir: cacheDir, prep: []object{b.rnd}}, func(ctx context.Context, m *harness.Mount, mnt string) error {
		start := time.Now()
		var err error
		lat, err = read(ctx, filepath.Join(mnt, filepath.FromSlash(b.rnd.Key)))
		d = time.Since(start)
		return err
	})
	rec.Resources = &res
	if err != nil {
		return failed(rec, err)
	}
	l := Summarize(lat)
	rec.Seconds, rec.Bytes, rec.Latency, rec.Verified = d.Seconds(), int64(len(lat)*b.cfg.readSize), &l, true
	return []Record{rec}, nil
}

// mmapRandomReads is case 3 through a mapping of the file (mmapReads),
// as a search engine that maps its files reads: on a fresh mount with an
// empty cache directory of its own, since the preads' directory feeds
// case 5. Each first touch of a page faults, and the kernel reads around
// it, up to the mount's readahead.
func (b *bench) mmapRandomReads(ctx context.Context) ([]Record, error) {
	rec := Record{System: sysSegfsMmap, Case: caseRandom,
		What: fmt.Sprintf("cold: %d reads of %d bytes at the same offsets of %s, mapped with mmap (no madvise), one after another", len(b.offsets), b.cfg.readSize, b.rnd.Key)}
	cacheDir := ""
	if b.warmable {
		dir, err := b.freshCache()
		if err != nil {
			return failed(rec, err)
		}
		defer os.RemoveAll(dir)
		cacheDir = dir
	}
	return b.randomReadsWith(ctx, rec, cacheDir, func(ctx context.Context, path string) ([]time.Duration, error) {
		return mmapReadsChild(ctx, path, b.rnd.Local, b.offsets, b.cfg.readSize)
	})
}

// warmSeqRead is case 5's sequential read on a fresh mount of the warm
// cache directory, page cache dropped, each 1 MiB beside the same 1 MiB
// of the local copy (pairedSeqRead): MB/s counts each side's own read
// time, and the local figure of the same moments is the record's
// LocalPairedMBps, which its "vs local" ratio uses. It is fair only when
// the mount does no disk I/O but the reads themselves, as in passthrough
// mode; the default mode's readahead reads whole parts ahead (measured:
// a local read beside it fell to 280-325 MB/s from 1125-1233 alone), so
// the default row is read alone.
func (b *bench) warmSeqRead(ctx context.Context, rec Record, extra ...string) ([]Record, error) {
	want, err := b.sumsOf(b.big)
	if err != nil {
		return failed(rec, err)
	}
	var d, local time.Duration
	res, err := b.mounted(ctx, mountOpts{cacheDir: b.warmDir, prep: []object{b.big}, extra: extra}, func(ctx context.Context, m *harness.Mount, mnt string) error {
		var err error
		d, local, err = pairedSeqRead(ctx, filepath.Join(mnt, filepath.FromSlash(b.big.Key)), b.big.Local, want)
		return err
	})
	rec.Resources = &res
	if err != nil {
		return failed(rec, err)
	}
	rec.Seconds, rec.Bytes, rec.MBps, rec.LocalPairedMBps, rec.Verified = d.Seconds(), b.big.Size, MBps(b.big.Size, d), MBps(b.big.Size, local), true
	rec.Note = strings.TrimPrefix(rec.Note+fmt.Sprintf("; local copy beside it: %.1f MB/s", rec.LocalPairedMBps), "; ")
	return []Record{rec}, nil
}

// warmRandomReads is case 5's preads on a fresh mount of the warm cache
// directory, page cache dropped, each beside a pread of the same offset
// of the local copy (pairedReads): the local figures of the same moments
// are the record's LocalPaired, which its "vs local" ratios use. The
// local-file record, read alone after every segfs case, stays as the
// unpaired baseline.
func (b *bench) warmRandomReads(ctx context.Context, rec Record, extra ...string) ([]Record, error) {
	var lat, local []time.Duration
	res, err := b.mounted(ctx, mountOpts{cacheDir: b.warmDir, prep: []object{b.rnd}, extra: extra}, func(ctx context.Context, m *harness.Mount, mnt string) error {
		var err error
		lat, local, err = pairedReads(ctx, filepath.Join(mnt, filepath.FromSlash(b.rnd.Key)), b.rnd.Local, b.offsets, b.cfg.readSize, b.want)
		return err
	})
	rec.Resources = &res
	if err != nil {
		return failed(rec, err)
	}
	var d time.Duration // segfs's reads only, not the local ones beside them
	for _, x := range lat {
		d += x
	}
	l, lp := Summarize(lat), Summarize(local)
	rec.Seconds, rec.Bytes, rec.Latency, rec.LocalPaired, rec.Verified = d.Seconds(), int64(len(lat)*b.cfg.readSize), &l, &lp, true
	rec.Note = strings.TrimPrefix(rec.Note+fmt.Sprintf("; local copy beside it: p50 %.3f ms, p99 %.3f ms", lp.P50, lp.P99), "; ")
	return []Record{rec}, nil
}

// Case 2 (and 6): cold recovery copy with cp -r, its resources sampled.
func (b *bench) recoveryCopy(ctx context.Context) ([]Record, error) {
	rec := Record{System: sysSegfs, Case: caseCopy,
		What: fmt.Sprintf("cold: cp -r of the %d-file shard directory out of a fresh mount, then sha256 of every file", len(b.shardObjs))}
	return b.recoveryCopyWith(ctx, rec, mountOpts{prep: b.shardObjs})
}

// recoveryCopyAll is case 2 with --prefetch all on a mount of the shard's
// prefix: every file is fetched from the mount's start, small files first.
// The clock starts when the mount is ready.
func (b *bench) recoveryCopyAll(ctx context.Context) ([]Record, error) {
	rec := Record{System: sysSegfsAll, Case: caseCopy,
		What: fmt.Sprintf("cold: cp -r of the %d-file shard out of a fresh mount of s3://%s/%s with --prefetch all, then sha256 of every file", len(b.shardObjs), bucket, shardPrefix)}
	return b.recoveryCopyWith(ctx, rec, mountOpts{prep: b.shardObjs, extra: []string{"--prefetch", "all"}, prefix: shardPrefix})
}

func (b *bench) recoveryCopyWith(ctx context.Context, rec Record, mo mountOpts) ([]Record, error) {
	cacheDir, dst, cleanup, err := b.copyDirs()
	if err != nil {
		return failed(rec, err)
	}
	defer cleanup()
	var d time.Duration
	mo.cacheDir = cacheDir
	res, err := b.mounted(ctx, mo, func(ctx context.Context, m *harness.Mount, mnt string) error {
		src := filepath.Join(mnt, shardPrefix)
		if mo.prefix != "" {
			src = mnt
		}
		cp, err := startCopy(ctx, src, filepath.Join(dst, shardPrefix))
		if err != nil {
			return err
		}
		d, err = cp.wait()
		return err
	})
	rec.Resources = &res
	if err != nil {
		return failed(rec, err)
	}
	n := b.shardMan.TotalSize()
	rec.Seconds, rec.Bytes, rec.MBps = d.Seconds(), n, MBps(n, d)
	if err := shard.Verify(filepath.Join(dst, shardPrefix), b.shardMan); err != nil {
		return failed(rec, err)
	}
	rec.Verified = true
	return []Record{rec}, nil
}

// Case 4: the random reads while cp -r copies the shard in another process.
func (b *bench) randomBesideCopy(ctx context.Context) ([]Record, error) {
	rec := Record{System: sysSegfs, Case: caseRandomBusy,
		What: fmt.Sprintf("cold: the %d preads of %s while cp -r copies the shard out of the same mount; MB/s is the copy's", len(b.offsets), b.rnd.Key)}
	cacheDir, dst, cleanup, err := b.copyDirs()
	if err != nil {
		return failed(rec, err)
	}
	defer cleanup()
	var lat []time.Duration
	var during int
	var d time.Duration
	res, err := b.mounted(ctx, mountOpts{cacheDir: cacheDir, prep: b.shardObjs}, func(ctx context.Context, m *harness.Mount, mnt string) error {
		cp, err := startCopy(ctx, filepath.Join(mnt, shardPrefix), filepath.Join(dst, shardPrefix))
		if err != nil {
			return err
		}
		// Start the reads once the copy is streaming.
		if err := waitRead(ctx, m, partSize, cp.done); err != nil {
			cp.wait()
			return err
		}
		lat, during, err = randomReads(ctx, filepath.Join(mnt, filepath.FromSlash(b.rnd.Key)), b.offsets, b.cfg.readSize, b.want, cp.done)
		var cerr error
		d, cerr = cp.wait()
		return errors.Join(err, cerr)
	})
	rec.Resources = &res
	if err != nil {
		return failed(rec, err)
	}
	n := b.shardMan.TotalSize()
	l := Summarize(lat)
	rec.Seconds, rec.Bytes, rec.MBps, rec.Latency = d.Seconds(), n, MBps(n, d), &l
	rec.Note = fmt.Sprintf("%d of %d preads finished while the copy was running", during, len(lat))
	if err := shard.Verify(filepath.Join(dst, shardPrefix), b.shardMan); err != nil {
		return failed(rec, err)
	}
	rec.Verified = true
	return []Record{rec}, nil
}

// waitRead waits until segfs has served at least n bytes, or stop is
// closed, or 30 s have passed.
func waitRead(ctx context.Context, m *harness.Mount, n int64, stop <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		st, err := m.Stats(ctx)
		if err != nil {
			return err
		}
		if st["read_bytes"] >= n {
			return nil
		}
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("wait for the copy to start: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// Case 5: after cases 1 and 3, remount (on their disk cache, if segfs
// has one), drop the page cache and read the same again.
func (b *bench) warmReads(ctx context.Context) ([]Record, error) {
	note := "segfs has no disk cache yet (parts are kept in memory only), so these reads are cold again"
	if b.warmable {
		note = fmt.Sprintf("remounted with %s holding what cases 1 and 3 fetched; page cache dropped", cacheDirFlag)
	}
	// Read alone, not beside the local copy: segfs's readahead reads whole
	// parts ahead of the reader, and that disk traffic would slow a local
	// read beside it (see warmSeqRead).
	seq := Record{System: sysSegfs, Case: caseWarmSeq, Note: note,
		What: fmt.Sprintf("warm: sequential read of %s after unmount, remount and dropping the page cache", b.big.Key)}
	recs, err := b.seqReadWith(ctx, seq, b.warmDir)
	if err != nil && (ctx.Err() != nil || !b.cfg.keepGoing) {
		return recs, err
	}
	rnd := Record{System: sysSegfs, Case: caseWarmRandom, Note: note,
		What: fmt.Sprintf("warm: the %d preads of %s after unmount, remount and dropping the page cache, each beside a pread of the local copy", len(b.offsets), b.rnd.Key)}
	more, err2 := b.warmRandomReads(ctx, rnd)
	recs = append(recs, more...)
	var err4 error
	if b.warmable && segfsHasBoolFlag(ctx, b.bins.Segfs, passthroughFlag) {
		more, err4 = b.warmPassthrough(ctx)
		recs = append(recs, more...)
	}
	if b.warmable {
		for i := range recs {
			if r := recs[i].Resources; r != nil && r.Gets > 0 {
				recs[i].Note += fmt.Sprintf("; NOT WARM: %d GETs (%d bytes) during the read", r.Gets, r.GetBytes)
			}
		}
	}
	local, err3 := b.localReads(ctx)
	return append(recs, local...), errors.Join(err, err2, err3, err4)
}

// settle is how long case 5 waits after building whole-object files
// before it measures reads of them. Right after a build the disk of the
// benchmark VM was slow for every reader: the passthrough read and the
// local copy read beside it both ran at about 425 MB/s, against 600-1200
// MB/s later (docs/BENCH.md). The rows measure the steady state a search
// node reads in, long after its files were built; the read right after
// the build is kept in the row's note, with the local read beside it.
const settle = 30 * time.Second

// warmPassthrough is case 5 again with --passthrough: a first mount opens
// both files, so that segfs fetches what cases 1 and 3 left out and builds
// their whole-object files, and waits for them; then each read runs on a
// fresh mount, page cache dropped, with every open handed to the kernel.
func (b *bench) warmPassthrough(ctx context.Context) ([]Record, error) {
	seq := Record{System: sysSegfsPassthrough, Case: caseWarmSeq,
		What: fmt.Sprintf("warm: sequential read of %s from its whole-object file (%s), page cache dropped, 1 MiB at a time beside the same 1 MiB of the local copy", b.big.Key, passthroughFlag)}
	rnd := Record{System: sysSegfsPassthrough, Case: caseWarmRandom,
		What: fmt.Sprintf("warm: the %d preads of %s from its whole-object file (%s), page cache dropped, each beside a pread of the local copy", len(b.offsets), b.rnd.Key, passthroughFlag)}
	start := time.Now()
	_, err := b.mounted(ctx, mountOpts{cacheDir: b.warmDir, extra: []string{passthroughFlag}}, func(ctx context.Context, m *harness.Mount, mnt string) error {
		s, err := m.Stats(ctx)
		if err != nil {
			return err
		}
		if s["passthrough"] != 1 {
			return fmt.Errorf("segfs turned %s off (see its log)", passthroughFlag)
		}
		for _, o := range []object{b.big, b.rnd} {
			f, err := os.Open(filepath.Join(mnt, filepath.FromSlash(o.Key)))
			if err != nil {
				return err
			}
			f.Close() // the open queues the fetch of missing parts and the build
		}
		want := int64(2)
		if b.big.Key == b.rnd.Key {
			want = 1
		}
		for {
			s, err := m.Stats(ctx)
			if err != nil {
				return err
			}
			if s["whole_objects"] >= want && s["promote_pending"] == 0 && harness.Idle(s) {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	if err != nil {
		return failed(seq, fmt.Errorf("building whole-object files: %w", err))
	}
	built := time.Now()
	note := fmt.Sprintf("whole-object files built on a first mount in %.1f s", built.Sub(start).Seconds())
	// The same read right after the build, for the record; see settle.
	first, err := b.warmSeqRead(ctx, Record{System: sysSegfsPassthrough, Case: caseWarmSeq}, passthroughFlag)
	if err != nil {
		return first, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Until(built.Add(settle))):
	}
	note += fmt.Sprintf("; measured %v after the build (read right after it: %.1f MB/s, the local copy beside it %.1f MB/s)", settle, first[0].MBps, first[0].LocalPairedMBps)
	seq.Note, rnd.Note = note, note
	recs, err := b.warmSeqRead(ctx, seq, passthroughFlag)
	if err != nil && (ctx.Err() != nil || !b.cfg.keepGoing) {
		return recs, err
	}
	more, err2 := b.warmRandomReads(ctx, rnd, passthroughFlag)
	return append(recs, more...), errors.Join(err, err2)
}

// localReads is case 5's baseline: the same sequential read and preads of
// the local copies of the files, page cache dropped first, no FUSE.
func (b *bench) localReads(ctx context.Context) ([]Record, error) {
	seq := Record{System: sysLocal, Case: caseWarmSeq, What: "sequential read of the local copy of " + b.big.Key + ", page cache dropped"}
	want, err := b.sumsOf(b.big)
	if err != nil {
		return failed(seq, err)
	}
	if err := b.dropLocal(); err != nil {
		return failed(seq, err)
	}
	n, d, err := seqRead(ctx, b.big.Local, want)
	if err != nil {
		return failed(seq, err)
	}
	seq.Seconds, seq.Bytes, seq.MBps, seq.Verified = d.Seconds(), n, MBps(n, d), true
	rnd := Record{System: sysLocal, Case: caseWarmRandom, What: "the same preads of the local copy of " + b.rnd.Key + ", page cache dropped"}
	if err := b.dropLocal(); err != nil {
		return failed(rnd, err)
	}
	start := time.Now()
	lat, _, err := randomReads(ctx, b.rnd.Local, b.offsets, b.cfg.readSize, b.want, nil)
	if err != nil {
		return failed(rnd, err)
	}
	l := Summarize(lat)
	rnd.Seconds, rnd.Bytes, rnd.Latency, rnd.Verified = time.Since(start).Seconds(), int64(len(lat)*b.cfg.readSize), &l, true
	return []Record{seq, rnd}, nil
}

// dropLocal drops the page cache (as root) so a local read comes from
// the disk, as segfs's warm reads come from its disk cache.
func (b *bench) dropLocal() error {
	if os.Geteuid() != 0 {
		return nil
	}
	return dropCaches()
}

// resourcesRecord is case 6: the resources segfs used during case 2.
func (b *bench) resourcesRecord(recs []Record) []Record {
	for _, r := range recs {
		if r.System == sysSegfs && r.Case == caseCopy && r.Resources != nil {
			return []Record{{
				System: sysSegfs, Case: caseResources, What: "segfs process during case 2: peaks from /proc/PID/status and /stats every " + sampleEvery.String() + ", counter deltas",
				Seconds: r.Seconds, Bytes: r.Bytes, MBps: r.MBps, Resources: r.Resources, Verified: r.Verified, Error: r.Error, LoadAfter: r.LoadAfter,
			}}
		}
	}
	return nil
}

func (b *bench) print(recs []Record) {
	fmt.Println()
	fmt.Printf("results (profile %s; MB = 10^6 bytes; \"vs\" columns are ratios to the baselines of this run;\nload = 1-minute load average as the case ended, on %d CPUs)\n\n", b.cfg.profile.Name, runtime.NumCPU())
	WriteTable(os.Stdout, recs)
	fmt.Println()
	fmt.Println("segfs resources per case (case 6 = the row of case 2)")
	fmt.Println()
	WriteResources(os.Stdout, recs)
	fmt.Println()
	fmt.Println("CPU during each segfs case: the machine's busy share (all CPUs; steal counts as busy, iowait as idle) and CPU")
	fmt.Println("seconds of segfs, the S3 server, the bench process (the shaping proxy, the timed reads) and the rest (cp, kernel)")
	fmt.Println()
	WriteCPU(os.Stdout, recs)
	fmt.Println()
	fmt.Println("CPU per GiB of each fetch-bound case: the fetching process's (segfs's, or the plain client's, rusage) beside the plain")
	fmt.Println("client's for the same work in this run (the limit's for cases 1 and 2, plain-client's for the open's ranges)")
	fmt.Println()
	WriteCPUPerGiB(os.Stdout, recs)
	if slices.ContainsFunc(recs, func(r Record) bool { return r.System == sysRaw || r.System == sysHybrid }) {
		fmt.Println()
		fmt.Println("hybrid compression (case 7): the same JSON shard pushed raw and hybrid, its largest .fdt read cold;")
		fmt.Println("\"vs raw\" = hybrid / raw in this run (time, stored bytes, latency, CPU: below 1 is less; MB/s: above 1 is faster)")
		fmt.Println()
		WriteCompression(os.Stdout, recs)
	}
	fmt.Println()
	fmt.Println("notes")
	WriteNotes(os.Stdout, recs)
}

// keepInodes writes the inode numbers of the mount's files into
// --keep-logs, for reading the FUSE trace of its log (nodes by number).
func (b *bench) keepInodes(mnt string) error {
	var out strings.Builder
	err := filepath.WalkDir(mnt, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			rel, _ := filepath.Rel(mnt, p)
			fmt.Fprintf(&out, "%d %d %s\n", st.Ino, info.Size(), rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("--keep-logs: inodes of %s: %w", mnt, err)
	}
	if err := os.MkdirAll(b.cfg.keepLogs, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.cfg.keepLogs, fmt.Sprintf("mount-%03d.inodes", b.logs+1)), []byte(out.String()), 0o644)
}

// keepLog writes a mount's log into --keep-logs, numbered in the order
// of the mounts.
func (b *bench) keepLog(log string) error {
	b.logs++
	if err := os.MkdirAll(b.cfg.keepLogs, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.cfg.keepLogs, fmt.Sprintf("mount-%03d.log", b.logs)), []byte(log), 0o644)
}
