package reliability

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/segfs/segfs/tests/faults"
	"github.com/segfs/segfs/tests/harness"
)

// etagOf returns the object's current ETag.
func (e *env) etagOf(key string) string {
	e.t.Helper()
	out, err := e.srv.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(key)})
	if err != nil {
		e.t.Fatal(err)
	}
	return aws.ToString(out.ETag)
}

// changeMidBody is the shared start of cases 9 and 10: a 4-part object is
// mounted, part 3 is read (and cached), and then a read of part 1 gets a
// body that is cut after 256 KiB, the object being changed by change while
// that old body is in flight. The read must fail with ESTALE: the old
// bytes that arrived cannot be completed, and no new byte may be mixed in.
// It returns the mount's file and the mount's cache directory.
func changeMidBody(t *testing.T, e *env, key string, change func()) (*os.File, string) {
	t.Helper()
	old := e.objs[key]
	dir := cacheDir(t)
	m := e.mount(t, dir, "--part-size", partSizeFlag, "--prefetch", "none")
	f, err := os.OpenFile(filepath.Join(m.Dir, key), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	// Not at offset 0, which would look sequential and start readahead.
	if errno, err := readExact(f, old, 3*partSize, partSize); err != nil || errno != 0 {
		t.Fatalf("part 3 before the change: %v %v", errnoName(errno), err)
	}
	harness.WaitIdle(t, m)
	e.rules(faults.Rule{Fault: faults.Reset, Key: key, Bytes: 256 << 10, Times: 1, Then: change})
	before := harness.MustStats(t, m)
	errno, err := readExact(f, old, partSize, partSize)
	switch {
	case err != nil:
		t.Errorf("part 1, changed mid-body: %v", err)
	case errno != syscall.ESTALE:
		t.Errorf("part 1, changed mid-body: %v, want ESTALE", errnoName(errno))
	}
	after := harness.WaitIdle(t, m)
	if e.proxy.Stats().Fired["reset"] != 1 {
		t.Errorf("the mid-body change was not injected: %v", e.proxy.Stats().Fired)
	}
	t.Logf("mid-body change: %s; segfs counted %d changed, %d GETs", errnoName(errno),
		harness.Delta(before, after, "changed"), harness.Delta(before, after, "gets"))

	// Every other read gives the old bytes (part 3 is cached; parts of
	// the old version fetched before the change) or ESTALE, never the
	// new bytes or a mix: readExact compares with the old bytes.
	for _, off := range []int64{3 * partSize, 0, 2*partSize + 777, int64(len(old)) - 4096} {
		errno, err := readExact(f, old, off, 64<<10)
		switch {
		case err != nil:
			t.Errorf("read at %d after the change: %v", off, err)
		case errno != 0 && errno != syscall.ESTALE:
			t.Errorf("read at %d after the change: %v, want the old bytes or ESTALE", off, errnoName(errno))
		case off == 3*partSize && errno != 0:
			t.Errorf("read of the cached part 3 after the change: %v, want the old bytes", errnoName(errno))
		}
	}
	// A new open of the same mount sees the same version: the tree is
	// fixed when the mount lists the bucket.
	g, err := os.OpenFile(filepath.Join(m.Dir, key), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatalf("reopen after the change: %v", err)
	}
	defer g.Close()
	if errno, err := readExact(g, old, 2*partSize, 4096); err != nil || (errno != 0 && errno != syscall.ESTALE) {
		t.Errorf("read through a new descriptor after the change: %v %v; want old bytes or ESTALE", errnoName(errno), err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	e.rules()
	return f, dir
}

// TestPlan09OverwriteMidRead overwrites an object (same size, new bytes,
// so a new ETag) while a GET of its old version is mid-body, then mounts
// again on the same cache: the new mount must read only the new bytes,
// although the cache still holds a part of the old version (case 11:
// the cache key includes the ETag).
func TestPlan09OverwriteMidRead(t *testing.T) {
	t.Parallel()
	const key = "over/_0.fdt"
	old, fresh := randomBytes(901, 4<<20), randomBytes(902, 4<<20)
	e := newEnv(t, nil, 9, map[string][]byte{key: old})
	oldETag := e.etagOf(key)
	var newETag string
	_, dir := changeMidBody(t, e, key, func() {
		etag, err := e.srv.PutBytes(context.Background(), e.bucket, key, fresh)
		if err != nil {
			t.Errorf("overwrite: %v", err)
		}
		newETag = etag
	})
	versions := contentFunc(func(k, etag string) ([]byte, bool) {
		switch {
		case k != key:
			return nil, false
		case etag == oldETag:
			return old, true
		case etag == newETag:
			return fresh, true
		}
		return nil, false
	})
	if rep := checkCache(t, dir, versions); rep.byKey[key] == 0 {
		t.Fatalf("the old version's part 3 is not in the cache; the remount below would test nothing")
	}

	harness.DropPageCache(t)
	m := e.mount(t, dir, "--part-size", partSizeFlag, "--prefetch", "none")
	before := e.proxy.Stats()
	f, err := os.OpenFile(filepath.Join(m.Dir, key), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for off := int64(0); off < int64(len(fresh)); off += partSize {
		if errno, err := readExact(f, fresh, off, partSize); err != nil || errno != 0 {
			t.Errorf("part at %d after the remount: %v %v (old bytes there: %v)", off, errnoName(errno), err, readMatches(f, old, off))
		}
	}
	harness.WaitIdle(t, m)
	if n := e.proxy.Stats().GetsByKey[key] - before.GetsByKey[key]; n < int64(len(fresh)/partSize) {
		t.Errorf("%d GETs after the remount for %d parts of a new version; a part must have come from the old version's cache", n, len(fresh)/partSize)
	}
	checkCache(t, dir, versions)
}

// readMatches reports whether a read at off returns want's bytes.
func readMatches(f *os.File, want []byte, off int64) bool {
	errno, err := readExact(f, want, off, 4096)
	return err == nil && errno == 0
}

// TestPlan10DeleteMidRead deletes an object while a GET of it is mid-body:
// that read fails with ESTALE, the cached part still reads its old bytes
// (no TTL: the tree and its objects are fixed at mount), and a new mount
// no longer shows the file.
func TestPlan10DeleteMidRead(t *testing.T) {
	t.Parallel()
	const key = "del/_0.fdt"
	old := randomBytes(1001, 4<<20)
	e := newEnv(t, nil, 10, map[string][]byte{key: old, "del/_0.si": randomBytes(1002, 1000)})
	_, dir := changeMidBody(t, e, key, func() {
		_, err := e.srv.Client().DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(key)})
		if err != nil {
			t.Errorf("delete: %v", err)
		}
	})
	checkCache(t, dir, e.objs)
	m := e.mount(t, dir, "--part-size", partSizeFlag, "--prefetch", "none")
	if _, err := os.Stat(filepath.Join(m.Dir, key)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of the deleted object after a remount: %v, want ENOENT", err)
	}
	if got, err := os.ReadFile(filepath.Join(m.Dir, "del/_0.si")); err != nil || string(got) != string(e.objs["del/_0.si"]) {
		t.Errorf("the object beside it after the remount: %v", err)
	}
}
