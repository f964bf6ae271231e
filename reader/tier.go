package reader

import (
	"context"
	"sync/atomic"
)

// Tier is where a read's bytes came from, for the read latency
// histograms: the slowest place any of its bytes came from.
type Tier int32

// The tiers, fastest first. A read of an inline entry, a decoded frame
// kept in memory or the range tier's memory counts as TierMemory; a read
// that waited on a fetch (its own, one in flight, or a GET of its range)
// as TierRemote, even if the fetch had started before it.
const (
	TierHeld   Tier = iota // a part held for a sequential reader, or a fetched part not yet stored
	TierMemory             // the memory tier, the range tier's memory, inline bytes, decoded frames
	TierDisk               // the disk cache (parts or range blocks)
	TierRemote             // the store
	numTiers
)

// tierKey is the context key of a read's *readTier.
type tierKey struct{}

// readTier collects the slowest tier a read touched; the parts of one
// read may be read in parallel (readSmallParts).
type readTier struct{ v atomic.Int32 }

func (t *readTier) raise(tier Tier) {
	for {
		cur := t.v.Load()
		if cur >= int32(tier) || t.v.CompareAndSwap(cur, int32(tier)) {
			return
		}
	}
}

func (t *readTier) get() Tier { return Tier(t.v.Load()) }

// withTier returns ctx carrying a fresh readTier for one read.
func withTier(ctx context.Context) (context.Context, *readTier) {
	t := &readTier{}
	return context.WithValue(ctx, tierKey{}, t), t
}

// markTier records that the read of ctx touched tier; a ctx without a
// readTier (a read that no histogram follows) records nothing.
func markTier(ctx context.Context, tier Tier) {
	if t, ok := ctx.Value(tierKey{}).(*readTier); ok {
		t.raise(tier)
	}
}

// waited reports whether done was not yet closed: a reader that then
// waits on it waits for the store.
func waited(done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (t Tier) String() string {
	switch t {
	case TierHeld:
		return "held"
	case TierMemory:
		return "memory"
	case TierDisk:
		return "disk"
	case TierRemote:
		return "remote"
	}
	return "unknown"
}
