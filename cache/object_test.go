package cache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"
)

// objectKey returns the ObjectKey of the object whose parts key(obj, i)
// name, size bytes long.
func objectKey(obj string, size int64) ObjectKey {
	k := key(obj, 0)
	return ObjectKey{Source: k.Source, Object: obj, ETag: k.ETag, Size: size}
}

// putObject caches every part of an object of size bytes and returns its
// bytes.
func putObject(t testing.TB, c *Cache, obj string, size int64) []byte {
	t.Helper()
	var all []byte
	for i := int64(0); i*testPart < size; i++ {
		k := key(obj, i)
		d := partData(k, int(min(testPart, size-i*testPart)))
		mustPut(t, c, k, d)
		all = append(all, d...)
	}
	return all
}

// checkParts reads every part of obj, whole and at a few offsets, and
// compares with want.
func checkParts(t testing.TB, c *Cache, obj string, want []byte) {
	t.Helper()
	for i := int64(0); i*testPart < int64(len(want)); i++ {
		k := key(obj, i)
		part := want[i*testPart : min((i+1)*testPart, int64(len(want)))]
		if !c.Contains(k) {
			t.Errorf("Contains(part %d) = false", i)
		}
		for _, off := range []int64{0, 1, min(testBlock+3, int64(len(part))-1), int64(len(part)) - 1} {
			got, hit := read(t, c, k, off, testPart)
			if !hit || !bytes.Equal(got, part[off:]) {
				t.Fatalf("part %d at %d: hit %v, %d bytes, equal %v", i, off, hit, len(got), bytes.Equal(got, part[off:]))
			}
		}
	}
}

func readObject(t testing.TB, c *Cache, k ObjectKey) ([]byte, bool) {
	t.Helper()
	f, ok := c.OpenObject(k)
	if !ok {
		return nil, false
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read whole-object file: %v", err)
	}
	return b, true
}

func TestPromoteAndOpen(t *testing.T) {
	cfg := testConfig(t)
	c := openTest(t, cfg)
	const size = 3*testPart + 1234
	want := putObject(t, c, "a/_0.fdt", size)
	ok := objectKey("a/_0.fdt", size)
	if _, found := c.OpenObject(ok); found {
		t.Fatal("OpenObject found an object never promoted")
	}
	if err := c.Promote(context.Background(), ok, testPart); err != nil {
		t.Fatalf("Promote: %v", err)
	}
	got, found := readObject(t, c, ok)
	if !found || !bytes.Equal(got, want) {
		t.Fatalf("whole-object file: found %v, %d bytes equal %v", found, len(got), bytes.Equal(got, want))
	}
	if err := c.Promote(context.Background(), ok, testPart); err != nil {
		t.Fatalf("second Promote: %v", err)
	}
	st := c.Stats()
	if st.WholeObjects != 1 || st.Promotions != 1 || st.Parts != 0 || st.ObjectOpens != 1 {
		t.Errorf("stats: %d whole objects, %d promotions, %d parts, %d object opens; want 1, 1, 0, 1",
			st.WholeObjects, st.Promotions, st.Parts, st.ObjectOpens)
	}
	checkAccounting(t, c)
	// The parts' files are gone; the whole-object file serves them, and a
	// Put of one writes nothing.
	checkParts(t, c, "a/_0.fdt", want)
	k := key("a/_0.fdt", 1)
	mustPut(t, c, k, want[testPart:2*testPart])
	if fileExists(partPath(c, k)) || c.Stats().Parts != 0 {
		t.Error("a Put of a promoted object's part wrote a part file")
	}

	// The seal survives a restart, and the load indexes the object.
	c.Close()
	c = openTest(t, cfg)
	if st := c.Stats(); st.WholeObjects != 1 {
		t.Errorf("after restart: %d whole objects indexed, want 1", st.WholeObjects)
	}
	checkAccounting(t, c)
	if got, found := readObject(t, c, ok); !found || !bytes.Equal(got, want) {
		t.Fatalf("after restart: found %v, bytes equal %v", found, bytes.Equal(got, want))
	}
	checkParts(t, c, "a/_0.fdt", want)
	// Another version of the object is another file.
	other := ok
	other.ETag = `"etag-2"`
	if _, found := c.OpenObject(other); found {
		t.Error("OpenObject served another ETag's file")
	}
}

func TestPromoteIncomplete(t *testing.T) {
	c := openTest(t, testConfig(t))
	const size = 3 * testPart
	putObject(t, c, "b", size)
	if err := os.Remove(partPath(c, key("b", 1))); err != nil {
		t.Fatal(err)
	}
	err := c.Promote(context.Background(), objectKey("b", size), testPart)
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Promote with a part missing: %v, want ErrIncomplete", err)
	}
	if _, found := c.OpenObject(objectKey("b", size)); found {
		t.Error("an incomplete object was promoted")
	}
	if st := c.Stats(); st.WholeObjects != 0 || st.PromoteErrors != 0 {
		t.Errorf("%d whole objects, %d promote errors; want 0, 0", st.WholeObjects, st.PromoteErrors)
	}
	checkAccounting(t, c)
}

