package fs

import "testing"

// A release asks for the file's pages to be dropped only when the last
// handle segfs serves closes after reading at least the whole file, the
// file is larger than a part and DropAfterRead is on.
func TestReleaseDropsOnlyAfterAWholeRead(t *testing.T) {
	// release closes h as Release does, and reports dropOnRelease's answer.
	release := func(f *fileNode, h *fileHandle) bool {
		drop := f.dropOnRelease(h)
		f.release(h)
		return drop
	}
	const ps = 1000
	store := newMemStore()
	big := store.put("big", randomBytes(1, 3*ps+500))
	small := store.put("small", randomBytes(2, ps))
	on := newTestReader(t, store, newFakeCache(), 2, ReaderConfig{PartSize: ps, Prefetch: PrefetchNone, DropAfterRead: true})
	off := newTestReader(t, store, newFakeCache(), 2, ReaderConfig{PartSize: ps, Prefetch: PrefetchNone})
	node := func(r *Reader, name string) *fileNode {
		obj := big
		if name == "small" {
			obj = small
		}
		return &fileNode{entry: Entry{Name: name, Obj: obj}, obj: obj, reader: r}
	}
	open := func(f *fileNode, served int64) *fileHandle {
		h := &fileHandle{node: f}
		f.acquire(h)
		h.served.Store(served)
		return h
	}

	f := node(on, "big")
	whole, idle := open(f, big.Size), open(f, 0)
	if release(f, whole) {
		t.Error("dropped while another handle is open")
	}
	if release(f, idle) {
		t.Error("dropped at the close of a handle that read nothing")
	}
	if !release(f, open(f, big.Size)) {
		t.Error("not dropped after the last handle read the whole file")
	}
	if !release(f, open(f, big.Size+ps)) {
		t.Error("not dropped after the last handle read more than the file (a re-read)")
	}
	if release(f, open(f, big.Size-1)) {
		t.Error("dropped after a read short of the whole file")
	}
	if f := node(on, "small"); release(f, open(f, small.Size)) {
		t.Error("dropped a file no larger than a part")
	}
	if f := node(off, "big"); release(f, open(f, big.Size)) {
		t.Error("dropped with DropAfterRead off")
	}
	if f.servedOpens != 0 {
		t.Errorf("servedOpens = %d after every handle closed, want 0", f.servedOpens)
	}
}
