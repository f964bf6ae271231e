package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/osremote"
)

// Case 10: one mount per node (issue 37). A repository of repoShards
// small shards of one index, and two large ones of another, in
// OpenSearch's layout (tests/osremote), mounted whole (--layout
// opensearch without --shard) against one-shard mounts of the same
// shards.
const (
	caseRepoMount  = "10-repo-mount"
	caseRepoOpen   = "10-repo-open-shard"
	caseRepoAll    = "10-repo-all-shards"
	caseRepoCopies = "10-repo-two-copies"
	repoBase       = "repo-os"
	repoSmallUUID  = "bEnChRePoSmAlLuUiD0001"
	repoBigUUID    = "bEnChRePoBiGuUiD000002"
	repoShards     = 200
	repoOpenRuns   = 5        // shards opened cold, one after another, on each system
	repoSmallScale = 16 << 10 // tests/osremote's scale: about 60 KB a small shard
	repoBigScale   = 16 << 20 // about 40 MB a large shard
)

// RepoFigures are case 10's own figures, in the JSON under its records.
type RepoFigures struct {
	Shards      int     `json:"shards"`
	RSSBytes    int64   `json:"rss_bytes,omitempty"` // VmRSS after the case's reads
	Goroutines  int64   `json:"goroutines,omitempty"`
	Threads     int64   `json:"threads,omitempty"`
	OpenSeconds float64 `json:"open_seconds,omitempty"` // median of the cold opens
	// Of the two copies at once: each one's seconds, and alone.
	CopySeconds  []float64 `json:"copy_seconds,omitempty"`
	AloneSeconds []float64 `json:"alone_seconds,omitempty"`
}

