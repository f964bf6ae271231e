package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/shaper"
	"github.com/segfs/segfs/tests/shard"
)

// Case 7: hybrid compression. The same JSON-stored-fields shard is pushed
// twice with `segfs push`, raw and with the hybrid policy, to two
// prefixes; then its largest .fdt is read cold through fresh mounts of
// each prefix, sequentially and at random.
const (
	rawPrefix    = "cmp-raw"
	hybridPrefix = "cmp-hybrid"
	// quickMinSize is --compress-min-size in quick mode: the default
	// (64MiB) scaled down with the shard, so that the quick shard's large
	// .fdt files are compressed and its small one is not, as in full mode.
	quickMinSize = "8MiB"
)

// Compression holds case 7's figures of one record.
type Compression struct {
	// LocalBytes and StoredBytes: for a push, the shard's local bytes and
	// the bytes stored under the prefix afterwards (Objects objects,
	// CompressedFiles of them seekable zstd); for a read, the file's
	// logical size and the size of the object that holds it.
	LocalBytes      int64 `json:"local_bytes"`
	StoredBytes     int64 `json:"stored_bytes"`
	Objects         int   `json:"objects,omitempty"`
	CompressedFiles int   `json:"compressed_files,omitempty"`
	// CPUSeconds: for a push, user+system time of the `segfs push`
	// process (hashing, compression, upload); for a read, of the segfs
	// mount process from the read's start to its end (/proc/PID/stat,
	// 10 ms ticks).
	CPUSeconds float64 `json:"cpu_seconds"`
	// DecodeSeconds is the wall time the mount spent in the zstd frame
	// decoder during the read (/stats frame_decode_ns); DecodedBytes the
	// logical bytes it decoded.
	DecodeSeconds float64 `json:"decode_seconds,omitempty"`
	DecodedBytes  int64   `json:"decoded_bytes,omitempty"`
	// FetchedBytes is what the mount fetched from the remote during the
	// read (/stats get_bytes).
	FetchedBytes int64 `json:"fetched_bytes,omitempty"`

	// Ratios of a hybrid record to the raw record of the same case in
	// the same run (above 1: more, slower or larger than raw).
	SecondsToRaw *float64 `json:"seconds_ratio_to_raw,omitempty"`
	MBpsToRaw    *float64 `json:"mb_per_s_ratio_to_raw,omitempty"`
	StoredToRaw  *float64 `json:"stored_bytes_ratio_to_raw,omitempty"`
	FetchedToRaw *float64 `json:"fetched_bytes_ratio_to_raw,omitempty"`
	CPUToRaw     *float64 `json:"cpu_seconds_ratio_to_raw,omitempty"`
	P50ToRaw     *float64 `json:"p50_ratio_to_raw,omitempty"`
	P99ToRaw     *float64 `json:"p99_ratio_to_raw,omitempty"`
}

// cmpData is case 7's data: the shard pushed and the file read.
type cmpData struct {
	src     string         // directory holding the shard's files only
	man     shard.Manifest // its files
	fdt     shard.File     // the largest stored-fields file
	local   string         // fdt's generated file
	minSize []string       // the hybrid push's --compress-min-size, if not the default
}

