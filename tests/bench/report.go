package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Systems measured.
const (
	sysSegfs    = "segfs"
	sysSegfsAll = "segfs-prefetch-all"
	// sysSegfsRestore is segfs restore: the shard written straight to a
	// directory from part fetches, no mount.
	sysSegfsRestore        = "segfs-restore"
	sysSegfsRestoreNoCache = "segfs-restore-no-cache"
	// sysSegfsPassthrough reads case 5 with --passthrough, from
	// whole-object files the kernel serves.
	sysSegfsPassthrough = "segfs-passthrough"
	// sysSegfsMmap reads case 3 through a mapping of the file.
	sysSegfsMmap = "segfs-mmap"
	// sysSegfsOpenSearch mounts case 8's index in OpenSearch's remote
	// store layout.
	sysSegfsOpenSearch = "segfs-opensearch"
	// sysSegfsSnapshot mounts case 8's index, and restores case 2's
	// shard, from a snapshot repository (--layout snapshot).
	sysSegfsSnapshot = "segfs-snapshot"
	// sysSegfsRepo mounts case 10's whole repository.
	sysSegfsRepo = "segfs-repository"
	sysLocal     = "local-file"
	sysFileBased = "file-based"
	sysLimit     = "limit"
	// sysPlain fetches the same ranges as the segfs record of its case
	// with a plain client (case 8's open ranges).
	sysPlain     = "plain-client"
	sysSingleGet = "single-get"
	// Case 7 compares one shard stored raw with the same shard stored
	// with the hybrid compression policy.
	sysRaw    = "raw"
	sysHybrid = "hybrid"
)

// Cases, in the order they are reported. Baselines carry the id of the
// case they are the reference for.
const (
	caseSeqRead    = "1-cold-seq-read"
	caseCopy       = "2-cold-recovery-copy"
	caseRandom     = "3-cold-random-reads"
	caseRandomBusy = "4-random-beside-copy"
	caseWarmSeq    = "5-warm-seq-read"
	caseWarmRandom = "5-warm-random-reads"
	caseResources  = "6-resources-during-copy"
	casePush       = "7-push"
	caseCmpSeq     = "7-cold-seq-read-fdt"
	caseCmpRandom  = "7-cold-random-reads-fdt"
)

// caseOrder and systemOrder sort the records for the table and the file.
var (
	caseOrder   = []string{caseSeqRead, caseCopy, caseRandom, caseRandomBusy, caseWarmSeq, caseWarmRandom, caseResources, casePush, caseCmpSeq, caseCmpRandom, caseOpenRanges, caseLuceneOpenMmap, caseLuceneQueriesMmap, caseLuceneOpenNio, caseLuceneQueriesNio, caseRepoMount, caseRepoOpen, caseRepoAll, caseRepoCopies}
	systemOrder = []string{sysFileBased, sysLimit, sysPlain, sysSingleGet, sysLocal, sysSegfs, sysSegfsAll, sysSegfsRestore, sysSegfsRestoreNoCache, sysSegfsSnapshot, sysSegfsRepo, sysSegfsPassthrough, sysSegfsMmap, sysSegfsOpenSearch, sysRaw, sysHybrid}
)

// SortRecords orders records by case, baselines before segfs within a
// case. Unknown names go last; the sort is stable.
func SortRecords(recs []Record) {
	rank := func(list []string, s string) int {
		if i := slices.Index(list, s); i >= 0 {
			return i
		}
		return len(list)
	}
	slices.SortStableFunc(recs, func(a, b Record) int {
		if c := cmp.Compare(rank(caseOrder, a.Case), rank(caseOrder, b.Case)); c != 0 {
			return c
		}
		return cmp.Compare(rank(systemOrder, a.System), rank(systemOrder, b.System))
	})
}

