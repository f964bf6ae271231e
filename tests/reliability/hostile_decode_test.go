package reliability

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/snapshot"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/hostile"
	"github.com/segfs/segfs/tests/osremote"
	"github.com/segfs/segfs/tests/snaprepo"
)

// Plan case 25, hostile input, issue 42: metadata no larger than segfs
// reads (a snap-*.dat of 60 KB that inflates to 60 MB, an index-N or a
// remote-store metadata file of 60 MB) whose decode would take gigabytes
// if only the bytes read were bounded. Each must be refused, naming the
// bound, by a process whose peak resident set stays bounded.
//
// The tests run one at a time: a segfs that decodes such a file takes
// gigabytes (and is killed at killRSS, to spare the machine).

const (
	// cliRSS bounds the peak resident set of a segfs command refusing
	// one hostile file: the file as read and inflated, what decoding
	// may build (snapshot.MaxDecoded), the runtime.
	cliRSS = 512 << 20
	// killRSS is where a segfs that does not bound its decode is killed.
	killRSS = 2 << 30
)

// checkRefused fails the test unless m ended by itself with exit code
// want, its output saying every one of says, within cliRSS.
func checkRefused(t *testing.T, m measured, want int, says ...string) {
	t.Helper()
	if m.killed != "" {
		t.Errorf("killed, %s: it does not bound what it decodes", m.killed)
		return
	}
	if m.code != want {
		t.Errorf("exit %d, want %d:\n%s%s", m.code, want, tail(m.stdout, 2048), tail(m.stderr, 2048))
	}
	for _, s := range says {
		if !strings.Contains(m.stdout+m.stderr, s) {
			t.Errorf("the output does not say %q:\n%s%s", s, tail(m.stdout, 2048), tail(m.stderr, 2048))
		}
	}
	if m.peak > cliRSS {
		t.Errorf("peak resident set %d MiB, more than %d MiB", m.peak>>20, cliRSS>>20)
	}
	if crashed(m.stdout + m.stderr) {
		t.Errorf("segfs panicked:\n%s", tail(m.stderr, 4096))
	}
}

// hostileRepository returns a snapshot repository below "repo" holding
// one snapshot, daily-1, of index logs: shard 0 as a cluster writes it,
// shard 1 a snap-*.dat of 60 KB whose body inflates to 60 MB of one-byte
// shared value references. It returns the objects and shard 0's files.
func hostileRepository(t *testing.T) (map[string][]byte, map[string][]byte) {
	t.Helper()
	objs := map[string][]byte{}
	put := func(key string, data []byte) error {
		objs[key] = data
		return nil
	}
	good := map[string][]byte{"_0.cfs": randomBytes(4201, 20_000), "_0.si": randomBytes(4202, 40), "segments_1": randomBytes(4203, 50)}
	r := snaprepo.New(put, snaprepo.Options{Base: "repo", Seed: 42, Compress: true})
	if _, err := r.Snapshot("daily-1", snaprepo.Shard{Index: "logs", Shard: 0, Files: good},
		snaprepo.Shard{Index: "logs", Shard: 1, Files: map[string][]byte{"_1.si": randomBytes(4204, 40)}}); err != nil {
		t.Fatal(err)
	}
	var victim string
	for k := range objs {
		if strings.HasPrefix(path.Base(k), "snap-") && path.Base(path.Dir(k)) == "1" {
			victim = k
		}
	}
	if victim == "" {
		t.Fatalf("no snap-*.dat of shard 1 among %q", slices.Sorted(maps.Keys(objs)))
	}
	objs[victim] = hostile.SharedReferenceShardSnapshot(60 << 20)
	t.Logf("%s: %d bytes, inflating to 60 MiB of one-byte shared value references", victim, len(objs[victim]))
	return objs, good
}

// overBudget is what segfs says of a Smile body that would build more
// than snapshot.MaxBuilt (smile's message).
var overBudget = fmt.Sprintf("more than %d bytes, the most a decode may build", snapshot.MaxBuilt)

// TestPlan25DecodeSnapshots runs segfs snapshots on a repository whose
// shard 1 has a snap-*.dat of 60 KB that inflates to 60 MB of one-byte
// shared value references (a segfs of 9c4c843 peaked at 4.5 GB on it):
// the shard is reported unreadable, naming the bound, shard 0 beside it
// is listed, and segfs exits 1 within cliRSS.
func TestPlan25DecodeSnapshots(t *testing.T) {
	objs, good := hostileRepository(t)
	e := newEnv(t, nil, 4200, objs)
	m := runMeasured(t, e, hangGuard, killRSS, "snapshots", "--endpoint", e.proxy.URL(), "--path-style", "--region", harness.Region, "s3://"+e.bucket+"/repo")
	checkRefused(t, m, 1, overBudget)
	var row0 bool
	for _, l := range strings.Split(m.stdout, "\n") {
		f := strings.Fields(l)
		if len(f) >= 8 && f[4] == "logs" && f[5] == "0" && f[6] == fmt.Sprint(len(good)) {
			row0 = true
		}
	}
	if m.killed == "" && !row0 {
		t.Errorf("shard 0 is not listed with its %d files beside the hostile shard:\n%s", len(good), m.stdout)
	}
}