func (b *bench) compression(ctx context.Context) ([]Record, error) {
	var recs []Record
	// Each record gets the load average as it ends: the step has six.
	stamp := func(r Record) Record {
		r.LoadAfter, _, _ = strings.Cut(loadAvg(), " ")
		return r
	}
	fail := func(rec Record, err error) ([]Record, error) {
		r, err := failed(rec, err)
		return append(recs, r...), err
	}
	d, err := b.compressionData()
	if err != nil {
		return fail(Record{System: sysHybrid, Case: casePush, What: "prepare the JSON shard"}, err)
	}
	endpoint := b.srv.Endpoint()
	if !b.cfg.profile.Direct {
		sh, err := shaper.Start(b.srv.Endpoint(), b.cfg.profile, shaper.Options{Upload: true, Buffered: b.cfg.shaperBuffered})
		if err != nil {
			return fail(Record{System: sysHybrid, Case: casePush, What: "start the upload proxy"}, err)
		}
		defer sh.Close()
		endpoint = sh.Endpoint()
	}

	total := d.man.TotalSize()
	raw := Record{System: sysRaw, Case: casePush,
		What: fmt.Sprintf("segfs push of the %d-file JSON shard (%.0f MB) to s3://%s/%s with --compress-match \"\" (nothing compressed)", len(d.man.Files), float64(total)/1e6, bucket, rawPrefix)}
	hyb := Record{System: sysHybrid, Case: casePush,
		What: fmt.Sprintf("segfs push of the same shard to s3://%s/%s with the default policy (*.fdt of at least %s, 256KiB frames, level 3)", bucket, hybridPrefix, minSizeText(d.minSize))}
	for _, p := range []struct {
		rec    *Record
		prefix string
		args   []string
	}{
		{&raw, rawPrefix, []string{"--compress-match", ""}},
		{&hyb, hybridPrefix, d.minSize},
	} {
		if err := b.pushCase(ctx, p.rec, endpoint, d, p.prefix, p.args); err != nil {
			return fail(*p.rec, err)
		}
		recs = append(recs, stamp(*p.rec))
	}

	rawObj := object{Key: rawPrefix + "/" + d.fdt.Name, Local: d.local, Size: d.fdt.Size, SHA256: d.fdt.SHA256}
	zst, err := b.remote.head(ctx, hybridPrefix+"/"+d.fdt.Name+".zst")
	if err != nil {
		return fail(Record{System: sysHybrid, Case: caseCmpSeq, What: "find the compressed .fdt"}, fmt.Errorf("%s was not stored compressed: %w", d.fdt.Name, err))
	}
	zstObj := object{Key: hybridPrefix + "/" + d.fdt.Name + ".zst", Size: zst}
	size := func(o object) string { return fmt.Sprintf("%.0f MB", float64(o.Size)/1e6) }
	for _, c := range []struct {
		sys    string
		prefix string
		stored object
	}{{sysRaw, rawPrefix, rawObj}, {sysHybrid, hybridPrefix, zstObj}} {
		rec := Record{System: c.sys, Case: caseCmpSeq,
			What: fmt.Sprintf("cold sequential read of %s (%.0f MB; stored as %s, %s) through a fresh mount of s3://%s/%s, 1 MiB reads",
				d.fdt.Name, float64(d.fdt.Size)/1e6, c.stored.Key, size(c.stored), bucket, c.prefix)}
		r, err := b.cmpRead(ctx, rec, d, c.prefix, c.stored, false)
		recs = append(recs, stamp(r))
		if err != nil {
			return recs, err
		}
	}
	for _, c := range []struct {
		sys    string
		prefix string
		stored object
	}{{sysRaw, rawPrefix, rawObj}, {sysHybrid, hybridPrefix, zstObj}} {
		rec := Record{System: c.sys, Case: caseCmpRandom,
			What: fmt.Sprintf("cold: %d preads of %d bytes of %s at seeded offsets through a fresh mount of s3://%s/%s, one after another",
				b.cfg.reads, b.cfg.readSize, d.fdt.Name, bucket, c.prefix)}
		r, err := b.cmpRead(ctx, rec, d, c.prefix, c.stored, true)
		recs = append(recs, stamp(r))
		if err != nil {
			return recs, err
		}
	}
	return recs, nil
}

func minSizeText(args []string) string {
	if len(args) == 2 {
		return args[1]
	}
	return "64MiB"
}