// Record is one measured (system, case) pair, as written to the JSON file.
type Record struct {
	System  string  `json:"system"`
	Case    string  `json:"case"`
	What    string  `json:"what"`
	Seconds float64 `json:"seconds,omitempty"`
	Bytes   int64   `json:"bytes,omitempty"`
	MBps    float64 `json:"mb_per_s,omitempty"`
	// Latency summarises per-read latencies (random reads).
	Latency *Latencies `json:"latency,omitempty"`
	// Throughput ratios: this record's MB/s over the baseline's. Against
	// file-based it is a speedup; against limit, the fraction of the best
	// the remote allows.
	RatioFileBased *float64 `json:"ratio_to_file_based,omitempty"`
	RatioLimit     *float64 `json:"ratio_to_limit,omitempty"`
	// RatioLocal is a warm case's MB/s, or p99 latency, over the local
	// file's (case 5); for latency above 1 is slower. For warm random
	// reads with LocalPaired it is against those, else against the
	// local-file record. For the cases of secondsToLocal (case 8's
	// opens) it is the seconds over the local record's.
	RatioLocal *float64 `json:"ratio_to_local_file,omitempty"`
	// LocalPaired summarises preads of the local file at the same offsets,
	// each beside the matching pread of this record (case 5 random reads),
	// and RatioLocalP50 is this record's p50 over its p50.
	LocalPaired   *Latencies `json:"local_paired_latency,omitempty"`
	RatioLocalP50 *float64   `json:"p50_ratio_to_local_paired,omitempty"`
	// LocalPairedMBps is the local copy's MB/s read 1 MiB at a time beside
	// this record's sequential read (case 5); "vs local" is against it.
	LocalPairedMBps float64 `json:"local_paired_mb_per_s,omitempty"`
	// Latency ratios: this record's p50 and p99 over the single ranged
	// GET's (above 1 is slower).
	RatioP50 *float64 `json:"p50_ratio_to_single_get,omitempty"`
	RatioP99 *float64 `json:"p99_ratio_to_single_get,omitempty"`
	// CPUSeconds is the CPU (user and system) of the process that did
	// the case's fetching: a plain client's, or segfs's where the case
	// measures it apart from Resources.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// RatioPlain is this record's seconds over its case's plain-client
	// record's (above 1 is slower).
	RatioPlain *float64 `json:"ratio_to_plain_client,omitempty"`
	// Resources of the segfs process during the case.
	Resources *Resources `json:"resources,omitempty"`
	// Compression holds case 7's figures and its ratios to raw.
	Compression *Compression `json:"compression,omitempty"`
	Verified    bool         `json:"verified"`
	// LoadAfter is the machine's 1-minute load average when the case
	// ended: the bench's own processes count, and so does other work.
	LoadAfter string `json:"loadavg_1m_after,omitempty"`
	Note      string `json:"note,omitempty"`
	// Refresh is a case 9 record's requests per refresh.
	Refresh *RefreshCost `json:"refresh,omitempty"`
	// Repo is case 10's figures.
	Repo  *RepoFigures `json:"repository,omitempty"`
	Error string       `json:"error,omitempty"`
}

// Results is the whole JSON file.
type Results struct {
	Date      time.Time      `json:"date"`
	Args      []string       `json:"args"`
	Profile   string         `json:"profile"`
	Quick     bool           `json:"quick"`
	Machine   Machine        `json:"machine"`
	Segfs     SegfsInfo      `json:"segfs"`
	Shard     ShardInfo      `json:"shard"`
	Sanity    []SanityResult `json:"shaping_check,omitempty"`
	Records   []Record       `json:"records"`
	Errors    []string       `json:"errors,omitempty"`
	MBDefined string         `json:"mb_definition"`
}

// SegfsInfo identifies the binary measured and how it was mounted.
type SegfsInfo struct {
	Path       string   `json:"path"`
	SHA256     string   `json:"sha256"`
	MaxFetches int      `json:"max_fetches"`
	PartSize   string   `json:"part_size"`
	ExtraArgs  []string `json:"extra_args,omitempty"`
}

