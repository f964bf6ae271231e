package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/osremote"
	"github.com/segfs/segfs/tests/snaprepo"
)

// absentNames returns n names of an index UUID's form that no
// repository holds.
func absentNames(seed uint64, n int) []string {
	rng := rand.New(rand.NewPCG(seed, 42))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 22)
		for j := range b {
			b[j] = letters[rng.IntN(len(letters))]
		}
		out[i] = string(b)
	}
	return out
}

// statAbsent stats each name below dir and fails the test unless every
// one is absent.
func statAbsent(t *testing.T, dir string, names []string) {
	t.Helper()
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stat of absent %s: %v, want ENOENT", n, err)
		}
	}
}

// Lookups of names an OpenSearch repository mount's root does not hold
// (any local user of an --allow-other mount can make them) are answered
// from the root's listing: 20 of them cost at most one more listing of
// the base path and remote-index-path/, not one each. A segfs of 9c4c843
// listed all of remote-index-path/ (3 pages of 2,500 files) and the
// directory for every name.
func TestPlan25AbsentNamesOpenSearchRoot(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{}
	put := func(key string, data []byte) error { objs[key] = data; return nil }
	const uuid = "absentNamesIndexUUIDaa"
	o := osremote.Options{IndexUUID: uuid, Shard: 0, PathType: layout.Fixed, Version: 2, Seed: 2591}
	files, err := osremote.ShardFiles([]string{"_0"}, 3, 16<<10, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := osremote.New(put, o).Upload(files, 1, 3); err != nil {
		t.Fatal(err)
	}
	for i := range 2500 { // not index path files: listed, then left out
		objs[fmt.Sprintf("%s/other-%04d", layout.IndexPathDir, i)] = []byte("x")
	}
	e := newEnv(t, nil, 2591, objs)
	m := e.mount(t, cacheDir(t), "--layout", "opensearch")
	if ents, err := os.ReadDir(m.Dir); err != nil || len(ents) != 1 || ents[0].Name() != uuid {
		t.Fatalf("the root lists %v, %v; want %s", ents, err, uuid)
	}
	before := e.proxy.Stats().Requests
	statAbsent(t, m.Dir, absentNames(1, 20))
	after := e.proxy.Stats().Requests
	// One listing of the root is 3 pages of remote-index-path/ and one of
	// the base path.
	if lists := after["list"] - before["list"]; lists > 4 {
		t.Errorf("20 absent names cost %d LISTs, want at most one listing's 4", lists)
	}
	if n := after["head"] + after["get"] - before["head"] - before["get"]; n > 0 {
		t.Errorf("20 absent names cost %d HEADs and GETs, want none", n)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, uuid, "0", "_0.si")); err != nil {
		t.Errorf("a listed shard's file: %v", err)
	}
}