// compressionData returns the JSON shard (the main one when it has JSON
// stored fields, else a sibling generated and cached next to it) linked
// into a directory of its own, which `segfs push` uploads whole.
func (b *bench) compressionData() (cmpData, error) {
	var d cmpData
	dir, man := b.shardDir, b.shardMan
	if !b.cfg.jsonFields {
		spec := shard.Spec{Seed: b.cfg.seed, Scale: fullScale, Segments: 3, JSONStoredFields: true}
		if b.cfg.quick {
			spec.Scale = quickScale
		}
		dir = filepath.Join(b.cfg.cacheDir, b.mode+"-json")
		reused := shard.Cached(dir, spec)
		start := time.Now()
		var err error
		if man, err = shard.Generate(dir, spec); err != nil {
			return d, err
		}
		if !reused {
			fmt.Printf("  (generated the JSON shard %s in %v)\n", dir, time.Since(start).Round(time.Millisecond))
		}
	}
	d.src = filepath.Join(b.work, "cmp-src")
	if err := os.MkdirAll(d.src, 0o755); err != nil {
		return d, err
	}
	for _, f := range man.Files {
		if err := linkOrCopy(filepath.Join(dir, f.Name), filepath.Join(d.src, f.Name)); err != nil {
			return d, err
		}
		if strings.HasSuffix(f.Name, ".fdt") && f.Size > d.fdt.Size {
			d.fdt = f
		}
	}
	if d.fdt.Name == "" {
		return d, errors.New("the shard has no .fdt file")
	}
	d.man, d.local = man, filepath.Join(dir, d.fdt.Name)
	if b.cfg.quick {
		d.minSize = []string{"--compress-min-size", quickMinSize}
	}
	return d, nil
}

