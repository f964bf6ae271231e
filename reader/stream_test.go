package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/prefetch"
)

// A sequential reader slower than its fetches reads the parts fetched
// ahead of it from memory, not back from the disk cache, and the parts
// held for it stay within MaxReadahead+1 parts.
func TestStreamReadsHeldParts(t *testing.T) {
	const ps = streamPart
	store, data, obj, r := newStreamTest(t, 21, 32)
	var seq prefetch.Sequence
	readSequentially(t, r, obj, data, &seq, obj.Size, ps/4, func(off int64) {
		if st := r.Stats(); st.HeldBytes.Load() > 4*ps {
			t.Fatalf("at %d: %d bytes held, over the bound of 4 parts", off, st.HeldBytes.Load())
		}
	})
	st := r.Stats()
	if st.DiskHits.Load() != 0 || st.HeldHits.Load() == 0 {
		t.Fatalf("stream read %d times from disk and %d from held parts; want 0 and some", st.DiskHits.Load(), st.HeldHits.Load())
	}
	if n := store.calls.Load(); n != 32 {
		t.Fatalf("%d remote reads for 32 parts", n)
	}
	r.cursors.endStream(obj, &seq)
	if st := r.Stats(); st.HeldBytes.Load() != 0 {
		t.Fatalf("%d bytes still held after the stream ended", st.HeldBytes.Load())
	}
}

// A stream takes back its object's queued background fill past the reach
// of its readahead, and the fill is queued again when the stream ends:
// every part is still fetched, each once.
func TestStreamPausesFillAndRefills(t *testing.T) {
	for _, end := range []string{"release", "seek"} {
		t.Run(end, func(t *testing.T) {
			store := newMemStore()
			// Parts large enough that a read 20 parts on is not
			// within seqSlack of the stream: a seek.
			const ps, parts = 512 << 10, 32
			data := randomBytes(22, parts*ps)
			obj := store.put("f", data)
			gate := make(chan struct{})
			store.gate = gate
			pc := newFakeCache()
			r := newTestReader(t, store, pc, 2, Config{PartSize: ps, Prefetch: prefetch.Open, MaxReadahead: 2})
			prefetchOpen(r, obj) // what an open does

			var seq prefetch.Sequence
			done := make(chan error, 1)
			go func() {
				got, err := r.ReadAt(context.Background(), obj, make([]byte, ps/4), 0, &seq)
				if err == nil && !bytes.Equal(got, data[:ps/4]) {
					err = errors.New("wrong bytes")
				}
				done <- err
			}()
			waitFor(t, func() bool { return r.Stats().FillPaused.Load() > 0 })
			// The reader waits on part 0, now demand work; parts 1 and 2,
			// within the readahead's reach, are raised to readahead, and
			// part 1 takes the worker that part 0 left to non-demand work.
			var sst prefetch.Stats
			deadline := time.Now().Add(30 * time.Second) // hang guard only
			for {
				sst = r.sched.Stats()
				d, ra, bg := prefetch.Demand, prefetch.Readahead, prefetch.Background
				if sst.Running[d] == 1 && sst.Running[ra] == 1 && sst.Running[bg] == 0 &&
					sst.Queued[d] == 0 && sst.Queued[ra] == 1 && sst.Queued[bg] == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("running %v queued %v (by priority, background first); want 1 demand and 1 readahead running, 1 readahead queued", sst.Running, sst.Queued)
				}
				time.Sleep(time.Millisecond)
			}
			close(gate)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// Parts 1 and 2 are within the readahead's reach and are
			// not taken back, nor is the running fetch of part 0.
			if got := r.Stats().FillPaused.Load(); got != parts-3 {
				t.Fatalf("%d background fetches taken back, want %d", got, parts-3)
			}

			switch end {
			case "release":
				r.cursors.endStream(obj, &seq)
			case "seek":
				if _, err := r.ReadAt(context.Background(), obj, make([]byte, 10), 20*ps, &seq); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, allCached(r, pc, obj, parts))
			if n, ranges := store.calls.Load(), r.Stats().RangeReads.Load(); n != parts+ranges {
				t.Fatalf("%d remote reads for %d parts and %d range reads", n, parts, ranges)
			}
		})
	}
}

// Only the handle that started following an object moves or ends its
// stream: a random reader of the same object leaves it be.
func TestOtherReaderDoesNotEndStream(t *testing.T) {
	const ps = streamPart
	_, data, obj, r := newStreamTest(t, 23, 16)
	var seq, other prefetch.Sequence
	readSequentially(t, r, obj, data, &seq, 4*ps, ps/4, nil)
	waitFor(t, func() bool { return r.Stats().HeldBytes.Load() > 0 })
	for _, off := range []int64{12 * ps, 100, 9 * ps} {
		if _, err := r.ReadAt(context.Background(), obj, make([]byte, 10), off, &other); err != nil {
			t.Fatal(err)
		}
	}
	if r.Stats().HeldBytes.Load() == 0 {
		t.Fatal("another handle's random reads ended the stream")
	}
	r.cursors.endStream(obj, &other)
	if r.Stats().HeldBytes.Load() == 0 {
		t.Fatal("another handle's release ended the stream")
	}
	r.cursors.endStream(obj, &seq)
	if st := r.Stats(); st.HeldBytes.Load() != 0 {
		t.Fatalf("%d bytes held after the owner's release", st.HeldBytes.Load())
	}
}