// Lookups of names a snapshot repository mount's root does not hold
// cost one GET of index.latest an interval, and the root index-N not at
// all while its generation stays. A segfs of 9c4c843 downloaded the
// whole index-N for every name.
func TestPlan25AbsentNamesSnapshotRoot(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{}
	put := func(key string, data []byte) error { objs[key] = data; return nil }
	// Without shard generations (a repository of Elasticsearch before
	// 7.6), an index's shards are found by probing.
	r := snaprepo.New(put, snaprepo.Options{Seed: 2592, NoShardGenerations: true})
	_, err := r.Snapshot("daily-1", snaprepo.Shard{Index: "logs", Shard: 0, Files: map[string][]byte{"_0.si": []byte("si"), "segments_1": []byte("seg")}})
	if err != nil {
		t.Fatal(err)
	}
	// The root index-N grows to about 2 MB with failed snapshots, which
	// no directory shows.
	var indexN string
	for k := range objs {
		if strings.HasPrefix(k, "index-") {
			indexN = k
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(objs[indexN], &doc); err != nil {
		t.Fatal(err)
	}
	snaps := doc["snapshots"].([]any)
	for i := range 20000 {
		snaps = append(snaps, map[string]any{"name": fmt.Sprintf("failed-%05d", i), "uuid": fmt.Sprintf("failedSnapshotUUID%05d", i), "state": 2, "version": "8.0.0"})
	}
	doc["snapshots"] = snaps
	if objs[indexN], err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil, 2592, objs)
	m := e.mount(t, cacheDir(t), "--layout", "snapshot")
	if ents, err := os.ReadDir(m.Dir); err != nil || len(ents) != 1 || ents[0].Name() != "daily-1" {
		t.Fatalf("the root lists %v, %v; want daily-1", ents, err)
	}
	before := e.proxy.Stats().GetsByKey
	statAbsent(t, m.Dir, absentNames(2, 20))
	after := e.proxy.Stats().GetsByKey
	if n := after[indexN] - before[indexN]; n > 0 {
		t.Errorf("20 absent names downloaded the %d-byte %s %d times, want none", len(objs[indexN]), indexN, n)
	}
	if n := after["index.latest"] - before["index.latest"]; n > 1 {
		t.Errorf("20 absent names read index.latest %d times, want at most once", n)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "daily-1", "logs", "0", "_0.si")); err != nil {
		t.Errorf("a listed shard's file: %v", err)
	}
	// Absent shard numbers are answered from the index's listing: no
	// probe each (a segfs of 9c4c843 sent 16 HEADs a number).
	heads := e.proxy.Stats().Requests["head"]
	for n := range 20 {
		if _, err := os.Stat(filepath.Join(m.Dir, "daily-1", "logs", fmt.Sprint(n+1))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stat of absent shard %d: %v, want ENOENT", n+1, err)
		}
	}
	if n := e.proxy.Stats().Requests["head"] - heads; n > 16 {
		t.Errorf("20 absent shard numbers cost %d HEADs, want at most one probe's 16", n)
	}

	// A newer index-N that cannot be parsed is fetched once, not at
	// every relisting, and the root read before stays shown.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.srv.PutBytes(ctx, e.bucket, "index-2", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.PutBytes(ctx, e.bucket, "index.latest", []byte{0, 0, 0, 0, 0, 0, 0, 2}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		time.Sleep(5500 * time.Millisecond) // a relisting is due
		statAbsent(t, m.Dir, absentNames(3, 1))
	}
	if n := e.proxy.Stats().GetsByKey["index-2"]; n != 1 {
		t.Errorf("the unparsable index-2 was fetched %d times over two relistings, want once", n)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "daily-1")); err != nil {
		t.Errorf("the snapshot of the root read before: %v", err)
	}
}

