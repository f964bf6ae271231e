package reader

import (
	"bytes"
	"context"
	"testing"

	"github.com/segfs/segfs/prefetch"
)

// A handle says its file was read whole only with DropAfterRead, when its
// reads returned at least the file's size and the file is larger than a
// part.
func TestReadWholeOnlyAfterAWholeRead(t *testing.T) {
	const ps = 1000
	store := newMemStore()
	big := Entry{Name: "big", Obj: store.put("big", randomBytes(1, 3*ps+500))}
	small := Entry{Name: "small", Obj: store.put("small", randomBytes(2, ps))}
	on := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: ps, Prefetch: prefetch.None, DropAfterRead: true})
	off := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: ps, Prefetch: prefetch.None})
	whole := func(r *Reader, e Entry, served int64) bool {
		h := r.Open(e, Place{}, true)
		defer h.Close()
		h.served.Store(served)
		return h.ReadWhole()
	}
	if !whole(on, big, big.Obj.Size) {
		t.Error("not whole after reads of the whole file")
	}
	if !whole(on, big, big.Obj.Size+ps) {
		t.Error("not whole after reads of more than the file (a re-read)")
	}
	if whole(on, big, big.Obj.Size-1) {
		t.Error("whole after reads short of the file")
	}
	if whole(on, small, small.Obj.Size) {
		t.Error("whole for a file no larger than a part")
	}
	if whole(off, big, big.Obj.Size) {
		t.Error("whole with DropAfterRead off")
	}
	// Reads through the handle count.
	h := on.Open(big, Place{}, true)
	defer h.Close()
	for off := int64(0); off < big.Obj.Size; off += 1024 {
		if _, release, err := h.Read(context.Background(), make([]byte, 1024), off); err != nil {
			t.Fatal(err)
		} else if release != nil {
			release()
		}
	}
	if !h.ReadWhole() {
		t.Errorf("a handle that read the file from start to end served %d of %d bytes", h.served.Load(), big.Obj.Size)
	}
	if n := on.Stats().OpenHandles.Load(); n != 1 {
		t.Errorf("%d open handles, want 1", n)
	}
}

// The part table's invariant check can fail: each broken invariant is reported.
func TestInvariantsCatchBrokenState(t *testing.T) {
	const ps = 1000
	store := newMemStore()
	obj := store.put("f", randomBytes(3, 4*ps))
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: ps, Prefetch: prefetch.None})
	if _, err := r.ReadAt(context.Background(), obj, make([]byte, 10), 0, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	check := func(what string, breakIt, undo func()) {
		t.Helper()
		r.parts.mu.Lock()
		defer r.parts.mu.Unlock()
		if err := r.parts.invariantsLocked(); err != nil {
			t.Fatalf("before %s: %v", what, err)
		}
		breakIt()
		err := r.parts.invariantsLocked()
		undo()
		if err == nil {
			t.Errorf("%s: not caught", what)
		}
	}
	check("held bytes miscounted", func() { r.parts.heldBytes++ }, func() { r.parts.heldBytes-- })
	check("memory tier miscounted", func() { r.parts.mem.bytes++ }, func() { r.parts.mem.bytes-- })
	call := &partCall{key: keyOfPart(obj, 1), obj: obj, done: make(chan struct{}), buf: &partBuf{}}
	check("call without the fetch's ref", func() {
		r.parts.calls[call.key] = call
		r.stats.InflightParts.Add(1)
	}, func() {
		delete(r.parts.calls, call.key)
		r.stats.InflightParts.Add(-1)
	})
	check("gauge off", func() { r.stats.InflightParts.Add(1) }, func() { r.stats.InflightParts.Add(-1) })
}

// Open runs the policies of the Reader's prefetch mode for a served
// handle, and none for a passthrough one.
func TestOpenRunsTheModesPolicies(t *testing.T) {
	const ps = 1000
	store := newMemStore()
	store.gate = make(chan struct{})
	defer close(store.gate)
	dir := &prefetch.Dir{}
	big := Entry{Name: "big", Obj: store.put("big", randomBytes(4, 3*ps))}
	dir.Add("big", big.Obj)
	dir.Add("s1", store.put("s1", randomBytes(5, 10)))
	dir.Add("s2", store.put("s2", randomBytes(6, 10)))
	for _, tc := range []struct {
		mode        prefetch.Mode
		served      bool
		ahead, back int64
	}{
		{prefetch.None, true, 0, 0},
		{prefetch.Open, false, 0, 0},
		{prefetch.Open, true, 1, 2 + 2}, // parts 1 and 2 of big, then s1 and s2
		{prefetch.All, true, 1, 2},      // no small files after an open
	} {
		r := newTestReader(t, store, newFakeCache(), 8, Config{PartSize: ps, Prefetch: tc.mode})
		h := r.Open(big, Place{dir, 0}, tc.served)
		st := r.Stats()
		if st.StartedAhead.Load() != tc.ahead || st.StartedBack.Load() != tc.back {
			t.Errorf("%s, served %v: %d parts ahead, %d in the background; want %d and %d",
				tc.mode, tc.served, st.StartedAhead.Load(), st.StartedBack.Load(), tc.ahead, tc.back)
		}
		h.Close()
	}
}