// TestObjectTamper changes a sealed file or its seal in each way a seal
// must catch: every change is found at open, both files are removed and
// counted, the parts still serve the bytes, and the object can be
// promoted again.
func TestObjectTamper(t *testing.T) {
	const size = 2*testPart + 77
	cases := []struct {
		name   string
		tamper func(t *testing.T, c *Cache, obj, seal string)
	}{
		{"flip data byte", func(t *testing.T, c *Cache, obj, seal string) {
			flipByte(t, obj, func(n, _ int64) int64 { return n / 2 })
		}},
		{"flip seal byte", func(t *testing.T, c *Cache, obj, seal string) {
			flipByte(t, seal, func(int64, int64) int64 { return 30 })
		}},
		{"truncate data", func(t *testing.T, c *Cache, obj, seal string) {
			if err := os.Truncate(obj, size-1); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncate seal", func(t *testing.T, c *Cache, obj, seal string) {
			if err := os.Truncate(seal, 10); err != nil {
				t.Fatal(err)
			}
		}},
		{"same bytes, new file", func(t *testing.T, c *Cache, obj, seal string) {
			b, err := os.ReadFile(obj)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(obj+".new", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(obj+".new", obj); err != nil {
				t.Fatal(err)
			}
		}},
		{"another object's files", func(t *testing.T, c *Cache, obj, seal string) {
			putObject(t, c, "other", size)
			ok := objectKey("other", size)
			if err := c.Promote(context.Background(), ok, testPart); err != nil {
				t.Fatal(err)
			}
			id := ok.id()
			if err := os.Rename(id.objPath(c.Dir()), obj); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(id.sealPath(c.Dir()), seal); err != nil {
				t.Fatal(err)
			}
			// The moved object is gone from its own name: the index
			// forgets it when it is next asked for.
			if _, found := c.OpenObject(ok); found {
				t.Fatal("a moved whole-object file was opened under its old name")
			}
		}},
		{"seal removed", func(t *testing.T, c *Cache, obj, seal string) {
			if err := os.Remove(seal); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := openTest(t, testConfig(t))
			want := putObject(t, c, "x", size)
			ok := objectKey("x", size)
			if err := c.Promote(context.Background(), ok, testPart); err != nil {
				t.Fatal(err)
			}
			// Let the clock move past the seal's change time even where
			// the file system keeps coarse timestamps.
			time.Sleep(20 * time.Millisecond)
			id := ok.id()
			obj, seal := id.objPath(c.Dir()), id.sealPath(c.Dir())
			tc.tamper(t, c, obj, seal)
			before := c.Stats().BadObjects
			if _, found := c.OpenObject(ok); found {
				t.Fatal("a tampered whole-object file was opened")
			}
			if tc.name != "seal removed" && c.Stats().BadObjects != before+1 {
				t.Errorf("BadObjects %d, want %d", c.Stats().BadObjects, before+1)
			}
			if fileExists(obj) || fileExists(seal) {
				t.Errorf("tampered files left: data %v, seal %v", fileExists(obj), fileExists(seal))
			}
			// The parts went with the promotion: every read misses now,
			// and the caller fetches the bytes again.
			for i := int64(0); i*testPart < size; i++ {
				if _, hit := read(t, c, key("x", i), 0, testPart); hit {
					t.Fatalf("part %d served after its whole-object file was found bad", i)
				}
			}
			putObject(t, c, "x", size)
			if err := c.Promote(context.Background(), ok, testPart); err != nil {
				t.Fatalf("Promote again: %v", err)
			}
			if got, found := readObject(t, c, ok); !found || !bytes.Equal(got, want) {
				t.Fatalf("promoted again: found %v", found)
			}
			checkParts(t, c, "x", want)
			checkAccounting(t, c)
		})
	}
}

// TestLoadRemovesHalfObjects: a crash between a data file's rename and
// its seal's leaves a data file alone; the next load removes it, and a
// seal alone.
func TestLoadRemovesHalfObjects(t *testing.T) {
	cfg := testConfig(t)
	c := openTest(t, cfg)
	const size = 2 * testPart
	for _, name := range []string{"p", "q"} {
		putObject(t, c, name, size)
		if err := c.Promote(context.Background(), objectKey(name, size), testPart); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	p, q := objectKey("p", size).id(), objectKey("q", size).id()
	if err := os.Remove(p.sealPath(cfg.Dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(q.objPath(cfg.Dir)); err != nil {
		t.Fatal(err)
	}
	c = openTest(t, cfg)
	for _, path := range []string{p.objPath(cfg.Dir), q.sealPath(cfg.Dir)} {
		if fileExists(path) {
			t.Errorf("%s left after the load", path)
		}
	}
	if st := c.Stats(); st.WholeObjects != 0 {
		t.Errorf("%d whole objects indexed, want 0", st.WholeObjects)
	}
	checkAccounting(t, c)
}

// TestObjectsWithinBound: whole-object files count toward MaxBytes and
// are evicted like parts; an object larger than a quarter of the bound is
// not promoted.
func TestObjectsWithinBound(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBytes = 40 * (testPart + 1024)
	c := openTest(t, cfg)
	const size = 2 * testPart
	putObject(t, c, "small", size)
	if err := c.Promote(context.Background(), objectKey("small", size), testPart); err != nil {
		t.Fatal(err)
	}
	big := int64(cfg.MaxBytes/4 + 1)
	if err := c.Promote(context.Background(), objectKey("big", big), testPart); !errors.Is(err, ErrNoSpace) {
		t.Errorf("Promote of %d bytes under a bound of %d: %v, want ErrNoSpace", big, cfg.MaxBytes, err)
	}
	for i := range int64(120) {
		k := key("churn", i)
		mustPut(t, c, k, partData(k, testPart))
		if st := c.Stats(); st.Bytes > cfg.MaxBytes {
			t.Fatalf("after %d puts: %d bytes cached, bound %d", i+1, st.Bytes, cfg.MaxBytes)
		}
	}
	if _, found := c.OpenObject(objectKey("small", size)); found {
		t.Error("the least recently used whole-object file was not evicted")
	}
	if st := c.Stats(); st.WholeObjects != 0 {
		t.Errorf("%d whole objects indexed after eviction, want 0", st.WholeObjects)
	}
	checkAccounting(t, c)
}

// TestPromoteUnderLoad promotes objects while other goroutines read, put
// and evict their parts under a tight bound: every hit must return the
// exact bytes (from a part file or a whole-object file), and the index
// must match the disk at the end.
func TestPromoteUnderLoad(t *testing.T) {
	const (
		objects = 3
		size    = 3*testPart + 500
	)
	cfg := testConfig(t)
	// Room for about two objects' parts and their headers (padded to
	// 4096 bytes), beside a whole-object file: evictions race promotions.
	cfg.MaxBytes = 4*size + 12*headerAlign
	cfg.MaxWriters = 2
	c := openTest(t, cfg)
	name := func(i int) string { return "load/" + string(rune('a'+i)) }
	data := make([][]byte, objects)
	for i := range objects {
		data[i] = putObject(t, c, name(i), size)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 2))
			p := make([]byte, testPart)
			for range 300 {
				i := r.IntN(objects)
				k := key(name(i), r.Int64N((size+testPart-1)/testPart))
				part := data[i][k.Offset():min(k.Offset()+testPart, size)]
				switch op := r.IntN(10); {
				case op < 2:
					if err := c.Put(ctx, k, part); err != nil {
						t.Errorf("Put %s: %v", k, err)
					}
				case op < 3:
					err := c.Promote(ctx, objectKey(name(i), size), testPart)
					if err != nil && !errors.Is(err, ErrIncomplete) && !errors.Is(err, ErrNoSpace) {
						t.Errorf("Promote: %v", err)
					}
				case op < 4:
					if f, ok := c.OpenObject(objectKey(name(i), size)); ok {
						got, err := io.ReadAll(f)
						f.Close()
						if err != nil || !bytes.Equal(got, data[i]) {
							t.Errorf("whole-object file of %s: %v, equal %v", name(i), err, bytes.Equal(got, data[i]))
						}
					}
				default:
					off := r.Int64N(int64(len(part)))
					n, ok, err := c.ReadAt(ctx, k, p[:r.IntN(3*testBlock)+1], off)
					if err != nil {
						t.Errorf("ReadAt: %v", err)
					}
					if ok && !bytes.Equal(p[:n], part[off:off+int64(n)]) {
						t.Errorf("ReadAt %s at %d: wrong bytes", k, off)
					}
				}
			}
		})
	}
	wg.Wait()
	st := c.Stats()
	t.Logf("promotions %d, whole objects %d, hits %d, misses %d, evictions %d", st.Promotions, st.WholeObjects, st.Hits, st.Misses, st.Evictions)
	if st.CorruptRemoved != 0 || st.BadObjects != 0 || st.ReadErrors != 0 || st.PutErrors != 0 || st.PromoteErrors != 0 {
		t.Errorf("stats %+v", st)
	}
	if st.Promotions == 0 {
		t.Error("no promotion succeeded")
	}
	if st.Bytes > cfg.MaxBytes {
		t.Errorf("bytes %d over the bound %d", st.Bytes, cfg.MaxBytes)
	}
	checkAccounting(t, c)
}
