package reliability

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/snapshot"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/hostile"
)

// Plan case 25, hostile snapshot metadata (issue 42): metadata small
// enough to read whose counts, trusted, cost hours of a core or
// gigabytes. Each command must end within a bounded time, CPU and
// memory, with an error naming the bound it hit.

// lineWith returns the first line of out holding s, or "".
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// storeArgs are the flags that reach e's server through its proxy.
func (e *env) storeArgs() []string {
	return []string{"--endpoint", e.proxy.URL(), "--path-style", "--region", harness.Region}
}

// requests returns the GETs and HEADs e's proxy has served.
func (e *env) requests() int64 {
	s := e.proxy.Stats()
	return s.Requests["get"] + s.Requests["head"]
}

// TestPlan25SnapshotManyParts serves a repository whose one shard
// snapshot, a snap-*.dat of about 500 KB, holds 100,000 files of 1 MiB
// in parts of one byte: 10^11 parts, none stored (a segfs of 9c4c843
// named each file's 2^20 parts before looking the first up, under the
// lock of the shard's directory in a repository mount: hours of a core,
// and callers in D state; issue 42). segfs snapshots, segfs
// verify of the shard and a lookup of its directory in a repository
// mount must each fail promptly, naming the bound on a shard's parts
// (snapshot.MaxShardParts), at the CPU cost of reading the metadata.
func TestPlan25SnapshotManyParts(t *testing.T) {
	t.Parallel()
	const (
		limit  = hangGuard // what a command may take; the old segfs took hours
		maxCPU = 20 * time.Second
		maxRSS = 256 << 20
		uuid   = "manyPartsSnapUUID00001"
	)
	gen := "gen0"
	objs := hostile.SnapshotRoot("repo", []snapshot.SnapshotInfo{{Name: "snap1", UUID: uuid, State: snapshot.StateSuccess, Version: "7.10.2"}},
		map[string]snapshot.IndexInfo{"logs": {ID: "logsIndexId", Snapshots: []string{uuid}, ShardGenerations: []*string{&gen}}})
	dat := hostile.ManyPartsShard("snap1", 100_000, 1<<20)
	objs[path.Join(layout.SnapshotShardPath(layout.Fixed, "repo", "logsIndexId", 0), "snap-"+uuid+".dat")] = dat
	t.Logf("snap-%s.dat: %d KB claiming 100,000 x 2^20 parts", uuid, len(dat)>>10)
	e := newEnv(t, nil, 2600, objs)
	source := "s3://" + e.bucket + "/repo"
	named := func(what, out string) {
		t.Helper()
		t.Logf("%s: %s", what, lineWith(out, "MaxShardParts"))
		if !strings.Contains(out, "MaxShardParts") || !strings.Contains(out, "1048576") {
			t.Errorf("%s does not name the bound on a shard's parts (MaxShardParts, 1048576):\n%s", what, tail(out, 2048))
		}
		if crashed(out) {
			t.Errorf("%s panicked:\n%s", what, tail(out, 4096))
		}
	}
	bounded := func(what string, r measured) {
		t.Helper()
		if r.killed != "" {
			t.Errorf("%s: killed, %s", what, r.killed)
		}
		if r.cpu > maxCPU {
			t.Errorf("%s: %v of CPU, more than %v", what, r.cpu, maxCPU)
		}
	}

	t.Run("snapshots", func(t *testing.T) {
		r := runMeasured(t, e, limit, maxRSS, slices.Concat([]string{"snapshots"}, e.storeArgs(), []string{source})...)
		bounded("segfs snapshots", r)
		if r.code != 1 {
			t.Errorf("segfs snapshots: exit %d, want 1 (the shard of a successful snapshot cannot be read)\n%s%s", r.code, tail(r.stdout, 2048), r.stderr)
		}
		named("segfs snapshots", r.stdout+r.stderr)
	})
	t.Run("verify", func(t *testing.T) {
		r := runMeasured(t, e, limit, maxRSS, slices.Concat([]string{"verify"}, e.storeArgs(),
			[]string{"--layout", "snapshot", "--index", "logs", "--shard", "0", "--cache-dir", cacheDir(t), source})...)
		bounded("segfs verify", r)
		if r.code != 2 {
			t.Errorf("segfs verify: exit %d, want 2 (the shard's metadata is refused)", r.code)
		}
		named("segfs verify", r.stdout+r.stderr)
	})
	t.Run("mount", func(t *testing.T) {
		opts := e.mountOptions(cacheDir(t), "--layout", "snapshot")
		opts.Source = source
		m := harness.StartMountT(t, opts)
		dir := filepath.Join(m.Dir, "snap1", "logs", "0")
		start := time.Now()
		listed := make(chan error, 1)
		go func() {
			_, err := os.ReadDir(dir)
			listed <- err
		}()
		select {
		case err := <-listed:
			t.Logf("ls %s: %v after %v", dir, err, time.Since(start).Round(time.Millisecond))
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("ls of the shard's directory: %v, want EIO", err)
			}
		case <-time.After(limit):
			// The caller cannot be interrupted: only the daemon's
			// death frees it.
			t.Errorf("ls of the shard's directory still waits after %v; killing segfs", limit)
			if err := m.Kill(); err != nil {
				t.Log(err)
			}
			<-listed
			return
		}
		// The directory answers again at once, from its failure.
		if _, err := os.ReadDir(dir); !errors.Is(err, syscall.EIO) {
			t.Errorf("ls again: %v, want EIO", err)
		}
		harness.MustStats(t, m) // the daemon still answers
		named("the daemon's log", m.Log())
	})
}

