package restore

import (
	"context"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/reader"
)

// DiscardCache is the part cache of --no-cache: it stores every part into
// nothing. PutSummed succeeds, so that the engine treats a fetched part as
// it treats one the disk took: a sequential reader's stream holds it
// while within reach (a seekable zstd file's compressed parts fetched
// ahead), and otherwise it is let go once read. Refusing it
// (cache.ErrNoSpace) would hand it to the memory tier instead, which
// restore bounds to nothing, and a part fetched ahead would be fetched
// again. Nothing is ever found in it.
type DiscardCache struct{}

var _ reader.Cache = DiscardCache{}

func (DiscardCache) ReadAt(context.Context, cache.Key, []byte, int64) (int, bool, error) {
	return 0, false, nil
}
func (DiscardCache) NewSums([]byte) *cache.Sums { return nil }
func (DiscardCache) PutSummed(context.Context, cache.Key, []byte, *cache.Sums) error {
	return nil
}
func (DiscardCache) Contains(cache.Key) bool { return false }
func (DiscardCache) WillNeed(cache.Key)      {}
