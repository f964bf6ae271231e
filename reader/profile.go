package reader

import (
	"context"
	"encoding/binary"
	"sync"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/prefetch"
)

// Learned opens (prefetch/profile.go): for ProfileWindow after the first
// index directory is seen, every read of a file of such a directory
// widens the open profile; at Close the profile is stored in the disk
// cache, once per cache and source, as one checksummed record under a
// key of its own. New loads it, so the next mount of the source fetches
// by it. A record that is damaged (the cache's checksums), from another
// source or that does not parse is ignored with a log line. To learn
// again, clear the cache directory.

// ProfileWindow is how long after an index's first sight its reads are
// learned from: the time an open takes, not the searches after it.
const ProfileWindow = 10 * time.Second

// profileRecord is the size of the stored record: a length, then the
// profile's JSON, then zeros.
const profileRecord = 64 << 10

type learner struct {
	mu     sync.Mutex
	p      prefetch.Profile
	grew   bool
	loaded bool // a stored profile was loaded: it is not written again
}

// ProfileObject is the object name of the open profile's record in the
// disk cache: with a NUL, which no object key the tree shows can hold.
const ProfileObject = "\x00open-profile"

func (r *Reader) profileKey() cache.Key {
	return cache.Key{Source: r.cfg.Source, Object: ProfileObject, ETag: "1", PartSize: profileRecord, Index: 0}
}

// loadProfile returns the stored profile of the source, nil if none.
func (r *Reader) loadProfile() *prefetch.Profile {
	k := r.profileKey()
	if !r.cache.Contains(k) {
		return nil
	}
	buf := make([]byte, profileRecord)
	if _, ok, err := r.cache.ReadAt(context.Background(), k, buf, 0); !ok || err != nil {
		r.cfg.Logger.Info("open profile not read; the built-in one stands", "err", err)
		return nil
	}
	n := binary.LittleEndian.Uint32(buf)
	if int64(n) > profileRecord-4 {
		r.cfg.Logger.Info("open profile damaged; the built-in one stands", "length", n)
		return nil
	}
	p, err := prefetch.UnmarshalProfile(buf[4:4+n], r.cfg.Source)
	if err != nil {
		r.cfg.Logger.Info("open profile ignored; the built-in one stands", "err", err)
		return nil
	}
	r.stats.ProfileLoaded.Store(1)
	return p
}

// learn records a read of h's file, if it belongs to an index directory
// and comes within ProfileWindow of the first one seen, and does not
// continue h's last read forward: a copy's reads each start where the
// one before ended, and teach nothing; an open's reads jump (header,
// footer, a metadata block).
func (r *Reader) learn(h *Handle, off, n int64) {
	if !r.cfg.SegmentPrefetch || h.dir == nil {
		return
	}
	last := h.lastEnd.Swap(off + n)
	first := r.rtier.first.Load()
	if last == off || first == 0 || time.Now().UnixNano()-first > int64(ProfileWindow) || !h.dir.HoldsIndex() {
		return
	}
	l := &r.learned
	l.mu.Lock()
	if !l.loaded && l.p.Record(h.entry.Name, h.entry.Size(), off, n) {
		l.grew = true
	}
	l.mu.Unlock()
}

// saveProfile stores what was learned, unless a profile was loaded or
// nothing was learned.
func (r *Reader) saveProfile() {
	l := &r.learned
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loaded || !l.grew {
		return
	}
	l.p.Source = r.cfg.Source
	data, err := prefetch.MarshalProfile(&l.p)
	if err != nil || len(data) > profileRecord-4 {
		return // an absurd number of extensions: nothing worth keeping
	}
	rec := make([]byte, profileRecord)
	binary.LittleEndian.PutUint32(rec, uint32(len(data)))
	copy(rec[4:], data)
	if err := r.cache.PutSummed(context.Background(), r.profileKey(), rec, nil); err != nil {
		r.cfg.Logger.Debug("open profile not stored", "err", err)
		return
	}
	l.grew = false
}