// TestPlan25SnapshotCatalogBound serves repositories whose index-1
// claims one index of 65,536 shards (null shard generations, 5 bytes
// each) in every one of many snapshots. segfs snapshots must refuse the
// listing before reading a shard's metadata, naming --max-shards and
// how to narrow the listing, with a peak RSS of a small command and the
// root's requests alone (a segfs of 9c4c843 sized every shard's row up
// front, then made a HEAD for each: issue 42); and a listing the
// filters narrow below the bound still reads.
func TestPlan25SnapshotCatalogBound(t *testing.T) {
	t.Parallel()
	const (
		limit       = hangGuard
		maxRSS      = 256 << 20
		maxRequests = 8 // index.latest and index-1, a HEAD and a GET each, with room
	)
	refused := func(t *testing.T, e *env, r measured, before int64) {
		t.Helper()
		t.Logf("segfs snapshots: %s", strings.TrimSpace(r.stderr))
		if r.killed != "" {
			t.Errorf("segfs snapshots: killed, %s", r.killed)
		}
		if r.peak > maxRSS {
			t.Errorf("segfs snapshots: peak RSS %d MiB, more than %d", r.peak>>20, maxRSS>>20)
		}
		if r.code != 2 {
			t.Errorf("segfs snapshots: exit %d, want 2 (more shard snapshots than --max-shards)", r.code)
		}
		if !strings.Contains(r.stderr, "more shard snapshots than the catalog may read") || !strings.Contains(r.stderr, "--max-shards") || !strings.Contains(r.stderr, "--index") {
			t.Errorf("segfs snapshots does not say which bound it hit and how to narrow the listing:\n%s", tail(r.stderr, 2048))
		}
		if n := e.requests() - before; n > maxRequests {
			t.Errorf("%d GETs and HEADs at the server, want at most %d (the root's)", n, maxRequests)
		}
	}

	t.Run("2000 snapshots", func(t *testing.T) {
		t.Parallel()
		objs := hostile.ManyShardsRoot("repo", 2000, snapshot.MaxIndexShards)
		t.Logf("index-1: %d KB", len(objs["repo/index-1"])>>10)
		e := newEnv(t, nil, 2610, objs)
		before := e.requests()
		r := runMeasured(t, e, limit, maxRSS, slices.Concat([]string{"snapshots"}, e.storeArgs(), []string{"s3://" + e.bucket + "/repo"})...)
		t.Logf("%d GETs and HEADs at the server", e.requests()-before)
		refused(t, e, r, before)
	})

	t.Run("20 snapshots", func(t *testing.T) {
		t.Parallel()
		objs, small := bigAndSmall(20)
		e := newEnv(t, nil, 2620, objs)
		before := e.requests()
		source := "s3://" + e.bucket + "/repo"
		r := runMeasured(t, e, limit, maxRSS, slices.Concat([]string{"snapshots"}, e.storeArgs(), []string{source})...)
		t.Logf("%d GETs and HEADs at the server", e.requests()-before)
		refused(t, e, r, before)

		before = e.requests()
		r = runMeasured(t, e, limit, maxRSS, slices.Concat([]string{"snapshots"}, e.storeArgs(), []string{"--index", "small", source})...)
		if r.code != 0 || r.killed != "" {
			t.Errorf("segfs snapshots --index small: exit %d (%s), want 0:\n%s%s", r.code, r.killed, tail(r.stdout, 2048), r.stderr)
		}
		if want := fmt.Sprintf("20 snapshots, %d shard snapshots, 0 of successful snapshots unreadable", small); !strings.Contains(r.stdout, want) {
			t.Errorf("segfs snapshots --index small does not say %q:\n%s", want, tail(r.stdout, 2048))
		}
		if n, most := e.requests()-before, int64(maxRequests+2*small); n > most {
			t.Errorf("segfs snapshots --index small: %d GETs and HEADs, want at most %d", n, most)
		}
	})
}

// bigAndSmall is ManyShardsRoot's root of snaps snapshots holding
// index "big" of 65,536 shards, each snapshot holding beside it index
// "small" of two shards whose metadata is stored (one virtual file
// each). It returns the objects and how many shard snapshots "small"
// has.
func bigAndSmall(snaps int) (map[string][]byte, int) {
	var infos []snapshot.SnapshotInfo
	var uuids []string
	for i := range snaps {
		u := fmt.Sprintf("uuid-%017d", i)
		infos = append(infos, snapshot.SnapshotInfo{Name: fmt.Sprintf("s%04d", i), UUID: u, State: snapshot.StateSuccess, Version: "7.10.2"})
		uuids = append(uuids, u)
	}
	g0, g1 := "g0", "g1"
	objs := hostile.SnapshotRoot("repo", infos, map[string]snapshot.IndexInfo{
		"big":   {ID: "bigIndexId", Snapshots: uuids, ShardGenerations: make([]*string, snapshot.MaxIndexShards)},
		"small": {ID: "smallIndexId", Snapshots: uuids, ShardGenerations: []*string{&g0, &g1}},
	})
	ss := &snapshot.ShardSnapshot{Name: "s", IndexVersion: 1, Files: []snapshot.FileInfo{
		{Blob: "v__seg", Name: "segments_1", Length: 3, Checksum: "1", PartSize: 1 << 40, WrittenBy: "8.7.0", MetaHash: []byte("abc")},
	}}
	raw := snapshot.EncodeShardSnapshot(ss, true)
	for _, u := range uuids {
		for sh := range 2 {
			objs[path.Join(layout.SnapshotShardPath(layout.Fixed, "repo", "smallIndexId", sh), "snap-"+u+".dat")] = raw
		}
	}
	return objs, 2 * snaps
}