// repository is case 10.
func (b *bench) repository(ctx context.Context) ([]Record, error) {
	small, big, err := b.putRepository(ctx)
	if err != nil {
		return failed(Record{System: sysSegfsRepo, Case: caseRepoMount}, err)
	}
	var recs []Record
	oneArgs := func(uuid string, shard int) []string {
		return []string{"--layout", "opensearch", "--index-uuid", uuid, "--shard", fmt.Sprint(shard)}
	}
	repoArgs := []string{"--layout", "opensearch"}
	open := func(dir string, want map[string][]byte) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if len(ents) != len(want) {
			return fmt.Errorf("%s: %d files, want %d", dir, len(ents), len(want))
		}
		for _, e := range ents {
			got, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return err
			}
			if !slices.Equal(got, want[e.Name()]) {
				return fmt.Errorf("%s/%s: wrong bytes", dir, e.Name())
			}
		}
		return nil
	}

	// Mount time and one shard's cold open, on each system; the
	// repository mount's open includes the shard's resolution, which
	// the one-shard mount does before it is ready.
	for _, sys := range []struct {
		name, what string
		repo       bool
	}{{sysSegfs, "one-shard mounts (--index-uuid, --shard), one per shard opened", false},
		{sysSegfsRepo, "one mount of the whole repository (--layout opensearch alone)", true}} {
		mountRec := Record{System: sys.name, Case: caseRepoMount, What: "segfs mount, process start to ready: " + sys.what}
		openRec := Record{System: sys.name, Case: caseRepoOpen, What: fmt.Sprintf("cold open of one %d-file shard (list, read every file), median of %d shards: %s", len(small[0]), repoOpenRuns, sys.what)}
		var mounts, opens []float64
		var rss int64 // the largest resident set after an open
		runs := 1
		if !sys.repo {
			runs = repoOpenRuns
		}
		for run := range runs {
			cache, err := b.freshCache()
			if err != nil {
				return recs, err
			}
			mo := mountOpts{cacheDir: cache, prefix: repoBase, extra: repoArgs}
			if !sys.repo {
				mo.extra = oneArgs(repoSmallUUID, run*7)
			}
			start := time.Now()
			_, err = b.mounted(ctx, mo, func(ctx context.Context, m *harness.Mount, mnt string) error {
				mounts = append(mounts, time.Since(start).Seconds())
				if !sys.repo {
					t := time.Now()
					if err := open(mnt, small[run*7]); err != nil {
						return err
					}
					opens = append(opens, time.Since(t).Seconds())
					ps, err := harness.ReadProcStatus(m.Pid())
					if err != nil {
						return err
					}
					rss = max(rss, ps.VmRSS)
					return nil
				}
				for r := range repoOpenRuns {
					t := time.Now()
					if err := open(filepath.Join(mnt, repoSmallUUID, fmt.Sprint(r*7)), small[r*7]); err != nil {
						return err
					}
					opens = append(opens, time.Since(t).Seconds())
				}
				return nil
			})
			os.RemoveAll(cache)
			if err != nil {
				return append(recs, mustFail(mountRec, err)), err
			}
		}
		mountRec.Seconds = median(mounts)
		mountRec.Verified = true
		openRec.Seconds = median(opens)
		openRec.Verified = true
		openRec.Repo = &RepoFigures{Shards: repoOpenRuns, OpenSeconds: openRec.Seconds, RSSBytes: rss}
		openRec.Note = fmt.Sprintf("opens %v s; mounts %v s", rounded(opens), rounded(mounts))
		if rss > 0 {
			openRec.Note += fmt.Sprintf("; %.1f MB resident after its open (%d such mounts: %.0f MB)", float64(rss)/1e6, repoShards, float64(rss)*repoShards/1e6)
		}
		recs = append(recs, mountRec, openRec)
	}

	// Every small shard opened through one repository mount.
	all := Record{System: sysSegfsRepo, Case: caseRepoAll, What: fmt.Sprintf("every one of the %d small shards opened (list, read every file) through one repository mount, one after another; the process's resident set after", repoShards)}
	cache, err := b.freshCache()
	if err != nil {
		return recs, err
	}
	res, err := b.mounted(ctx, mountOpts{cacheDir: cache, prefix: repoBase, extra: repoArgs}, func(ctx context.Context, m *harness.Mount, mnt string) error {
		t := time.Now()
		for i, want := range small {
			if err := open(filepath.Join(mnt, repoSmallUUID, fmt.Sprint(i)), want); err != nil {
				return err
			}
		}
		all.Seconds = time.Since(t).Seconds()
		ps, err := harness.ReadProcStatus(m.Pid())
		if err != nil {
			return err
		}
		st, err := m.Stats(ctx)
		if err != nil {
			return err
		}
		all.Repo = &RepoFigures{Shards: repoShards, RSSBytes: ps.VmRSS, Goroutines: st["goroutines"], Threads: int64(ps.Threads)}
		return nil
	})
	os.RemoveAll(cache)
	if err != nil {
		return append(recs, mustFail(all, err)), err
	}
	allRes := res
	all.Verified, all.Resources = true, &allRes
	all.Note = fmt.Sprintf("%d shards in %.2f s; then %.1f MB resident, %d goroutines, %d threads",
		repoShards, all.Seconds, float64(all.Repo.RSSBytes)/1e6, all.Repo.Goroutines, all.Repo.Threads)
	recs = append(recs, all)

	// Two large shards copied at once through one repository mount,
	// against each alone on a mount of its own.
	copies := Record{System: sysSegfsRepo, Case: caseRepoCopies, What: "two large shards read whole at once through one repository mount (each file in 1 MiB reads), against each alone on a fresh repository mount"}
	read := func(dir string, want map[string][]byte) (float64, error) {
		t := time.Now()
		if err := open(dir, want); err != nil {
			return 0, err
		}
		return time.Since(t).Seconds(), nil
	}
	figs := &RepoFigures{Shards: 2}
	for i := range 2 {
		cache, err := b.freshCache()
		if err != nil {
			return recs, err
		}
		_, err = b.mounted(ctx, mountOpts{cacheDir: cache, prefix: repoBase, extra: repoArgs}, func(ctx context.Context, m *harness.Mount, mnt string) error {
			s, err := read(filepath.Join(mnt, repoBigUUID, fmt.Sprint(i)), big[i])
			figs.AloneSeconds = append(figs.AloneSeconds, s)
			return err
		})
		os.RemoveAll(cache)
		if err != nil {
			return append(recs, mustFail(copies, err)), err
		}
	}
	cache, err = b.freshCache()
	if err != nil {
		return recs, err
	}
	res, err = b.mounted(ctx, mountOpts{cacheDir: cache, prefix: repoBase, extra: repoArgs}, func(ctx context.Context, m *harness.Mount, mnt string) error {
		var wg sync.WaitGroup
		secs := make([]float64, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				secs[i], errs[i] = read(filepath.Join(mnt, repoBigUUID, fmt.Sprint(i)), big[i])
			}()
		}
		wg.Wait()
		figs.CopySeconds = secs
		return errors.Join(errs...)
	})
	os.RemoveAll(cache)
	if err != nil {
		return append(recs, mustFail(copies, err)), err
	}
	copies.Seconds = max(figs.CopySeconds[0], figs.CopySeconds[1])
	copiesRes := res
	copies.Verified, copies.Resources, copies.Repo = true, &copiesRes, figs
	copies.Note = fmt.Sprintf("at once %.2f s and %.2f s (slower over faster %.2f); alone %.2f s and %.2f s",
		figs.CopySeconds[0], figs.CopySeconds[1], max(figs.CopySeconds[0], figs.CopySeconds[1])/min(figs.CopySeconds[0], figs.CopySeconds[1]),
		figs.AloneSeconds[0], figs.AloneSeconds[1])
	return append(recs, copies), nil
}

