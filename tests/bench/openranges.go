package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// caseOpenRanges is case 11: the ranges segfs's open-time prefetch
// fetches for case 8's index, against a plain client fetching the same
// ranges.
const caseOpenRanges = "11-open-ranges"

// openRangeRounds is how many times each system fetches the open's
// ranges, taking turns (segfs, then the plain client).
const openRangeRounds = 3

// rangeFetchMsg is the debug line segfs logs for each range-tier GET
// (reader/rangetier.go): the key below the mount's source, the offset
// and the length.
const rangeFetchMsg = "range fetch"

// openRangesCase is case 11, on case 8's index.
func (b *bench) openRangesCase(ctx context.Context) ([]Record, error) {
	set, err := b.luceneSetup(ctx)
	if err != nil {
		return failed(Record{System: sysSegfs, Case: caseOpenRanges}, err)
	}
	return b.openRanges(ctx, set)
}

// openRanges measures what the open of the index costs in fetches alone:
// a fresh mount of the plain upload, with an empty cache, lists the
// index's directory (its first sight, which starts the open-time
// prefetch) and waits until it is idle; its time is open_prefetch_ns
// (from the directory's first sight to the end of its last range
// fetch) and its CPU the segfs process's over that wait. The plain
// client then fetches the same ranges, read from the mount's log, with
// --max-fetches goroutines of ranged GETs. The page cache is dropped
// and the server's files read back before each.
func (b *bench) openRanges(ctx context.Context, set *luceneSet) ([]Record, error) {
	what := fmt.Sprintf("the ranges the open-time prefetch fetches for the %d-file, %.0f MB index", set.files, float64(set.bytes)/1e6)
	seg := Record{System: sysSegfs, Case: caseOpenRanges, What: what + ": a cold mount lists the index, open_prefetch_ns; median of " +
		fmt.Sprint(openRangeRounds) + " rounds"}
	plain := Record{System: sysPlain, Case: caseOpenRanges, What: fmt.Sprintf("the same ranges, %d goroutines of ranged GETs (aws-sdk-go-v2) in a process of their own; median of %d rounds",
		b.cfg.maxFetches, openRangeRounds)}
	var segT, segCPU, plT, plCPU []float64
	var ranges []span
	for round := range openRangeRounds {
		cache, err := b.freshCache()
		if err != nil {
			return failed(seg, err)
		}
		mo := mountOpts{prep: set.objs, cacheDir: cache, extra: []string{"--log-level", "debug", "--log-format", "json"}}
		var took, cpu time.Duration
		var got []span
		_, err = b.mounted(ctx, mo, func(ctx context.Context, m *harness.Mount, mnt string) error {
			cpu0, err := procCPU(m.Pid())
			if err != nil {
				return err
			}
			if _, err := os.ReadDir(filepath.Join(mnt, lucenePrefix)); err != nil {
				return err
			}
			if err := waitIdle(ctx, m); err != nil {
				return err
			}
			cpu1, err := procCPU(m.Pid())
			if err != nil {
				return err
			}
			s, err := m.Stats(ctx)
			if err != nil {
				return err
			}
			took, cpu = time.Duration(s["open_prefetch_ns"]), cpu1-cpu0
			got, err = rangesOf(m.Log())
			return err
		})
		os.RemoveAll(cache)
		if err != nil {
			return failed(seg, err)
		}
		if took <= 0 || len(got) == 0 {
			return failed(seg, fmt.Errorf("round %d: open_prefetch_ns %d, %d range fetches logged", round, took, len(got)))
		}
		if ranges == nil {
			ranges = got
		} else if !sameSpans(ranges, got) {
			return failed(seg, fmt.Errorf("round %d fetched %d ranges, round 0 %d, not the same", round, len(got), len(ranges)))
		}
		segT, segCPU = append(segT, took.Seconds()), append(segCPU, cpu.Seconds())

		if err := b.prepare(ctx, set.objs); err != nil {
			return failed(plain, err)
		}
		res, err := b.plainGets(ctx, ranges, b.cfg.maxFetches)
		if err != nil {
			return failed(plain, err)
		}
		plT, plCPU = append(plT, res.Wall.Seconds()), append(plCPU, res.CPU.Seconds())
	}
	var n int64
	for _, s := range ranges {
		n += s.N
	}
	for _, x := range []struct {
		r        *Record
		t, cpu   []float64
		cpuWhose string
	}{{&seg, segT, segCPU, "the segfs process from the listing to idle"}, {&plain, plT, plCPU, "the plain client's process (rusage), start-up included"}} {
		x.r.Seconds, x.r.Bytes, x.r.CPUSeconds = median(x.t), n, median(x.cpu)
		x.r.MBps = float64(n) / 1e6 / x.r.Seconds
		x.r.Note = fmt.Sprintf("%d ranges, %.1f MB; seconds %s; CPU s of %s %s", len(ranges), float64(n)/1e6, spread(x.t), x.cpuWhose, spread(x.cpu))
	}
	plain.Note += "; byte counts checked"
	seg.Note += "; bytes not read back here (case 8's opens read them)"
	seg.RatioPlain = Ratio(seg.Seconds, plain.Seconds)
	return []Record{plain, seg}, nil
}

// rangesOf returns the range fetches a segfs log (--log-format json)
// records, in the order it logged them.
func rangesOf(log string) ([]span, error) {
	var out []span
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), rangeFetchMsg) {
			continue
		}
		var rec struct {
			Msg string `json:"msg"`
			Key string `json:"key"`
			Off int64  `json:"off"`
			Len int64  `json:"len"`
		}
		if err := json.Unmarshal(line, &rec); err != nil || rec.Msg != rangeFetchMsg {
			continue
		}
		if rec.Key == "" || rec.Off < 0 || rec.Len <= 0 {
			return nil, fmt.Errorf("segfs log: a range fetch line without key, offset or length: %s", line)
		}
		out = append(out, span{Key: rec.Key, Off: rec.Off, N: rec.Len})
	}
	return out, sc.Err()
}

// sameSpans reports whether a and b hold the same spans, in any order:
// the scheduler's order varies between rounds, the choice must not.
func sameSpans(a, b []span) bool {
	key := func(s span) string { return fmt.Sprintf("%s\x00%d\x00%d", s.Key, s.Off, s.N) }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i] = key(a[i])
	}
	for i := range b {
		kb[i] = key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// spread formats xs as min-max.
func spread(xs []float64) string {
	return fmt.Sprintf("%.3f-%.3f", slices.Min(xs), slices.Max(xs))
}
