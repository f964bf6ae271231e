package cache

import (
	"context"
	"unsafe"
)

// Sums are the checksums of the blocks of a part, computed while its
// bytes arrive, for PutSummed. A part fetched into memory and stored
// later is read twice otherwise: by the network's copy into the buffer
// and, seconds later and long out of the CPU's cache, by the checksums
// of Put, the costlier of the two passes. Summing each block as soon as it is whole reads it while the
// copy that filled it has left it in the cache.
//
// A Sums is used by one goroutine at a time.
type Sums struct {
	data      []byte
	blockSize int64
	done      int64  // bytes of data summed: whole blocks, or all of data
	crcs      []byte // appendBlockCRCs's encoding of data[:done]
}

// NewSums returns the Sums of a part that will be read into data.
func (c *Cache) NewSums(data []byte) *Sums {
	bs := c.cfg.blockSize
	return &Sums{data: data, blockSize: bs, crcs: make([]byte, 0, 4*blockCount(int64(len(data)), bs))}
}

// Filled records that data[:n] holds its final bytes, and sums every
// block that is now whole (the last, shorter block once n is the whole
// length). n below what was recorded before is ignored.
func (s *Sums) Filled(n int) {
	length := int64(len(s.data))
	end := min(int64(n), length)
	if end < length {
		end -= end % s.blockSize
	}
	if end <= s.done {
		return
	}
	s.crcs = appendBlockCRCs(s.crcs, s.data[s.done:end], s.blockSize)
	s.done = end
}

// complete reports whether s holds the checksums of every block of data.
func (s *Sums) complete(data []byte, blockSize int64) bool {
	return s != nil && s.blockSize == blockSize && len(s.data) == len(data) && len(data) > 0 &&
		unsafe.SliceData(s.data) == unsafe.SliceData(data) && s.done == int64(len(data))
}

// PutSummed is Put with checksums computed as the bytes arrived. If sums
// do not cover all of data (the read stopped reporting, or they belong to
// another buffer), PutSummed computes them itself as Put does. Bytes
// changed after they were summed are stored with checksums that do not
// match them, so a read finds the part damaged: it is never served.
func (c *Cache) PutSummed(ctx context.Context, k Key, data []byte, sums *Sums) error {
	if !sums.complete(data, c.cfg.blockSize) {
		sums = nil
	}
	return c.put(ctx, k, data, sums)
}
