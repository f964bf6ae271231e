package view

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/segfs/segfs/fetcher"
)

// partsStore is a store in which some keys name a file the repository
// stored in parts: the key (the file's blob name, which no object has)
// reads as the parts joined in order. Every other key is the inner
// store's. A joined object's ETag is a digest of its parts' keys and
// ETags, so a changed part changes the file's identity (and the disk
// cache's key), and each part is read with its own ETag, so a part
// replaced under a mount fails the read with ErrChanged as any object's
// would.
type partsStore struct {
	fetcher.Store
	mu     sync.RWMutex
	joined map[string][]fetcher.Object // blob name -> its parts, in order
}

// newPartsStore returns inner with the files in joined readable under
// their blob names. Each file's parts must be non-empty (but the last)
// and in order.
func newPartsStore(inner fetcher.Store, joined map[string][]fetcher.Object) *partsStore {
	return &partsStore{Store: inner, joined: joined}
}

// PartsStore is a store that shows files stored in parts as one object
// each, for a mount that adds them as it resolves shards (a snapshot
// repository's); a single shard's store does so itself (Resolve).
type PartsStore struct{ *partsStore }

// NewPartsStore returns inner with no joined files yet.
func NewPartsStore(inner fetcher.Store) PartsStore {
	return PartsStore{newPartsStore(inner, map[string][]fetcher.Object{})}
}

// Add makes key read as parts joined, in order, and returns the object
// it reads as.
func (s PartsStore) Add(key string, parts []fetcher.Object) fetcher.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.joined[key] = parts
	return joinParts(key, parts)
}

// Unwrap returns the store below (fetcher.CacheSource names its source).
func (s *partsStore) Unwrap() fetcher.Store { return s.Store }

// partsOf returns the parts of key, if it is a joined file.
func (s *partsStore) partsOf(key string) ([]fetcher.Object, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	parts, ok := s.joined[key]
	return parts, ok
}

// joinParts returns the object a file stored as parts reads as.
func joinParts(key string, parts []fetcher.Object) fetcher.Object {
	h := sha256.New()
	var size int64
	var mod time.Time
	for _, p := range parts {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00", p.Key, p.ETag, p.Size)
		size += p.Size
		if p.ModTime.After(mod) {
			mod = p.ModTime
		}
	}
	return fetcher.Object{Key: key, Size: size, ETag: `"parts-` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`, ModTime: mod}
}

// Stat returns a joined file's object from its parts' current
// identities (a HEAD each), or the inner store's object.
func (s *partsStore) Stat(ctx context.Context, key string) (fetcher.Object, error) {
	parts, ok := s.partsOf(key)
	if !ok {
		return s.Store.Stat(ctx, key)
	}
	now := make([]fetcher.Object, len(parts))
	for i, p := range parts {
		o, err := s.Store.Stat(ctx, p.Key)
		if err != nil {
			return fetcher.Object{}, fmt.Errorf("part %d of %s: %w", i, key, err)
		}
		now[i] = o
	}
	return joinParts(key, now), nil
}

// ReadRange reads a joined file's bytes from the parts they fall in, in
// order, each with the ETag the mount listed.
func (s *partsStore) ReadRange(ctx context.Context, obj fetcher.Object, off int64, p []byte) error {
	return s.ReadRangeProgress(ctx, obj, off, p, nil)
}

// ReadRangeProgress is ReadRange telling progress as each part's bytes
// are final (fetcher.ReadRangeProgress).
func (s *partsStore) ReadRangeProgress(ctx context.Context, obj fetcher.Object, off int64, p []byte, progress func(filled int)) error {
	parts, ok := s.partsOf(obj.Key)
	if !ok {
		return fetcher.ReadRangeProgress(ctx, s.Store, obj, off, p, progress)
	}
	if want := joinParts(obj.Key, parts); obj.ETag != want.ETag {
		return fmt.Errorf("%s: %w", obj.Key, fetcher.ErrChanged)
	}
	if off < 0 || off+int64(len(p)) > obj.Size {
		return fmt.Errorf("%s: range [%d, %d) outside its %d bytes", obj.Key, off, off+int64(len(p)), obj.Size)
	}
	done := 0
	var start int64 // the first byte of parts[i] in the file
	for i, part := range parts {
		end := start + part.Size
		if done == len(p) {
			break
		}
		at := off + int64(done)
		if at >= end {
			start = end
			continue
		}
		n := int(min(end-at, int64(len(p)-done)))
		base := done
		var pr func(int)
		if progress != nil {
			pr = func(filled int) { progress(base + filled) }
		}
		if err := fetcher.ReadRangeProgress(ctx, s.Store, part, at-start, p[done:done+n], pr); err != nil {
			return fmt.Errorf("part %d of %s: %w", i, obj.Key, err)
		}
		done += n
		start = end
	}
	return nil
}
