package fs

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
)

// node returns a file node of e over r, alone in its directory, as the
// tree builds it.
func node(r *reader.Reader, e entry.Entry) *fileNode {
	_, places := reader.Dirs([]entry.Entry{e})
	return &fileNode{entry: e, reader: r, stats: &Stats{}, place: places[0]}
}

// open opens a handle of f as Open does, without the kernel.
func open(f *fileNode) *fileHandle {
	h := &fileHandle{node: f}
	f.acquire(h)
	h.rh = f.reader.Open(f.entry, f.place, h.backing == nil)
	return h
}

// A release asks for the file's pages to be dropped only when the last
// handle segfs serves closes after its reads covered the whole file.
func TestReleaseDropsOnlyAfterTheLastWholeRead(t *testing.T) {
	r, entries := newTestReader(t, map[string][]byte{"f": make([]byte, 10)}, reader.Config{Prefetch: prefetch.None})
	f := node(r, entries[0])
	release := func(h *fileHandle, whole bool) bool {
		drop := f.dropOnRelease(h, whole)
		h.rh.Close()
		f.release(h)
		return drop
	}
	a, b := open(f), open(f)
	if release(a, true) {
		t.Error("dropped while another handle is open")
	}
	if release(b, false) {
		t.Error("dropped at the close of a handle that did not read the whole file")
	}
	if !release(open(f), true) {
		t.Error("not dropped after the last handle read the whole file")
	}
	if f.servedOpens != 0 {
		t.Errorf("servedOpens = %d after every handle closed, want 0", f.servedOpens)
	}
}

// TestPassthroughModes drives a file node's opens and releases: a node
// keeps the mode of its open handles, whatever the cache gains meanwhile.
func TestPassthroughModes(t *testing.T) {
	const ps = 4096
	data := bytes.Repeat([]byte("segfs"), 3*ps/5+1)
	r, entries := newTestReader(t, map[string][]byte{"f": data}, reader.Config{PartSize: ps, Prefetch: prefetch.None, Passthrough: true})
	f := node(r, entries[0])

	// Nothing cached: served.
	a := open(f)
	if a.backing != nil {
		t.Fatal("passthrough before the object was cached")
	}
	// Read it whole: the stored parts ask for the build.
	if got, _, err := a.rh.Read(context.Background(), make([]byte, len(data)), 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %v, or bytes differ", err)
	}
	promoted := func() bool {
		fh, ok := r.OpenWhole(entries[0])
		if ok {
			fh.Close()
		}
		return ok
	}
	for deadline := time.Now().Add(30 * time.Second); !promoted(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("whole-object file never built")
		}
	}
	// Still open in the served mode: a second open stays served.
	b := open(f)
	if b.backing != nil {
		t.Fatal("second open beside a served handle went to passthrough")
	}
	f.release(a)
	f.release(b)

	// Closed everywhere: passthrough, and an open beside it shares the
	// same file.
	c, d := open(f), open(f)
	if c.backing == nil || d.backing != c.backing {
		t.Fatalf("after the last served handle: backing %v, shared %v", c.backing != nil, d.backing == c.backing)
	}
	if fd, ok := c.PassthroughFd(); !ok || fd != int(c.backing.Fd()) {
		t.Errorf("PassthroughFd = %d, %v", fd, ok)
	}
	f.release(c)
	if f.backing == nil {
		t.Error("whole-object file closed while a passthrough handle is open")
	}
	f.release(d)
	if f.backing != nil || f.backingRefs != 0 || f.servedOpens != 0 {
		t.Errorf("after every release: backing %v, %d passthrough, %d served", f.backing != nil, f.backingRefs, f.servedOpens)
	}
	for _, h := range []*fileHandle{a, b, c, d} {
		h.rh.Close()
	}
	if n := r.Stats().OpenHandles.Load(); n != 0 {
		t.Errorf("%d handles open after every close", n)
	}
}
