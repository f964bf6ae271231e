package view

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var discard = slog.New(slog.DiscardHandler)

// Callers at once share one resolution; once resolved, none runs
// again, and a relist is refused until RelistEvery has passed.
func TestDirStateOneResolution(t *testing.T) {
	var st DirState
	var calls atomic.Int64
	release := make(chan struct{})
	fn := func(context.Context) error { calls.Add(1); <-release; return nil }
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := st.Resolve(context.Background(), discard, "d/", true, false, fn); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if calls.Load() != 1 || !st.Ready() {
		t.Fatalf("%d resolutions for 8 callers, ready %v; want 1, true", calls.Load(), st.Ready())
	}
	if err := st.Resolve(context.Background(), discard, "d/", true, true, fn); err != nil || calls.Load() != 1 {
		t.Errorf("a relist within RelistEvery: %v, %d resolutions; want none", err, calls.Load())
	}
	st.Relisted()
	if err := st.Resolve(context.Background(), discard, "d/", true, true, fn); err != nil || calls.Load() != 2 {
		t.Errorf("a relist after RelistEvery: %v, %d resolutions; want a second", err, calls.Load())
	}
}

// A first failure is answered without a remote call until RetryAfter; a
// failed relisting of a directory shown keeps it ready.
func TestDirStateFailures(t *testing.T) {
	var st DirState
	boom := errors.New("store down")
	var calls atomic.Int64
	fail := func(context.Context) error { calls.Add(1); return boom }
	for range 3 {
		if err := st.Resolve(context.Background(), discard, "d/", true, false, fail); !errors.Is(err, boom) {
			t.Fatalf("err %v, want the store's", err)
		}
	}
	if calls.Load() != 1 || st.Ready() {
		t.Errorf("%d calls for 3 uses within RetryAfter, ready %v; want 1, false", calls.Load(), st.Ready())
	}
	st.at = time.Now().Add(-RetryAfter) // the retry is due
	ok := func(context.Context) error { calls.Add(1); return nil }
	if err := st.Resolve(context.Background(), discard, "d/", true, false, ok); err != nil || !st.Ready() {
		t.Fatalf("after RetryAfter: %v, ready %v", err, st.Ready())
	}
	st.Invalidate()
	if err := st.Resolve(context.Background(), discard, "d/", true, false, fail); err != nil || !st.Ready() {
		t.Errorf("a failed relisting of a directory shown: %v, ready %v; want it kept", err, st.Ready())
	}
}

// An Invalidate during a resolution leaves the directory to list again;
// the resolution's context outlives its caller's.
func TestDirStateInvalidatedMeanwhile(t *testing.T) {
	var st DirState
	ctx, cancel := context.WithCancel(context.Background())
	err := st.Resolve(ctx, discard, "", true, false, func(rctx context.Context) error {
		cancel()
		st.Invalidate()
		if rctx.Err() != nil {
			return errors.New("the resolution was cancelled with its caller")
		}
		return nil
	})
	if err != nil || st.Ready() {
		t.Errorf("err %v, ready %v; want nil, not ready", err, st.Ready())
	}
}