// readSequentially reads obj from its start to end in reads of size bytes
// through seq, checks each against data, and calls after (if not nil)
// with each read's offset.
func readSequentially(t *testing.T, r *Reader, obj fetcher.Object, data []byte, seq *prefetch.Sequence, end, size int64, after func(off int64)) {
	t.Helper()
	for off := int64(0); off < end; off += size {
		got, err := r.ReadAt(context.Background(), obj, make([]byte, size), off, seq)
		if err != nil || !bytes.Equal(got, data[off:off+size]) {
			t.Fatalf("read at %d: %v", off, err)
		}
		if after != nil {
			after(off)
		}
	}
}

// streamPart is the part size of newStreamTest's Reader.
const streamPart = 1024

// newStreamTest returns a store holding one object of parts parts of
// seeded random bytes, and a Reader over it without prefetch whose
// readahead reaches 3 parts, so that its streams hold at most 4.
func newStreamTest(t *testing.T, seed uint64, parts int) (*memStore, []byte, fetcher.Object, *Reader) {
	t.Helper()
	store := newMemStore()
	data := randomBytes(seed, parts*streamPart)
	obj := store.put("f", data)
	r := newTestReader(t, store, newFakeCache(), 4, Config{PartSize: streamPart, Prefetch: prefetch.None, MaxReadahead: 3})
	return store, data, obj, r
}

// ReadAtRef serves a stream's reads from its held parts' buffers, not
// copies, and a borrowed buffer is not recycled, though its part is
// dropped and later parts are fetched into the pool's buffers, until
// its reply gives it back.
func TestReadAtRefLendsHeldParts(t *testing.T) {
	const ps = streamPart
	_, data, obj, r := newStreamTest(t, 24, 32)
	var seq prefetch.Sequence
	type loan struct {
		off     int64
		got     []byte
		release func()
	}
	var loans []loan
	lent := 0
	for off := int64(0); off < obj.Size; off += ps / 2 {
		dest := make([]byte, ps/2)
		got, release, err := r.ReadAtRef(context.Background(), obj, dest, off, &seq)
		if err != nil || !bytes.Equal(got, data[off:off+ps/2]) {
			t.Fatalf("read at %d: %v", off, err)
		}
		if release == nil {
			continue // copied into dest: the stream's first reads, before it holds parts
		}
		if &got[0] == &dest[0] {
			t.Fatalf("read at %d: lent bytes are dest", off)
		}
		lent++
		// Keep the first two loans past the end of the stream; give
		// the others back at once.
		if len(loans) < 2 {
			loans = append(loans, loan{off, got, release})
		} else {
			release()
		}
	}
	if lent < 32 {
		t.Fatalf("%d of 64 reads lent a part's bytes; want most", lent)
	}
	if len(loans) < 2 {
		t.Fatal("no loans kept")
	}
	// The parts of the kept loans were dropped 30 parts ago, and fetches
	// took buffers from the pool since: the loans still read the same.
	for _, l := range loans {
		if !bytes.Equal(l.got, data[l.off:l.off+ps/2]) {
			t.Fatalf("lent bytes at %d changed before they were given back", l.off)
		}
		l.release()
	}
	r.cursors.endStream(obj, &seq)
	if st := r.Stats(); st.HeldBytes.Load() != 0 || st.HeldHits.Load()+st.Joins.Load() < int64(lent) {
		t.Fatalf("held bytes %d after the stream ended, held hits %d and joins %d; want 0 and at least %d in all", st.HeldBytes.Load(), st.HeldHits.Load(), st.Joins.Load(), lent)
	}
}

// A handle that read part of an object sequentially and then stops,
// still open, is no longer followed after StreamIdle: its held parts go,
// and the fill taken back for it is queued again, so every part gets
// fetched without the handle being closed or moved.
func TestIdleStreamRefills(t *testing.T) {
	const ps, parts = streamPart, 24
	store := newMemStore()
	data := randomBytes(25, parts*ps)
	obj := store.put("f", data)
	pc := newFakeCache()
	r := newTestReader(t, store, pc, 2, Config{PartSize: ps, Prefetch: prefetch.Open, MaxReadahead: 2, StreamIdle: 20 * time.Millisecond})
	gate := make(chan struct{})
	store.gate = gate    // no fetch ends before the stream has paused the fill
	prefetchOpen(r, obj) // what an open does
	var seq prefetch.Sequence
	done := make(chan error, 1)
	go func() {
		for off := int64(0); off < 2*ps; off += ps / 2 {
			got, err := r.ReadAt(context.Background(), obj, make([]byte, ps/2), off, &seq)
			if err == nil && !bytes.Equal(got, data[off:off+ps/2]) {
				err = fmt.Errorf("read at %d: wrong bytes", off)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	waitFor(t, func() bool { return r.Stats().FillPaused.Load() > 0 })
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, allCached(r, pc, obj, parts))
	st := r.Stats()
	if st.IdleStreams.Load() != 1 || st.HeldBytes.Load() != 0 {
		t.Fatalf("idle streams %d, held bytes %d; want 1 and 0", st.IdleStreams.Load(), st.HeldBytes.Load())
	}
	// The handle reads on: it is followed again, and its bytes are right.
	readSequentially(t, r, obj, data, &seq, int64(parts)*ps, ps/2, nil)
}

// allCached reports whether pc holds every one of the parts of obj.
func allCached(r *Reader, pc Cache, obj fetcher.Object, parts int) func() bool {
	return func() bool {
		for i := range int64(parts) {
			if !pc.Contains(r.cfg.cacheKey(keyOfPart(obj, i))) {
				return false
			}
		}
		return true
	}
}