// TestPlan25DecodeSnapshotMount mounts the same repository whole
// (--layout snapshot): a listing of shard 1 gives EIO (a segfs of
// 9c4c843 took 20 s and 2.2 GB for it), shard 0 reads byte-exact, and
// the daemon's peak resident set stays within the memory bound it logs.
func TestPlan25DecodeSnapshotMount(t *testing.T) {
	objs, good := hostileRepository(t)
	e := newEnv(t, nil, 4210, objs)
	opts := e.mountOptions(cacheDir(t), "--layout", "snapshot")
	opts.Source += "/repo"
	mnt := harness.StartMountT(t, opts)
	bound := memoryBound(t, mnt.Log())

	// Stop the daemon before it takes the machine: watch it meanwhile.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var killed bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if st, err := harness.ReadProcStatus(mnt.Pid()); err == nil && st.VmHWM > killRSS {
				killed = true
				mnt.Kill()
				return
			}
		}
	}()
	start := time.Now()
	_, err := os.ReadDir(filepath.Join(mnt.Dir, "daily-1", "logs", "1"))
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if killed {
		t.Fatalf("the daemon's resident set passed %d MiB listing the hostile shard (after %v): it does not bound what it decodes", killRSS>>20, took)
	}
	t.Logf("listing shard 1: %v after %v", err, took.Round(time.Millisecond))
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("listing the hostile shard: %v, want EIO", err)
	}
	for n, want := range good {
		if b, err := os.ReadFile(filepath.Join(mnt.Dir, "daily-1", "logs", "0", n)); err != nil || !bytes.Equal(b, want) {
			t.Errorf("shard 0's %s beside it: %v (bytes equal: %v)", n, err, bytes.Equal(b, want))
		}
	}
	st, err := harness.ReadProcStatus(mnt.Pid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("daemon: peak RSS %d MiB, RSS %d MiB, memory bound %d MiB", st.VmHWM>>20, st.VmRSS>>20, bound>>20)
	if st.VmHWM > bound {
		t.Errorf("the daemon's peak resident set %d MiB is above the memory bound it logged, %d MiB", st.VmHWM>>20, bound>>20)
	}
	if !strings.Contains(mnt.Log(), overBudget) {
		t.Errorf("the daemon's log does not say why the shard failed (%q):\n%s", overBudget, tail(mnt.Log(), 4096))
	}
	harness.MustStats(t, mnt)
}

// TestPlan25DecodeIndexN runs segfs snapshots on a repository whose
// index-N is 60 MB of empty snapshots, {"snapshots":[{},{},...]} (a
// segfs of 9c4c843 took 4 GB to decode it): segfs refuses the root,
// naming the bound, and exits 2 within cliRSS.
func TestPlan25DecodeIndexN(t *testing.T) {
	objs := map[string][]byte{
		"repo/index.latest": {0, 0, 0, 0, 0, 0, 0, 1},
		"repo/index-1":      hostile.EmptySnapshotsIndexN(60 << 20),
	}
	e := newEnv(t, nil, 4220, objs)
	m := runMeasured(t, e, hangGuard, killRSS, "snapshots", "--endpoint", e.proxy.URL(), "--path-style", "--region", harness.Region, "s3://"+e.bucket+"/repo")
	checkRefused(t, m, 2, "index-1", "MaxIndexNBuilt")
}

// TestPlan25DecodeRemoteMetadata runs segfs verify --layout opensearch
// on a remote-store shard whose metadata file is 62 MB of tiny entries,
// 4.8 million files (a segfs of 9c4c843 took 1.8 GB to parse it): segfs
// refuses the shard, naming the bound, and exits 2 within cliRSS.
func TestPlan25DecodeRemoteMetadata(t *testing.T) {
	const uuid = "hostileDecodeUUIDaBcD"
	objs := map[string][]byte{}
	put := func(key string, data []byte) error {
		objs[key] = data
		return nil
	}
	o := osremote.Options{IndexUUID: uuid, Shard: 0, PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1, Version: 2,
		IndexPathFile: true, Seed: 4230}
	files, err := osremote.ShardFiles([]string{"_0"}, 3, 20<<10, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	r := osremote.New(put, o)
	ref, err := r.Upload(files, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	md := *ref.Metadata
	md.Files = nil
	key := path.Join(r.Path("metadata"), ref.MetadataName)
	if objs[key], err = hostile.TinyEntriesMetadata(&md, 62<<20/13); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes", key, len(objs[key]))
	e := newEnv(t, nil, 4230, objs)
	m := runMeasured(t, e, hangGuard, killRSS, "verify", "--endpoint", e.proxy.URL(), "--path-style", "--region", harness.Region,
		"--layout", "opensearch", "--index-uuid", uuid, "--shard", "0", "--cache-dir", cacheDir(t), "s3://"+e.bucket)
	checkRefused(t, m, 2, ref.MetadataName, "MaxMetadataFiles")
}