// An inline entry (an OpenSearch shard's segments_N) reads from its own
// bytes: nothing is fetched, pinned or prefetched.
func TestInlineEntry(t *testing.T) {
	store := newMemStore()
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: 1000, Prefetch: prefetch.Open})
	data := randomBytes(9, 2500)
	e := Entry{Name: "segments_4", Inline: data}
	if e.Size() != 2500 {
		t.Fatalf("size %d", e.Size())
	}
	h := r.Open(e, Place{&prefetch.Dir{}, -1}, true)
	for _, tc := range []struct{ off, n, want int64 }{{0, 10, 10}, {2490, 100, 10}, {2500, 10, 0}, {9999, 10, 0}} {
		got, release, err := h.Read(context.Background(), make([]byte, tc.n), tc.off)
		if err != nil || release != nil || int64(len(got)) != tc.want || !bytes.Equal(got, data[min(tc.off, 2500):min(tc.off, 2500)+tc.want]) {
			t.Errorf("read %d at %d: %d bytes, %v, release %v; want %d", tc.n, tc.off, len(got), err, release != nil, tc.want)
		}
	}
	h.Close()
	if st := r.Stats(); st.Reads.Load() != 0 || st.StartedAhead.Load()+st.StartedBack.Load() != 0 || st.OpenHandles.Load() != 0 {
		t.Errorf("an inline entry reached the engine: %v", counters(st))
	}
	if _, ok := r.OpenWhole(e); ok {
		t.Error("a whole-object file for an inline entry")
	}
}

// Each successful read is observed once, under the slowest tier its
// bytes came from: a cold read under remote, the same bytes once stored
// under disk, an inline entry under memory.
func TestReadLatencyByTier(t *testing.T) {
	const ps = 1000
	store := newMemStore()
	e := Entry{Name: "f", Obj: store.put("f", randomBytes(4, 2*ps))}
	r := newTestReader(t, store, newFakeCache(), 2, Config{PartSize: ps, Prefetch: prefetch.None})
	count := func() [numTiers]uint64 {
		var c [numTiers]uint64
		for i := range c {
			c[i] = r.Stats().ReadLatency[i].Snapshot().Count
		}
		return c
	}
	read := func(h *Handle, off int64) {
		t.Helper()
		_, release, err := h.Read(context.Background(), make([]byte, 100), off)
		if err != nil {
			t.Fatal(err)
		}
		if release != nil {
			release()
		}
	}
	h := r.Open(e, Place{}, true)
	defer h.Close()
	read(h, 0)
	if got := count(); got != [numTiers]uint64{TierRemote: 1} {
		t.Fatalf("after a cold read: %v, want one remote", got)
	}
	waitFor(t, func() bool { return r.Stats().InflightParts.Load() == 0 })
	read(h, 100) // the sequential reader's part is held for it
	if got := count(); got != [numTiers]uint64{TierRemote: 1, TierHeld: 1} {
		t.Fatalf("after a sequential read: %v, want one remote and one held", got)
	}
	h.Close() // lets the held part go
	h2 := r.Open(e, Place{}, true)
	defer h2.Close()
	read(h2, 500)
	if got := count(); got != [numTiers]uint64{TierRemote: 1, TierHeld: 1, TierDisk: 1} {
		t.Fatalf("after a cached read: %v, want one more from disk", got)
	}
	in := r.Open(Entry{Name: "segments_1", Inline: []byte("abc")}, Place{}, true)
	defer in.Close()
	read(in, 0)
	if got := count(); got != [numTiers]uint64{TierRemote: 1, TierHeld: 1, TierDisk: 1, TierMemory: 1} {
		t.Fatalf("after an inline read: %v, want one more from memory", got)
	}
}