// ShardInfo describes the data a run used.
type ShardInfo struct {
	Seed             int64  `json:"seed"`
	Files            int    `json:"files"`
	Bytes            int64  `json:"bytes"`
	BigFile          string `json:"big_file"`
	BigFileBytes     int64  `json:"big_file_bytes"`
	RandomFile       string `json:"random_reads_file"`
	RandomFileBytes  int64  `json:"random_reads_file_bytes"`
	JSONStoredFields bool   `json:"json_stored_fields"`
}

// FormatRatio renders a ratio as "2.31x", with more digits when small and
// "-" when it is missing.
func FormatRatio(r *float64) string {
	switch {
	case r == nil || math.IsNaN(*r) || math.IsInf(*r, 0):
		return "-"
	case *r >= 100:
		return fmt.Sprintf("%.0fx", *r)
	case *r >= 10:
		return fmt.Sprintf("%.1fx", *r)
	case *r >= 0.1:
		return fmt.Sprintf("%.2fx", *r)
	default:
		return fmt.Sprintf("%.3fx", *r)
	}
}

func formatFloat(v float64, digits int) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f", digits, v)
}

// WriteTable writes the records as an aligned table.
func WriteTable(w io.Writer, recs []Record) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tsystem\tseconds\tMB/s\tp50 ms\tp99 ms\tmax ms\tvs file-based\tvs limit\tvs plain\tp50 vs GET\tp99 vs GET\tvs local\tload\t")
	prev := ""
	for _, r := range recs {
		if r.Case == caseResources || r.Compression != nil || r.System == sysRaw || r.System == sysHybrid {
			continue // case 6 is in WriteResources, case 7 in WriteCompression
		}
		c := r.Case
		if c == prev {
			c = ""
		}
		prev = r.Case
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\tFAILED\t\t\t\t\t\t\t\t\t\t\t\t\n", c, r.System)
			continue
		}
		var p50, p99, mx string
		if r.Latency != nil {
			p50, p99, mx = formatFloat(r.Latency.P50, 1), formatFloat(r.Latency.P99, 1), formatFloat(r.Latency.Max, 1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			c, r.System, formatFloat(r.Seconds, 2), formatFloat(r.MBps, 1), p50, p99, mx,
			FormatRatio(r.RatioFileBased), FormatRatio(r.RatioLimit), FormatRatio(r.RatioPlain), FormatRatio(r.RatioP50), FormatRatio(r.RatioP99), FormatRatio(r.RatioLocal), r.LoadAfter)
	}
	return tw.Flush()
}

// WriteCompression writes case 7: the raw and hybrid records side by
// side, with the hybrid one's ratios to raw.
func WriteCompression(w io.Writer, recs []Record) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tsystem\tseconds\tMB/s\tp50 ms\tp99 ms\tstored MB\tfetched MB\tCPU s\tdecode s\ttime vs raw\tMB/s vs raw\tstored vs raw\tp50 vs raw\tp99 vs raw\tCPU vs raw\tload\t")
	prev := ""
	for _, r := range recs {
		if r.System != sysRaw && r.System != sysHybrid {
			continue
		}
		c := r.Case
		if c == prev {
			c = ""
		}
		prev = r.Case
		if r.Error != "" || r.Compression == nil {
			fmt.Fprintf(tw, "%s\t%s\tFAILED\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", c, r.System)
			continue
		}
		cm := r.Compression
		var p50, p99 string
		if r.Latency != nil {
			p50, p99 = formatFloat(r.Latency.P50, 1), formatFloat(r.Latency.P99, 1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			c, r.System, formatFloat(r.Seconds, 2), formatFloat(r.MBps, 1), p50, p99,
			formatFloat(float64(cm.StoredBytes)/1e6, 1), formatFloat(float64(cm.FetchedBytes)/1e6, 1),
			formatFloat(cm.CPUSeconds, 2), formatFloat(cm.DecodeSeconds, 3),
			FormatRatio(cm.SecondsToRaw), FormatRatio(cm.MBpsToRaw), FormatRatio(cm.StoredToRaw),
			FormatRatio(cm.P50ToRaw), FormatRatio(cm.P99ToRaw), FormatRatio(cm.CPUToRaw), r.LoadAfter)
	}
	return tw.Flush()
}

