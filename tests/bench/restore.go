package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/shard"
	"github.com/segfs/segfs/tests/snaprepo"
)

// Case 2, segfs restore: the shard written straight to a fresh
// directory by `segfs restore` (part fetches through the same pool,
// verified, fsynced and renamed), beside cp -r out of a mount and the
// same baselines. The clock runs from the process's start to its exit:
// it includes the listing and the cache's opening, which the mount
// cases do before theirs starts.
func (b *bench) recoveryRestore(ctx context.Context) ([]Record, error) {
	return b.restoreWith(ctx, sysSegfsRestore, "part cache on", shardPrefix, b.shardObjs)
}

// recoveryRestoreNoCache is the restore with --no-cache: the shard's
// bytes go to the disk once, not also into the part cache.
func (b *bench) recoveryRestoreNoCache(ctx context.Context) ([]Record, error) {
	return b.restoreWith(ctx, sysSegfsRestoreNoCache, "--no-cache", shardPrefix, b.shardObjs, "--no-cache")
}

// restoreWith times segfs restore of the shard from s3://bucket/source
// (with the layout flags in extra), prep the objects it reads.
func (b *bench) restoreWith(ctx context.Context, system, how, source string, prep []object, extra ...string) ([]Record, error) {
	rec := Record{System: system, Case: caseCopy,
		What: fmt.Sprintf("cold: segfs restore of the %d-file shard s3://%s/%s to a fresh directory (--verify footer, %s), process start to exit, then sha256 of every file", len(b.shardObjs), bucket, source, how)}
	cacheDir, dst, cleanup, err := b.copyDirs()
	if err != nil {
		return failed(rec, err)
	}
	defer cleanup()
	// The copies of the cases before leave their files' pages dirty;
	// written back during this case, they would compete with its writes.
	syscall.Sync()
	if err := b.prepare(ctx, prep); err != nil {
		return failed(rec, err)
	}
	port, err := harness.FreePort()
	if err != nil {
		return failed(rec, err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dest := filepath.Join(dst, shardPrefix)
	args := []string{"restore",
		"--endpoint", b.endpoint, "--path-style", "--region", harness.Region,
		"--max-fetches", strconv.Itoa(b.cfg.maxFetches), "--part-size", partSizeFlag,
		"--metrics-addr", addr}
	if !slices.Contains(extra, "--no-cache") {
		args = append(args, cacheDirFlag, cacheDir)
	}
	args = append(append(args, extra...), "s3://"+bucket+"/"+source, dest)
	cmd := exec.CommandContext(ctx, b.bins.Segfs, args...)
	cmd.Env = harness.ChildEnv(b.srv.Env()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return failed(rec, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Sample the process from when its counters answer (after the
	// listing) until it exits; a restore that ends first has only its
	// exit figures.
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	stats := func(ctx context.Context) (map[string]int64, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/stats", nil)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		m := map[string]int64{}
		return m, json.NewDecoder(resp.Body).Decode(&m)
	}
	var s *sampler
	var werr error
	waited := false
poll:
	for {
		select {
		case werr = <-exited:
			waited = true
			break poll
		case <-time.After(5 * time.Millisecond):
			if _, err := stats(ctx); err == nil {
				if s, err = startSampler(ctx, cmd.Process.Pid, b.srv.Pid(), stats, sampleEvery); err == nil {
					break poll
				}
			}
		}
	}
	if !waited {
		werr = <-exited
	}
	d := time.Since(start)
	if s != nil {
		res, _ := s.Stop(ctx) // the last reading fails: the process is gone
		// The process's own figures, which a sampler reading /proc and
		// /stats of a live process cannot take at its exit: CPU from its
		// wait status, GETs from its summary.
		if ps := cmd.ProcessState; ps != nil {
			res.CPUSeconds = (ps.UserTime() + ps.SystemTime()).Seconds()
		}
		if m := summaryGets.FindStringSubmatch(out.String()); m != nil {
			res.Gets, _ = strconv.ParseInt(m[1], 10, 64)
			res.GetBytes, _ = strconv.ParseInt(m[2], 10, 64)
		}
		res.ReadBytes = b.shardMan.TotalSize() // written to the directory
		rec.Resources = &res
	}
	if werr != nil {
		return failed(rec, fmt.Errorf("segfs restore: %w\n%s", werr, tail(out.String(), 3000)))
	}
	n := b.shardMan.TotalSize()
	rec.Seconds, rec.Bytes, rec.MBps = d.Seconds(), n, MBps(n, d)
	if err := shard.Verify(dest, b.shardMan); err != nil {
		return failed(rec, err)
	}
	rec.Verified = true
	rec.Note = lastLine(out.String())
	return []Record{rec}, nil
}

// summaryGets finds the GET counts in segfs restore's summary.
var summaryGets = regexp.MustCompile(`GETs (\d+) \((\d+) bytes\)`)

// lastLine is s's last non-empty line (a command's summary).
func lastLine(s string) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	return string(lines[len(lines)-1])
}

// localDiskWrite is the bound the local disk puts on a restore: the
// bytes a restore with the part cache writes, the shard's twice (its
// files and the cache's parts), in part-size O_DIRECT writes to two
// files, as the restore writes them, then fsynced.
func (b *bench) localDiskWrite(ctx context.Context) ([]Record, error) {
	n := b.shardMan.TotalSize()
	rec := Record{System: sysLocal, Case: caseCopy,
		What: fmt.Sprintf("write %d MB twice (%d MB) to two local files in the work directory, %s O_DIRECT writes, then fsync: what a restore with the part cache writes; MB/s counts the shard's bytes once", n/1e6, 2*n/1e6, partSizeFlag)}
	raw := make([]byte, partSize+4096)
	skip := (4096 - int(uintptr(unsafe.Pointer(&raw[0]))%4096)) % 4096
	buf := raw[skip : skip+partSize]
	for i := range buf {
		buf[i] = byte(i * 7) // not zeros: nothing may skip them
	}
	syscall.Sync() // as the restore cases: no other writeback beside it
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	for range 2 {
		name := filepath.Join(b.work, fmt.Sprintf("disk-write-%d", len(files)))
		f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_DIRECT, 0o644)
		if err != nil {
			return failed(rec, err)
		}
		files = append(files, f)
	}
	start := time.Now()
	for off := int64(0); off < n; off += partSize {
		if ctx.Err() != nil {
			return failed(rec, ctx.Err())
		}
		w := min(partSize, (n-off+4095)&^4095) // the last write rounded up to a block
		for _, f := range files {
			if _, err := f.WriteAt(buf[:w], off); err != nil {
				return failed(rec, err)
			}
		}
	}
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return failed(rec, err)
		}
	}
	d := time.Since(start)
	rec.Seconds, rec.Bytes, rec.MBps = d.Seconds(), n, MBps(n, d)
	return []Record{rec}, nil
}

// recoveryRestoreSnapshot is the restore of the same shard from a
// snapshot repository: --layout snapshot, the files as data blobs in the
// shard's directory (no chunk size, as a repository's default).
func (b *bench) recoveryRestoreSnapshot(ctx context.Context) ([]Record, error) {
	const what = "part cache on; --layout snapshot, a snapshot repository holding the shard"
	rec := Record{System: sysSegfsSnapshot, Case: caseCopy}
	files := map[string][]byte{}
	for _, o := range b.shardObjs {
		data, err := os.ReadFile(o.Local)
		if err != nil {
			return failed(rec, err)
		}
		files[path.Base(o.Key)] = data
	}
	start := time.Now()
	objs, err := b.putSnapshot(ctx, shardSnapBase, shardSnapIndex, files)
	if err != nil {
		return failed(rec, err)
	}
	clear(files)
	fmt.Printf("  snapshot uploaded the shard as a snapshot to s3://%s/%s in %v\n", bucket, shardSnapBase, time.Since(start).Round(time.Millisecond))
	recs, err := b.restoreWith(ctx, sysSegfsSnapshot, what, shardSnapBase, objs, "--layout", "snapshot", "--index", shardSnapIndex, "--shard", "0")
	for i := range recs {
		recs[i].System = sysSegfsSnapshot
	}
	return recs, err
}

// The snapshot repository case 2 restores from: the shard as shard 0 of
// index shardSnapIndex.
const (
	shardSnapBase  = "shard-snap"
	shardSnapIndex = "shard"
)

// putSnapshot writes files as shard 0 of index in a snapshot repository
// below base, and returns its data blobs.
func (b *bench) putSnapshot(ctx context.Context, base, index string, files map[string][]byte) ([]object, error) {
	var objs []object
	put := func(key string, data []byte) error {
		if strings.Contains(path.Base(key), "__") && !strings.HasPrefix(path.Base(key), "v__") {
			objs = append(objs, object{Key: key, Size: int64(len(data))})
		}
		_, err := b.srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	r := snaprepo.New(put, snaprepo.Options{Base: base, Seed: uint64(b.cfg.seed), Compress: true})
	if _, err := r.Snapshot("bench", snaprepo.Shard{Index: index, Files: files}); err != nil {
		return nil, fmt.Errorf("snapshot repository s3://%s/%s: %w", bucket, base, err)
	}
	return objs, nil
}
