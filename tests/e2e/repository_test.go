package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/harness"
	"github.com/segfs/segfs/tests/localstore"
	"github.com/segfs/segfs/tests/osremote"
)

// repoShard is one shard written into a repository, and what a mount of
// it must show.
type repoShard struct {
	uuid  string
	shard int
	want  map[string][]byte
}

// putRepoShard uploads one refresh of a small shard in o's layout and
// returns what its directory must show.
func putRepoShard(t *testing.T, put osremote.Put, o osremote.Options) repoShard {
	t.Helper()
	files, err := osremote.ShardFiles([]string{"_0", "_1"}, 5, 64<<10, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := osremote.New(put, o).Upload(files, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	return repoShard{uuid: o.IndexUUID, shard: o.Shard, want: want(files, ref)}
}

// dirNames returns the names dir lists, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// One mount of a whole OpenSearch repository (issue 37): indices of the
// fixed and the hashed path types, several shards each, under
// MOUNTPOINT/<index-uuid>/<shard>/, every healthy shard byte-exact; a
// shard whose metadata is corrupt fails alone (EIO on its directory, the
// others read on); an index uploaded after the mount is opened by name;
// --index-uuid alone mounts one index's shards.
func TestRepositoryMount(t *testing.T) {
	srv := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bucket := newBucket(t, srv)
	var metadataKeys []string
	put := func(key string, data []byte) error {
		if strings.Contains(key, "/segments/metadata/") && strings.HasPrefix(filepath.Base(key), "metadata__") {
			metadataKeys = append(metadataKeys, key)
		}
		_, err := srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	const fixed, hashed, late = "fixedIndexUUIDaaaaaaaa", "hashedIndexUUIDbbbbbbb", "lateIndexUUIDcccccccccc"
	var shards []repoShard
	for sh := range 2 {
		shards = append(shards, putRepoShard(t, put, osremote.Options{Base: "repo", IndexUUID: fixed, Shard: sh,
			PathType: layout.Fixed, Version: 2, Seed: uint64(10 + sh)}))
	}
	for sh := range 3 {
		shards = append(shards, putRepoShard(t, put, osremote.Options{Base: "repo", IndexUUID: hashed, Shard: sh,
			PathType: layout.HashedPrefix, HashAlgorithm: layout.FNV1aComposite1, Version: 2, Seed: uint64(20 + sh),
			IndexPathFile: sh == 2}))
	}
	// The hashed index's shard 2: its metadata file corrupt.
	bad := shards[len(shards)-1]
	shards = shards[:len(shards)-1]
	badKey := metadataKeys[len(metadataKeys)-1]
	raw, err := srv.GetBytes(ctx, bucket, badKey)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x20
	if _, err := srv.PutBytes(ctx, bucket, badKey, raw); err != nil {
		t.Fatal(err)
	}

	m := mountS3(t, srv, "s3://"+bucket+"/repo", "--layout", "opensearch")
	if got := dirNames(t, m.Dir); !slices.Equal(got, []string{fixed, hashed}) {
		t.Errorf("the root lists %q, want the two indices", got)
	}
	if got := dirNames(t, filepath.Join(m.Dir, fixed)); !slices.Equal(got, []string{"0", "1"}) {
		t.Errorf("the fixed index lists %q, want shards 0 and 1", got)
	}
	if got := dirNames(t, filepath.Join(m.Dir, hashed)); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("the hashed index lists %q, want shards 0 to 2 (its index path file's count)", got)
	}
	for _, s := range shards {
		checkShardDir(t, filepath.Join(m.Dir, s.uuid, fmt.Sprint(s.shard)), s.want)
	}
	badDir := filepath.Join(m.Dir, bad.uuid, fmt.Sprint(bad.shard))
	if _, err := os.ReadDir(badDir); !errors.Is(err, syscall.EIO) {
		t.Errorf("list of the shard with a corrupt metadata file: %v, want EIO", err)
	}
	for n := range bad.want {
		if _, err := os.ReadFile(filepath.Join(badDir, n)); !errors.Is(err, syscall.EIO) {
			t.Errorf("read of %s in the corrupt shard: %v, want EIO", n, err)
		}
		break
	}
	// The others read on after the failure.
	checkShardDir(t, filepath.Join(m.Dir, shards[0].uuid, "0"), shards[0].want)
	var line string
	for _, l := range strings.Split(m.Log(), "\n") {
		if strings.Contains(l, "directory not shown") && strings.Contains(l, bad.uuid+"/2/") {
			line = l
		}
	}
	if line == "" {
		t.Errorf("no log line names the corrupt shard:\n%s", m.Log())
	}
	t.Logf("segfs said: %s", line)

	// segfs status sums the files by shard.
	text, errs, code := segfsCmd(t, "status", m.Dir)
	if code != 0 {
		t.Fatalf("segfs status: exit %d: %s", code, errs)
	}
	_, dirs, _ := strings.Cut(text, "\ndirectories")
	dirs, _, _ = strings.Cut(dirs, "\n\n")
	for _, s := range shards {
		if dir := fmt.Sprintf("%s/%d/", s.uuid, s.shard); !strings.Contains(dirs, dir) {
			t.Errorf("segfs status's directories do not list the shard %s:\n%s", dir, text)
		}
	}

	// /metrics counts the reads of each shard shown, under its label.
	body := metricsText(t, m)
	for _, s := range shards {
		label := fmt.Sprintf(`segfs_shard_read_bytes_total{shard="%s/%d"}`, s.uuid, s.shard)
		var total int64
		for _, b := range s.want {
			total += int64(len(b))
		}
		var got float64
		for _, l := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(l, label+" "); ok {
				fmt.Sscan(v, &got)
			}
		}
		if int64(got) < total {
			t.Errorf("%s = %v, want at least the %d bytes read", label, got, total)
		}
	}

	// An index uploaded after the mount: opened by its name, once the
	// root is listed again (a lookup of a name the listing lacks lists
	// it at most once every few seconds).
	s := putRepoShard(t, put, osremote.Options{Base: "repo", IndexUUID: late, Shard: 0, PathType: layout.Fixed, Version: 2, Seed: 30})
	waitExists(t, filepath.Join(m.Dir, late))
	checkShardDir(t, filepath.Join(m.Dir, late, "0"), s.want)
	if _, err := os.Stat(filepath.Join(m.Dir, "noSuchIndexUUIDddddddd")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of an index that is not there: %v, want ENOENT", err)
	}

	// --index-uuid alone: the index's shards at the root.
	one := mountS3(t, srv, "s3://"+bucket+"/repo", "--layout", "opensearch", "--index-uuid", fixed)
	if got := dirNames(t, one.Dir); !slices.Equal(got, []string{"0", "1"}) {
		t.Errorf("a mount of one index lists %q, want its shards", got)
	}
	checkShardDir(t, filepath.Join(one.Dir, "1"), shards[1].want)

	// Goroutines and threads do not grow with the shards looked up: every
	// shard's stores share the repository's client, and a resolved shard
	// holds no goroutine.
	const many = "manyShardsIndexUUIDeeee"
	var more []repoShard
	for sh := range 12 {
		more = append(more, putRepoShard(t, put, osremote.Options{Base: "repo", IndexUUID: many, Shard: sh, PathType: layout.Fixed, Version: 2, Seed: uint64(40 + sh)}))
	}
	counts := func() (int64, int64) {
		t.Helper()
		idle := func() map[string]int64 {
			for range 500 {
				st, err := m.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if harness.Idle(st) {
					return st
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Fatal("the mount did not go idle in 5 s")
			return nil
		}
		st := idle()
		ps, err := harness.ReadProcStatus(m.Pid())
		if err != nil {
			t.Fatal(err)
		}
		return st["goroutines"], ps.Threads
	}
	waitExists(t, filepath.Join(m.Dir, many))
	checkShardDir(t, filepath.Join(m.Dir, many, "0"), more[0].want)
	g1, th1 := counts()
	for _, s := range more[1:] {
		checkShardDir(t, filepath.Join(m.Dir, many, fmt.Sprint(s.shard)), s.want)
	}
	g12, th12 := counts()
	t.Logf("one shard of the index read: %d goroutines, %d threads; all 12: %d goroutines, %d threads", g1, th1, g12, th12)
	if g12 > g1+8 {
		t.Errorf("%d goroutines after 12 shards against %d after one: they grow with the shards", g12, g1)
	}
	if th12 > th1+8 {
		t.Errorf("%d threads after 12 shards against %d after one: they grow with the shards", th12, th1)
	}

	// restore and verify take the same forms: one index whole, each
	// shard below its number; a whole repository, whose corrupt shard
	// verify reports and restore refuses before it writes anything.
	dest := t.TempDir()
	mustRestore(t, srv, "s3://"+bucket+"/repo", dest, "--layout", "opensearch", "--index-uuid", fixed)
	wantTree := map[string][]byte{}
	for _, s := range shards[:2] {
		for n, b := range s.want {
			wantTree[fmt.Sprintf("%d/%s", s.shard, n)] = b
		}
	}
	sameFiles(t, localstore.ReadTree(t, dest), wantTree)
	vargs := []string{"--layout", "opensearch", "--endpoint", srv.Endpoint(), "--path-style", "--region", harness.Region,
		"--cache-dir", filepath.Join(t.TempDir(), "cache")}
	if code, out := runVerify(t, srv.Env(), "s3://"+bucket+"/repo", append(vargs, "--index-uuid", fixed, "--deep")...); code != 0 {
		t.Errorf("verify --deep of the fixed index: exit %d:\n%s", code, out)
	}
	if code, out := runVerify(t, srv.Env(), "s3://"+bucket+"/repo", vargs...); code != 1 || !strings.Contains(out, bad.uuid+"/2") {
		t.Errorf("verify of the repository: exit %d, want 1 naming %s/2:\n%s", code, bad.uuid, out)
	}
	empty := t.TempDir()
	if r := runRestoreCmd(t, srv, "", "s3://"+bucket+"/repo", empty, "--layout", "opensearch"); r.code == 0 || !strings.Contains(r.out, bad.uuid+"/2") {
		t.Errorf("restore of the repository with a corrupt shard: exit %d, want a failure naming it:\n%s", r.code, r.out)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("the refused restore wrote %d entries", len(ents))
	}

	// --max-shards bounds the shards shown: the second fails. A listing
	// of the index resolves none of them (go-fuse looks up each entry of
	// a READDIRPLUS), so the one read first is the one shown.
	capped := mountS3(t, srv, "s3://"+bucket+"/repo", "--layout", "opensearch", "--max-shards", "1")
	if got := dirNames(t, filepath.Join(capped.Dir, fixed)); !slices.Equal(got, []string{"0", "1"}) {
		t.Fatalf("the index lists %q", got)
	}
	checkShardDir(t, filepath.Join(capped.Dir, fixed, "1"), shards[1].want)
	if _, err := os.ReadDir(filepath.Join(capped.Dir, fixed, "0")); !errors.Is(err, syscall.EIO) {
		t.Errorf("a second shard beyond --max-shards 1: %v, want EIO", err)
	}
}

// A repository mount with --refresh follows each shard it shows: a new
// commit of a shard shows (its files, then its segments_N) while the
// others stay as they are, and a shard and an index made after the
// mount show in their directories' listings after a refresh.
func TestRepositoryRefresh(t *testing.T) {
	srv := needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bucket := newBucket(t, srv)
	put := func(key string, data []byte) error {
		_, err := srv.PutBytes(ctx, bucket, key, data)
		return err
	}
	const uuid = "refreshIndexUUIDaaaaaaa"
	o := osremote.Options{Base: "repo", IndexUUID: uuid, PathType: layout.Fixed, Version: 2, Seed: 50}
	r0 := osremote.New(put, o)
	files3, err := osremote.ShardFiles([]string{"_0"}, 3, 32<<10, 50)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r0.Upload(files3, 1, 3); err != nil {
		t.Fatal(err)
	}
	o1 := o
	o1.Shard, o1.Seed = 1, 51
	other := putRepoShard(t, put, o1)

	m := mountS3(t, srv, "s3://"+bucket+"/repo", "--layout", "opensearch", "--refresh", "200ms", "--keep-removed", "1s")
	dir0 := filepath.Join(m.Dir, uuid, "0")
	if _, err := os.Stat(filepath.Join(dir0, "segments_3")); err != nil {
		t.Fatal(err)
	}

	// A new commit of shard 0: one more segment.
	files4, err := osremote.ShardFiles([]string{"_0", "_1"}, 4, 32<<10, 50)
	if err != nil {
		t.Fatal(err)
	}
	ref4, err := r0.Upload(files4, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir0, "segments_4")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("segments_4 not shown 30 s after its upload:\n%s", m.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Shard 1 resolves while shard 0's old commit is kept: the kept files
	// still go when their second is up.
	checkShardDir(t, filepath.Join(m.Dir, uuid, "1"), other.want)
	deadline = time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir0, "segments_3")); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("segments_3 of the old commit is still shown 30 s after --keep-removed 1s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkShardDir(t, dir0, want(files4, ref4))
	// The new commit's files count in the shard's read counters.
	var read float64
	for _, l := range strings.Split(metricsText(t, m), "\n") {
		if v, ok := strings.CutPrefix(l, fmt.Sprintf(`segfs_shard_read_bytes_total{shard="%s/0"} `, uuid)); ok {
			fmt.Sscan(v, &read)
		}
	}
	var total int64
	for _, b := range want(files4, ref4) {
		total += int64(len(b))
	}
	if int64(read) < total {
		t.Errorf("shard 0 counted %v bytes read, want at least the new commit's %d", read, total)
	}

	// A shard and an index made after the mount show in the listings.
	o2 := o
	o2.Shard, o2.Seed = 2, 52
	putRepoShard(t, put, o2)
	late := putRepoShard(t, put, osremote.Options{Base: "repo", IndexUUID: "laterIndexUUIDbbbbbbbbb", PathType: layout.Fixed, Version: 2, Seed: 53})
	deadline = time.Now().Add(30 * time.Second)
	for !slices.Equal(dirNames(t, filepath.Join(m.Dir, uuid)), []string{"0", "1", "2"}) ||
		!slices.Contains(dirNames(t, m.Dir), late.uuid) {
		if time.Now().After(deadline) {
			t.Fatalf("the new shard and index are not listed 30 s after their upload: %q, %q", dirNames(t, filepath.Join(m.Dir, uuid)), dirNames(t, m.Dir))
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := m.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st["refreshes"] == 0 || st["refresh_failures"] != 0 {
		t.Errorf("refreshes %d, failures %d", st["refreshes"], st["refresh_failures"])
	}
}

// waitExists waits until path exists in a repository mount: a name made
// after its directory was listed is found by a later listing, which a
// lookup of it asks for at most once every few seconds.
func waitExists(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := os.Stat(path)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v 20 s after it was made", path, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