// linkOrCopy hard-links src to dst, or copies it when it cannot.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// pushCase runs `segfs push` of d.src to s3://bucket/prefix through
// endpoint, timing it, and fills rec with the time, the process's CPU
// time and what is stored under the prefix afterwards. The local page
// cache is dropped first (as root), so both pushes read the shard from
// the same state.
func (b *bench) pushCase(ctx context.Context, rec *Record, endpoint string, d cmpData, prefix string, extra []string) error {
	if err := b.dropLocal(); err != nil {
		return err
	}
	args := []string{"push", "--endpoint", endpoint, "--path-style", "--region", harness.Region, "--tmp-dir", b.work}
	args = append(args, extra...)
	args = append(args, d.src, "s3://"+bucket+"/"+prefix)
	cmd := exec.CommandContext(ctx, b.bins.Segfs, args...)
	cmd.Env = harness.ChildEnv(b.srv.Env()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		return fmt.Errorf("segfs %s: %w\n%s", strings.Join(args, " "), err, tail(out.String(), 3000))
	}
	st, err := b.remote.listPrefix(ctx, prefix+"/")
	if err != nil {
		return err
	}
	if st.objects != len(d.man.Files) {
		return fmt.Errorf("%d objects under %s/, want one per file (%d)", st.objects, prefix, len(d.man.Files))
	}
	local := d.man.TotalSize()
	rec.Seconds, rec.Bytes, rec.MBps = took.Seconds(), local, MBps(local, took)
	rec.Compression = &Compression{
		LocalBytes: local, StoredBytes: st.bytes, Objects: st.objects, CompressedFiles: st.zst,
		CPUSeconds: (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(),
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	rec.Note = "segfs push said: " + lines[len(lines)-1]
	return nil
}

// cmpRead reads d.fdt cold through a fresh mount of prefix, with a fresh
// cache directory and the page cache dropped (as root): sequentially, or
// with the random preads. The segfs process's CPU time and its counters
// are read right before and after the reads.
func (b *bench) cmpRead(ctx context.Context, rec Record, d cmpData, prefix string, stored object, random bool) (Record, error) {
	cacheDir, err := b.freshCache()
	if err != nil {
		r, err := failed(rec, err)
		return r[0], err
	}
	defer os.RemoveAll(cacheDir)
	var offsets []int64
	var want [][]byte
	var sums *chunkSums
	if random {
		offsets = randomOffsets(b.cfg.seed, b.cfg.reads, d.fdt.Size, b.cfg.readSize)
		want, err = expectedAt(d.local, offsets, b.cfg.readSize)
	} else {
		sums, err = b.sumsOf(object{Local: d.local, Size: d.fdt.Size, SHA256: d.fdt.SHA256})
	}
	if err != nil {
		r, err := failed(rec, err)
		return r[0], err
	}
	var c Compression
	var lat []time.Duration
	var n int64
	var took time.Duration
	res, err := b.mounted(ctx, mountOpts{cacheDir: cacheDir, prep: []object{stored}, prefix: prefix}, func(ctx context.Context, m *harness.Mount, mnt string) error {
		path := filepath.Join(mnt, d.fdt.Name)
		cpu0, err := procCPU(m.Pid())
		if err != nil {
			return err
		}
		s0, err := m.Stats(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		if random {
			lat, _, err = randomReads(ctx, path, offsets, b.cfg.readSize, want, nil)
			n = int64(len(lat) * b.cfg.readSize)
		} else {
			n, _, err = seqRead(ctx, path, sums)
		}
		took = time.Since(start)
		if err != nil {
			return err
		}
		cpu1, err := procCPU(m.Pid())
		if err != nil {
			return err
		}
		s1, err := m.Stats(ctx)
		if err != nil {
			return err
		}
		c = Compression{
			LocalBytes: d.fdt.Size, StoredBytes: stored.Size,
			CPUSeconds:    (cpu1 - cpu0).Seconds(),
			DecodeSeconds: float64(s1["frame_decode_ns"]-s0["frame_decode_ns"]) / 1e9,
			DecodedBytes:  s1["frame_decoded_bytes"] - s0["frame_decoded_bytes"],
			FetchedBytes:  s1["get_bytes"] - s0["get_bytes"],
		}
		return nil
	})
	rec.Resources = &res
	if err != nil {
		r, err := failed(rec, err)
		return r[0], err
	}
	rec.Seconds, rec.Bytes, rec.Verified, rec.Compression = took.Seconds(), n, true, &c
	if random {
		l := Summarize(lat)
		rec.Latency = &l
	} else {
		rec.MBps = MBps(n, took)
	}
	return rec, nil
}

// prefixStats totals the objects below a prefix.
type prefixStats struct {
	objects, zst int
	bytes        int64
}

// listPrefix lists the objects below prefix.
func (r *remote) listPrefix(ctx context.Context, prefix string) (prefixStats, error) {
	var st prefixStats
	p := s3.NewListObjectsV2Paginator(r.client, &s3.ListObjectsV2Input{Bucket: aws.String(r.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return st, fmt.Errorf("list s3://%s/%s: %w", r.bucket, prefix, err)
		}
		for _, o := range page.Contents {
			st.objects++
			st.bytes += aws.ToInt64(o.Size)
			if strings.HasSuffix(aws.ToString(o.Key), ".zst") {
				st.zst++
			}
		}
	}
	return st, nil
}

// head returns key's size.
func (r *remote) head(ctx context.Context, key string) (int64, error) {
	out, err := r.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(key)})
	if err != nil {
		return 0, fmt.Errorf("head s3://%s/%s: %w", r.bucket, key, err)
	}
	return aws.ToInt64(out.ContentLength), nil
}

// applyCompressionRatios sets the ratios of each hybrid record of case 7
// to the raw record of the same case.
func applyCompressionRatios(recs []Record) {
	for i := range recs {
		h := &recs[i]
		if h.System != sysHybrid || h.Error != "" || h.Compression == nil {
			continue
		}
		var raw *Record
		for j := range recs {
			if recs[j].System == sysRaw && recs[j].Case == h.Case && recs[j].Error == "" && recs[j].Compression != nil {
				raw = &recs[j]
			}
		}
		if raw == nil {
			continue
		}
		hc, rc := h.Compression, raw.Compression
		switch h.Case {
		case casePush:
			hc.SecondsToRaw = Ratio(h.Seconds, raw.Seconds)
			hc.StoredToRaw = Ratio(float64(hc.StoredBytes), float64(rc.StoredBytes))
		case caseCmpSeq:
			hc.SecondsToRaw = Ratio(h.Seconds, raw.Seconds)
			hc.MBpsToRaw = Ratio(h.MBps, raw.MBps)
		case caseCmpRandom:
			if h.Latency != nil && raw.Latency != nil {
				hc.P50ToRaw = Ratio(h.Latency.P50, raw.Latency.P50)
				hc.P99ToRaw = Ratio(h.Latency.P99, raw.Latency.P99)
			}
		}
		hc.CPUToRaw = Ratio(hc.CPUSeconds, rc.CPUSeconds)
		if h.Case != casePush {
			hc.StoredToRaw = Ratio(float64(hc.StoredBytes), float64(rc.StoredBytes))
			hc.FetchedToRaw = Ratio(float64(hc.FetchedBytes), float64(rc.FetchedBytes))
		}
	}
}