// WriteResources writes the resource figures of the records that have them.
func WriteResources(w io.Writer, recs []Record) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tsystem\tpeak goroutines\tpeak threads\tpeak RSS MiB\tpeak heap MiB\tGETs\tfetched MB\tserved MB\tfetched/served\tCPU s\tCPU s/GB served\t")
	for _, r := range recs {
		if r.Resources == nil || r.Case == caseResources {
			continue
		}
		res := r.Resources
		perGB := "-"
		if res.ReadBytes > 0 && res.CPUSeconds > 0 {
			perGB = fmt.Sprintf("%.2f", res.CPUSeconds/(float64(res.ReadBytes)/1e9))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.0f\t%d\t%.1f\t%.1f\t%s\t%.2f\t%s\t\n",
			r.Case, r.System, res.PeakGoroutines, res.PeakThreads, float64(res.PeakRSSBytes)/(1<<20), float64(res.PeakHeap)/(1<<20),
			res.Gets, float64(res.GetBytes)/1e6, float64(res.ReadBytes)/1e6, FormatRatio(Ratio(float64(res.GetBytes), float64(res.ReadBytes))),
			res.CPUSeconds, perGB)
	}
	return tw.Flush()
}

// WriteCPU writes where the machine's CPU went during each segfs case:
// how busy it was, and the CPU seconds of segfs, the S3 server, the bench
// process (the shaping proxy and the timed reads) and everything else
// (cp, other processes, kernel threads).
func WriteCPU(w io.Writer, recs []Record) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tsystem\tmachine busy\tsegfs CPU s\tserver CPU s\tbench CPU s\tother CPU s\t")
	for _, r := range recs {
		res := r.Resources
		if res == nil || r.Case == caseResources || res.MachineSeconds <= 0 {
			continue
		}
		other := res.MachineCPUSeconds - res.CPUSeconds - res.ServerCPUSeconds - res.BenchCPUSeconds
		fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t%.2f\t%.2f\t%.2f\t%.2f\t\n", r.Case, r.System,
			100*res.MachineCPUSeconds/res.MachineSeconds, res.CPUSeconds, res.ServerCPUSeconds, res.BenchCPUSeconds, max(other, 0))
	}
	return tw.Flush()
}

// cpuSeconds is the CPU of a record's fetching process: CPUSeconds where
// the case measured it, else the segfs process's over the case.
func cpuSeconds(r Record) float64 {
	if r.CPUSeconds > 0 {
		return r.CPUSeconds
	}
	if r.Resources != nil {
		return r.Resources.CPUSeconds
	}
	return 0
}

// plainRef is the record of a plain client doing a case's fetching: its
// plain-client record, or the limit record of its throughputRef case.
func plainRef(recs []Record, c string) *Record {
	for _, sys := range []string{sysPlain, sysLimit} {
		ref := c
		if sys == sysLimit {
			var ok bool
			if ref, ok = throughputRef[c]; !ok {
				continue
			}
		}
		for i := range recs {
			if r := &recs[i]; r.System == sys && r.Case == ref && r.Error == "" && r.CPUSeconds > 0 && r.Bytes > 0 {
				return r
			}
		}
	}
	return nil
}

// WriteCPUPerGiB writes each fetch-bound record's CPU seconds per GiB
// (2^30 bytes) fetched or read, beside its case's plain client's, and
// the ratio of the two.
func WriteCPUPerGiB(w io.Writer, recs []Record) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tsystem\tGiB\tCPU s\tCPU s per GiB\tplain client's\tvs plain\t")
	for _, r := range recs {
		ref := plainRef(recs, r.Case)
		cpu := cpuSeconds(r)
		if r.Error != "" || ref == nil || r.Bytes <= 0 || cpu <= 0 || r.Case == caseResources {
			continue
		}
		gib := float64(r.Bytes) / (1 << 30)
		perGiB, refPer := cpu/gib, ref.CPUSeconds/(float64(ref.Bytes)/(1<<30))
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.2f\t%.2f\t%.2f\t%s\t\n", r.Case, r.System, gib, cpu, perGiB, refPer, FormatRatio(Ratio(perGiB, refPer)))
	}
	return tw.Flush()
}

