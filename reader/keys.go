package reader

import (
	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
)

// objKey names one version of one object: what fills, streams, the
// promoter and the Once set of the prefetch policies are keyed by.
type objKey struct {
	key  string
	etag string
}

// partKey names one part of one object version: what part calls, the
// memory tier and held parts are keyed by.
type partKey struct {
	obj objKey
	idx int64
}

func keyOfObject(obj fetcher.Object) objKey { return objKey{key: obj.Key, etag: obj.ETag} }

func keyOfPart(obj fetcher.Object, idx int64) partKey {
	return partKey{obj: keyOfObject(obj), idx: idx}
}

// cacheKey returns the disk cache's key of part k.
func (c Config) cacheKey(k partKey) cache.Key {
	return cache.Key{Source: c.Source, Object: k.obj.key, ETag: k.obj.etag, PartSize: c.PartSize, Index: k.idx}
}

// objectKey returns the disk cache's key of obj's whole-object file.
func (c Config) objectKey(obj fetcher.Object) cache.ObjectKey {
	return cache.ObjectKey{Source: c.Source, Object: obj.Key, ETag: obj.ETag, Size: obj.Size}
}

// partLen returns the length of part idx of obj.
func (c Config) partLen(obj fetcher.Object, idx int64) int64 {
	return min(c.PartSize, obj.Size-idx*c.PartSize)
}
