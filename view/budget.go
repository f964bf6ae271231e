package view

import (
	"context"
	"fmt"
	"sync/atomic"
)

// ResolveSlots bounds the shards a tree resolves at once. One
// resolution holds a shard's metadata file as read and decoded, which a
// hostile repository can make as large as the decoders allow
// (snapshot.MaxDecoded, layout.MaxMetadataDecoded): the memory bound
// counts that once a slot (Spec.ResolveMemory), not once a lookup in
// flight.
const ResolveSlots = 2

// shardBudget counts the shards a tree shows against
// Options.MaxShards, and holds the resolutions' slots.
type shardBudget struct {
	max   int64
	n     atomic.Int64
	slots chan struct{}
}

func newShardBudget(max int) *shardBudget {
	return &shardBudget{max: int64(max), slots: make(chan struct{}, ResolveSlots)}
}

// resolve runs fn in one of the ResolveSlots, waiting for one as long
// as ctx allows.
func (b *shardBudget) resolve(ctx context.Context, fn func() error) error {
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting to resolve a shard: %w", ctx.Err())
	}
	defer func() { <-b.slots }()
	return fn()
}

// resolveShard counts one more shard shown, or refuses it, and resolves
// it in a slot (resolve); a shard that does not resolve is not counted.
func (b *shardBudget) resolveShard(ctx context.Context, fn func() error) error {
	if b.n.Add(1) > b.max {
		b.n.Add(-1)
		return fmt.Errorf("--max-shards %d: that many shards are shown already", b.max)
	}
	err := b.resolve(ctx, fn)
	if err != nil {
		b.n.Add(-1)
	}
	return err
}