// Lookups of absent names hold the view only while they read the tree,
// never across a remote call: loops of stat of random names, each
// answered by a slow store (every LIST stalls 1.5 s), do not keep a
// newer commit from showing. A segfs of 9c4c843 held the view for
// reading across each name's listings while a refresh tries the write
// lock for 1 s, and deferred the refresh for as long as the loops ran.
func TestPlan25AbsentNamesDoNotFreezeTheView(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{}
	var putMu sync.Mutex
	var live func(key string, data []byte) error
	put := func(key string, data []byte) error {
		putMu.Lock()
		defer putMu.Unlock()
		if live != nil {
			return live(key, data)
		}
		objs[key] = data
		return nil
	}
	const uuid = "freezeViewIndexUUIDaaa"
	o := osremote.Options{IndexUUID: uuid, Shard: 0, PathType: layout.Fixed, Version: 2, Seed: 2593}
	files, err := osremote.ShardFiles([]string{"_0"}, 3, 16<<10, o.Seed)
	if err != nil {
		t.Fatal(err)
	}
	remote := osremote.New(put, o)
	if _, err := remote.Upload(files, 1, 3); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil, 2593, objs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	putMu.Lock()
	live = func(key string, data []byte) error { _, err := e.srv.PutBytes(ctx, e.bucket, key, data); return err }
	putMu.Unlock()
	m := e.mount(t, cacheDir(t), "--layout", "opensearch", "--refresh", "1s")
	shard := filepath.Join(m.Dir, uuid, "0")
	if _, err := os.Stat(filepath.Join(shard, "segments_3")); err != nil {
		t.Fatal(err)
	}
	e.rules(faults.Rule{Name: "slow_list", Ops: faults.OpList, Fault: faults.StallHeaders, Stall: 1500 * time.Millisecond})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var looked atomic.Int64
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(100+i), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				os.Stat(filepath.Join(m.Dir, fmt.Sprintf("absent%016x", rng.Uint64())))
				looked.Add(1)
			}
		}()
	}
	time.Sleep(2 * time.Second) // the loops run before the commit
	next, err := osremote.ShardFiles([]string{"_0", "_1"}, 4, 16<<10, o.Seed+1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Upload(next, 1, 4); err != nil {
		t.Fatal(err)
	}
	uploaded := time.Now()
	var shown time.Duration
	for {
		if _, err := os.Stat(filepath.Join(shard, "segments_4")); err == nil {
			shown = time.Since(uploaded)
			break
		}
		if time.Since(uploaded) > 20*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// The rule slows every LIST, the refresher's own too, so that it
	// fired shows only that the store was slow; the loops' lookups,
	// each of a name the root lacks, are what may hold the view.
	if n := looked.Load(); n < 10 {
		t.Fatalf("the loops looked up %d absent names, want many: the test tested nothing", n)
	}
	if e.proxy.Stats().Fired["slow_list"] == 0 {
		t.Fatal("no LIST was slowed: the store was not slow")
	}
	deferred := strings.Count(m.Log(), "refresh deferred")
	t.Logf("the newer commit showed %v after its upload; %d refreshes deferred; %d absent names looked up; %d LISTs slowed", shown, deferred, looked.Load(), e.proxy.Stats().Fired["slow_list"])
	switch {
	case shown == 0:
		t.Errorf("the newer commit did not show within 20 s of its upload while absent names were looked up (%d refreshes deferred)", deferred)
	case shown > 10*time.Second:
		t.Errorf("the newer commit showed %v after its upload, want within 10 s (a refresh each second, each LIST 1.5 s)", shown)
	}
	if deferred > 0 {
		t.Errorf("%d refreshes deferred behind lookups of absent names", deferred)
	}
	if names, err := os.ReadDir(shard); err == nil {
		if !slices.ContainsFunc(names, func(d os.DirEntry) bool { return d.Name() == "_1.si" }) {
			t.Errorf("the new commit's files are not listed: %v", names)
		}
	}
}

// In a snapshot repository mount a directory is named by exactly one
// snapshot: one named "newest" shows its own files (a segfs of 9c4c843
// showed the newest snapshot's), and a name two snapshots share (a
// hostile index-N) shows neither, where before the listing showed one
// and a lookup found the other.
func TestPlan25SnapshotNamesAreExact(t *testing.T) {
	t.Parallel()
	objs := map[string][]byte{}
	put := func(key string, data []byte) error { objs[key] = data; return nil }
	r := snaprepo.New(put, snaprepo.Options{Seed: 2594})
	shard := func(b byte) snaprepo.Shard {
		return snaprepo.Shard{Index: "logs", Shard: 0, Files: map[string][]byte{"_0.cfs": bytes.Repeat([]byte{b}, 5000), "segments_1": []byte("seg")}}
	}
	for _, s := range []struct {
		name string
		b    byte
	}{{"newest", 'o'}, {"dup", 'x'}, {"dup", 'y'}, {"daily-2", 'n'}} {
		if _, err := r.Snapshot(s.name, shard(s.b)); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, nil, 2594, objs)
	m := e.mount(t, cacheDir(t), "--layout", "snapshot")
	ents, err := os.ReadDir(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range ents {
		names = append(names, d.Name())
	}
	if want := []string{"daily-2", "newest"}; !slices.Equal(names, want) {
		t.Errorf("the root lists %q, want %q (a shared name shows neither)", names, want)
	}
	got, err := os.ReadFile(filepath.Join(m.Dir, "newest", "logs", "0", "_0.cfs"))
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{'o'}, 5000)) {
		t.Errorf("newest/logs/0/_0.cfs: %v, starts %q; want the bytes of the snapshot named newest", err, got[:min(len(got), 8)])
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "dup")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a name two snapshots share: %v, want ENOENT", err)
	}
	if !strings.Contains(m.Log(), "more than one snapshot") {
		t.Errorf("no warning names the shared snapshot name")
	}
}
