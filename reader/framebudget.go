package reader

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"
)

// decodeBudget bounds the bytes that frame decodes hold at once
// (FrameConfig.DecodeBytes). A decode reserves its whole cost before it
// allocates anything and waits, in arrival order, while the reservations
// of others leave too little room. It may be used concurrently.
type decodeBudget struct {
	// Immutable after construction.
	size int64
	sem  *semaphore.Weighted

	stats *Stats // DecodeWaits, DecodeMemory and DecodeMemoryPeak

	mu         sync.Mutex
	held, peak int64 // guarded by mu
}

func newDecodeBudget(size int64, stats *Stats) *decodeBudget {
	return &decodeBudget{size: size, sem: semaphore.NewWeighted(size), stats: stats}
}

// acquire reserves n bytes, waiting until they are free or ctx is done.
// A reservation larger than the whole budget could never be granted and
// fails at once.
func (b *decodeBudget) acquire(ctx context.Context, n int64) error {
	if n > b.size {
		return fmt.Errorf("decode of %d bytes exceeds the whole decode budget of %d", n, b.size)
	}
	if !b.sem.TryAcquire(n) {
		b.stats.DecodeWaits.Add(1)
		if err := b.sem.Acquire(ctx, n); err != nil {
			return fmt.Errorf("waiting for %d bytes of decode budget: %w", n, err)
		}
	}
	b.mu.Lock()
	b.held += n
	b.peak = max(b.peak, b.held)
	b.stats.DecodeMemory.Store(b.held)
	b.stats.DecodeMemoryPeak.Store(b.peak)
	b.mu.Unlock()
	return nil
}

// release returns n bytes of earlier reservations.
func (b *decodeBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.held -= n
	b.stats.DecodeMemory.Store(b.held)
	b.mu.Unlock()
	b.sem.Release(n)
}