// putRepository writes case 10's repository: repoShards small shards of
// one index (fixed paths, found by listing) and two large ones of
// another (hashed_prefix, with its index path file), 8 shards at once.
// It returns what each shard's directory must show.
func (b *bench) putRepository(ctx context.Context) (small, big []map[string][]byte, err error) {
	put := func(key string, data []byte) error {
		_, err := b.srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	start := time.Now()
	type job struct {
		o     osremote.Options
		scale int64
		out   *map[string][]byte
	}
	small, big = make([]map[string][]byte, repoShards), make([]map[string][]byte, 2)
	var jobs []job
	for i := range repoShards {
		jobs = append(jobs, job{osremote.Options{Base: repoBase, IndexUUID: repoSmallUUID, Shard: i, PathType: layout.Fixed, Version: 2, Seed: uint64(b.cfg.seed) + uint64(i)}, repoSmallScale, &small[i]})
	}
	for i := range 2 {
		jobs = append(jobs, job{osremote.Options{Base: repoBase, IndexUUID: repoBigUUID, Shard: i, PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1,
			Version: 2, Seed: uint64(b.cfg.seed) + 1000 + uint64(i), IndexPathFile: i == 1}, repoBigScale, &big[i]})
	}
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, 8)
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			files, err := osremote.ShardFiles([]string{"_0", "_1"}, 3, j.scale, j.o.Seed)
			if err != nil {
				errs[i] = err
				return
			}
			ref, err := osremote.New(put, j.o).Upload(files, 1, 3)
			if err != nil {
				errs[i] = err
				return
			}
			if ref.SegmentInfos != nil {
				files[layout.SegmentsFileName(ref.Metadata.Generation)] = ref.SegmentInfos
			}
			*j.out = files
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	fmt.Printf("  repo     uploaded %d small and 2 large shards to s3://%s/%s in %v\n", repoShards, bucket, repoBase, time.Since(start).Round(time.Millisecond))
	return small, big, nil
}

// median of xs (which it sorts).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	return xs[len(xs)/2]
}

// rounded is xs to two decimals, for notes.
func rounded(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(int(x*100+0.5)) / 100
	}
	return out
}
