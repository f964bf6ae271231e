package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/segfs/segfs/prefetch"
)

// An arrival gives out a span only once every byte of it is in: from
// the first GET's prefix and the split ranges done, in any order; after
// a failure nothing; and end reports whether a reader took bytes before
// it.
func TestArrivalSpans(t *testing.T) {
	var a arrival
	ctx := context.Background()
	done := make(chan struct{})
	a.start(make([]byte, 100))
	a.filled(30)
	if got, err := a.take(ctx, 10, 30, done); err != nil || got.waited || !got.early || len(got.data) != 20 {
		t.Fatalf("take [10,30) of a prefix of 30: %d bytes, waited %v, early %v, %v", len(got.data), got.waited, got.early, err)
	}
	got := make(chan []byte, 1)
	go func() {
		t, _ := a.take(ctx, 20, 90, done)
		got <- t.data
	}()
	a.spanIn(60, 100) // [30,60) still out
	select {
	case b := <-got:
		t.Fatalf("take [20,90) returned %d bytes with [30,60) not in", len(b))
	case <-time.After(20 * time.Millisecond): // it may not return at all yet
	}
	a.spanIn(30, 60)
	if b := <-got; len(b) != 70 {
		t.Fatalf("take [20,90) once in: %d bytes, want 70", len(b))
	}
	if !a.end(false) {
		t.Error("end: no reader took bytes, but two did")
	}
	if got, _ := a.take(ctx, 0, 10, done); got.data != nil {
		t.Error("a failed fetch's bytes were taken after its end")
	}
	if got, _ := a.take(ctx, 50, 40, done); got.data != nil {
		t.Error("a reversed span was given out")
	}

	var c arrival
	c.start(make([]byte, 10))
	if c.end(true) {
		t.Error("end: a reader took bytes, but none did")
	}
	if got, _ := c.take(ctx, 0, 10, done); len(got.data) != 10 || got.early {
		t.Errorf("an ended fetch's bytes: %d, early %v; want 10, not early", len(got.data), got.early)
	}
	var never arrival // a fetch that never ran: its call's done closes
	close(done)
	if got, err := never.take(ctx, 0, 10, done); got.data != nil || err != nil {
		t.Errorf("take of a fetch that never started: %d bytes, %v", len(got.data), err)
	}
}

// A read of bytes a part fetch has already received is answered from
// its buffer while the rest is on its way, by reference; a read of
// bytes not yet in waits for them. If the fetch then fails, the bytes
// served were right and stay so until released (the buffer is not
// recycled under them), the read that waited has the fetch's error, and
// the next read fetches again.
func TestPartReadServedAsItArrives(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", fail), func(t *testing.T) {
			mem := newMemStore()
			data := randomBytes(42, 2<<20)
			obj := mem.put("big", data)
			store := &halfStore{memStore: mem, gate: make(chan struct{})}
			if fail {
				store.fail = errors.New("connection reset")
			}
			pc := openCacheAt(t, filepath.Join(t.TempDir(), "cache"))
			r := newTestReader(t, store, pc, 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None})
			const n = 256 << 10

			// Bounded only so that a read waiting for the whole part fails
			// the test rather than hangs it: the gate is still shut.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var seq prefetch.Sequence
			b, err := r.ReadAt(ctx, obj, make([]byte, n), 0, &seq) // starts the part's fetch
			if err != nil || !bytes.Equal(b, data[:n]) {
				t.Fatalf("read of the part's first bytes: %v, or wrong bytes", err)
			}
			// Of the fetch in flight: by reference, from its buffer.
			var seq2 prefetch.Sequence
			first, release, err := r.ReadAtRef(ctx, obj, make([]byte, n), n, &seq2)
			if err != nil || !bytes.Equal(first, data[n:2*n]) {
				t.Fatalf("read of the part's next bytes: %v, or wrong bytes", err)
			}
			if release == nil {
				t.Fatal("the read of a part in flight was copied, not lent")
			}
			kept := bytes.Clone(first)
			if got := r.Stats().EarlyReads.Load(); got != 2 {
				t.Errorf("EarlyReads %d, want 2", got)
			}

			done := goRead(func() ([]byte, error) {
				var seq prefetch.Sequence
				return r.ReadAt(context.Background(), obj, make([]byte, n), 1<<20-n, &seq)
			})
			waitFor(t, func() bool { return r.Stats().Joins.Load() == 2 }) // the lent read's, and this one's
			select {
			case res := <-done:
				t.Fatalf("a read of bytes not yet received returned: %v", res.err)
			case <-time.After(20 * time.Millisecond): // it may not return at all yet
			}
			close(store.gate)
			res := <-done
			read := func(off int64) {
				t.Helper()
				var seq prefetch.Sequence
				b, err := r.ReadAt(context.Background(), obj, make([]byte, n), off, &seq)
				if err != nil || !bytes.Equal(b, data[off:off+n]) {
					t.Fatalf("read at %d: %v, or wrong bytes", off, err)
				}
			}
			if !fail && (res.err != nil || !bytes.Equal(res.data, data[1<<20-n:1<<20])) {
				t.Fatalf("read of the part's last bytes: %v, or wrong bytes", res.err)
			}
			if fail {
				// A reader waiting on the failed fetch has its error, as
				// before; the next reads fetch again: another part first, whose
				// fetch would take the failed part's buffer if it had been
				// recycled under the reference still held.
				if res.err == nil {
					t.Fatal("the read waiting on the failed fetch returned no error")
				}
				read(1 << 20)
				read(1<<20 - n)
			}
			if !bytes.Equal(first, kept) {
				t.Error("the bytes served by reference changed before their release")
			}
			release()
			gets := mem.calls.Load()
			if !fail && gets != 1 {
				t.Errorf("%d GETs; want 1", gets)
			}
			if fail && gets != 3 {
				t.Errorf("%d GETs; want 3: the failed part, the next one, the failed one again", gets)
			}
		})
	}
}

// A split part fetch's ranges answer reads as each one ends, while the
// first range is still on its way.
func TestSplitPartReadServedAsEachRangeEnds(t *testing.T) {
	mem := newMemStore()
	data := randomBytes(43, 1<<20)
	obj := mem.put("big", data)
	store := &halfStore{memStore: mem, gate: make(chan struct{})}
	pc := openCacheAt(t, filepath.Join(t.TempDir(), "cache"))
	r := newTestReader(t, store, pc, 4, Config{Source: "test", PartSize: 1 << 20, Prefetch: prefetch.None, SplitSize: 256 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The first range, [0, 256 KiB), has its first half in, its second at
	// the gate; the other three ranges (plain ReadRange) end at once.
	var seq prefetch.Sequence
	b, err := r.ReadAt(ctx, obj, make([]byte, 128<<10), 0, &seq)
	if err != nil || !bytes.Equal(b, data[:128<<10]) {
		t.Fatalf("read of the first range's first half: %v, or wrong bytes", err)
	}
	if r.Stats().PartsSplit.Load() != 1 {
		t.Fatalf("the part was not split (%d splits): the test needs it", r.Stats().PartsSplit.Load())
	}
	var seq2 prefetch.Sequence
	b, err = r.ReadAt(ctx, obj, make([]byte, 256<<10), 768<<10, &seq2)
	if err != nil || !bytes.Equal(b, data[768<<10:]) {
		t.Fatalf("read of the last range, ended while the first is held: %v, or wrong bytes", err)
	}
	if got := r.Stats().EarlyReads.Load(); got != 2 {
		t.Errorf("EarlyReads %d, want 2", got)
	}
	close(store.gate)
}
