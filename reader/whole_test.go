package reader

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/compress"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// wholeCache is fakeCache with whole-object files: Promote succeeds once
// every part is cached, and OpenObject opens a temporary file for an
// object that was promoted.
type wholeCache struct {
	*fakeCache
	dir string

	mu       sync.Mutex
	promoted map[string]bool // object keys
	promotes int             // Promote calls
	opens    int             // OpenObject calls
}

func newWholeCache(t *testing.T) *wholeCache {
	return &wholeCache{fakeCache: newFakeCache(), dir: t.TempDir(), promoted: map[string]bool{}}
}

func (c *wholeCache) Promote(ctx context.Context, k cache.ObjectKey, partSize int64) error {
	c.mu.Lock()
	c.promotes++
	c.mu.Unlock()
	for i := int64(0); i*partSize < k.Size; i++ {
		if !c.Contains(cache.Key{Source: k.Source, Object: k.Object, ETag: k.ETag, PartSize: partSize, Index: i}) {
			return cache.ErrIncomplete
		}
	}
	c.mu.Lock()
	c.promoted[k.Object] = true
	c.mu.Unlock()
	return nil
}

func (c *wholeCache) OpenObject(k cache.ObjectKey) (*os.File, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opens++
	if !c.promoted[k.Object] {
		return nil, false
	}
	f, err := os.Create(filepath.Join(c.dir, "obj"))
	if err != nil {
		return nil, false
	}
	return f, true
}

func (c *wholeCache) isPromoted(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.promoted[key]
}

// waitPromoted waits (bounded, only against a hang) for the promoter.
func waitPromoted(t *testing.T, c *wholeCache, key string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !c.isPromoted(key) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never promoted", key)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOpenWhole: once every part of an object is cached its whole-object
// file is built, and OpenWhole hands it out, counted; a seekable zstd
// entry never gets one.
func TestOpenWhole(t *testing.T) {
	const ps = 1000
	store := newMemStore()
	obj := store.put("f", randomBytes(7, 3*ps+5))
	wc := newWholeCache(t)
	r := newTestReader(t, store, wc, 2, Config{PartSize: ps, Prefetch: prefetch.None, Passthrough: true})
	e := Entry{Name: "f", Obj: obj}
	if _, ok := r.OpenWhole(e); ok {
		t.Fatal("a whole-object file before the object was cached")
	}
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, 3*ps+5), 0, nil); err != nil {
		t.Fatal(err)
	}
	waitPromoted(t, wc, "f")
	f, ok := r.OpenWhole(e)
	if !ok {
		t.Fatal("no whole-object file once every part is cached")
	}
	f.Close()
	if _, ok := r.OpenWhole(Entry{Name: "f", Obj: obj, Table: &compress.SeekTable{}}); ok {
		t.Error("a whole-object file for a seekable zstd entry")
	}
	if n := r.Stats().PassthroughOpens.Load(); n != 1 {
		t.Errorf("PassthroughOpens %d, want 1", n)
	}
}

// TestPassthroughOffAndSkipped: with passthrough off no build is asked
// for; a seekable zstd object is never built; DisablePassthrough stops
// both.
func TestPassthroughOffAndSkipped(t *testing.T) {
	const ps = 1000
	read := func(r *Reader, obj fetcher.Object) {
		t.Helper()
		if _, err := r.ReadAt(context.Background(), obj, make([]byte, obj.Size), 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	store := newMemStore()
	plain := store.put("plain", randomBytes(8, 2*ps))
	zst := store.put("x.zst", randomBytes(9, 2*ps))

	off := newWholeCache(t)
	r := newTestReader(t, store, off, 2, Config{PartSize: ps, Prefetch: prefetch.None})
	read(r, plain)
	if r.Passthrough() || off.promotes != 0 {
		t.Errorf("passthrough off: Passthrough() %v, %d builds asked", r.Passthrough(), off.promotes)
	}

	on := newWholeCache(t)
	r = newTestReader(t, store, on, 2, Config{PartSize: ps, Prefetch: prefetch.None, Passthrough: true})
	r.Serve([]Entry{{Name: "x", Obj: zst, Table: &compress.SeekTable{}}, {Name: "plain", Obj: plain}})
	read(r, zst)
	read(r, plain)
	waitPromoted(t, on, "plain")
	if on.isPromoted("x.zst") {
		t.Error("a seekable zstd object was promoted")
	}
	r.DisablePassthrough()
	if r.Passthrough() {
		t.Error("Passthrough() after DisablePassthrough")
	}
	if _, ok := r.OpenWhole(Entry{Name: "plain", Obj: plain}); ok {
		t.Error("OpenWhole after DisablePassthrough")
	}
}

// TestPromoterStopsOnClose: the promoter goroutine ends with the Reader,
// a build in progress cancelled.
func TestPromoterStopsOnClose(t *testing.T) {
	before := runtime.NumGoroutine()
	store := newMemStore()
	wc := &blockingWhole{wholeCache: newWholeCache(t), started: make(chan struct{})}
	sched := prefetch.New(prefetch.Config{Workers: 2})
	r := mustNew(t, store, wc, sched, Config{PartSize: 1000, Passthrough: true})
	r.whole.request(store.put("f", randomBytes(10, 1500)))
	<-wc.started // a build is running, blocked until its context ends
	r.Close()
	sched.Close()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
}

// blockingWhole's Promote blocks until its context is cancelled.
type blockingWhole struct {
	*wholeCache
	started chan struct{}
	once    sync.Once
}

func (c *blockingWhole) Promote(ctx context.Context, k cache.ObjectKey, partSize int64) error {
	c.once.Do(func() { close(c.started) })
	<-ctx.Done()
	return ctx.Err()
}

// A cache that keeps no whole-object files cannot serve passthrough:
// New refuses the configuration instead of failing opens later.
func TestPassthroughNeedsWholeObjects(t *testing.T) {
	sched := prefetch.New(prefetch.Config{Workers: 1})
	defer sched.Close()
	partsOnly := struct{ Cache }{newFakeCache()} // the part methods alone
	if r, err := New(newMemStore(), partsOnly, sched, Config{Passthrough: true}); err == nil {
		r.Close()
		t.Fatal("passthrough over a cache without whole-object files was accepted")
	}
	r, err := New(newMemStore(), partsOnly, sched, Config{})
	if err != nil {
		t.Fatalf("without passthrough: %v", err)
	}
	r.Close()
}