// WriteNotes writes each record's note and error, numbered by case.
func WriteNotes(w io.Writer, recs []Record) {
	for _, r := range recs {
		if r.Note != "" {
			fmt.Fprintf(w, "  %s %s: %s\n", r.Case, r.System, r.Note)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "  %s %s: ERROR: %s\n", r.Case, r.System, firstLine(r.Error))
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// writeJSON writes res to path atomically, creating its directory.
func writeJSON(path string, res Results) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// throughputRef names the case whose file-based and limit records a case's
// MB/s is compared with; latencyRef, the case whose single-get record its
// latencies are compared with.
var (
	throughputRef = map[string]string{
		caseSeqRead:    caseSeqRead,
		caseWarmSeq:    caseSeqRead,
		caseCopy:       caseCopy,
		caseRandomBusy: caseCopy,
		caseResources:  caseCopy,
	}
	latencyRef = map[string]string{
		caseRandom:     caseRandom,
		caseRandomBusy: caseRandom,
		caseWarmRandom: caseRandom,
	}
	// secondsToLocal are the cases whose "vs local" is the time over the
	// local-file record's: the time of one operation, not of bytes moved.
	secondsToLocal = map[string]bool{caseLuceneOpenMmap: true, caseLuceneOpenNio: true}
)

// ApplyRatios fills in every record's ratios to the baselines of the same
// run. A failed or missing baseline leaves the ratio missing.
func ApplyRatios(recs []Record) {
	applyCompressionRatios(recs)
	find := func(system, c string) *Record {
		for i := range recs {
			if recs[i].System == system && recs[i].Case == c && recs[i].Error == "" {
				return &recs[i]
			}
		}
		return nil
	}
	for i := range recs {
		r := &recs[i]
		if r.Error != "" {
			continue
		}
		if ref, ok := throughputRef[r.Case]; ok && r.MBps > 0 {
			if fb := find(sysFileBased, ref); fb != nil && r.System != sysFileBased {
				r.RatioFileBased = Ratio(r.MBps, fb.MBps)
			}
			if l := find(sysLimit, ref); l != nil && r.System != sysLimit {
				r.RatioLimit = Ratio(r.MBps, l.MBps)
			}
		}
		if r.Latency != nil && r.LocalPaired != nil {
			r.RatioLocal = Ratio(r.Latency.P99, r.LocalPaired.P99)
			r.RatioLocalP50 = Ratio(r.Latency.P50, r.LocalPaired.P50)
		} else if r.MBps > 0 && r.LocalPairedMBps > 0 {
			r.RatioLocal = Ratio(r.MBps, r.LocalPairedMBps)
		} else if l := find(sysLocal, r.Case); l != nil && r.System != sysLocal {
			switch {
			case secondsToLocal[r.Case]:
				r.RatioLocal = Ratio(r.Seconds, l.Seconds)
			case r.MBps > 0 && l.MBps > 0:
				r.RatioLocal = Ratio(r.MBps, l.MBps)
			case r.Latency != nil && l.Latency != nil:
				r.RatioLocal = Ratio(r.Latency.P99, l.Latency.P99)
			}
		}
		if ref, ok := latencyRef[r.Case]; ok && r.Latency != nil && r.System != sysSingleGet {
			if g := find(sysSingleGet, ref); g != nil && g.Latency != nil {
				r.RatioP50 = Ratio(r.Latency.P50, g.Latency.P50)
				r.RatioP99 = Ratio(r.Latency.P99, g.Latency.P99)
			}
		}
	}
}
