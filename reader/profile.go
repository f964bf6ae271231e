package reader

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
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

// learner learns the open profile from an index's first reads
// (learn), and loads and stores it in the disk cache.
type learner struct {
	// Constant after newLearner.
	cache Cache
	cfg   Config
	stats *Stats
	first *atomic.Int64 // when the first directory was seen (rangeTier.first)

	mu     sync.Mutex
	p      prefetch.Profile
	grew   bool
	loaded bool // a stored profile was loaded: it is not written again
}

func newLearner(r *Reader) *learner {
	return &learner{cache: r.cache, cfg: r.cfg, stats: &r.stats, first: &r.rtier.first}
}

// ProfileObject is the object name of the open profile's record in the
// disk cache: with a NUL, which no object key the tree shows can hold.
const ProfileObject = "\x00open-profile"

func (l *learner) profileKey() cache.Key {
	return cache.Key{Source: l.cfg.Source, Object: ProfileObject, ETag: "1", PartSize: profileRecord, Index: 0}
}

// loadProfile returns the stored profile of the source, nil if none.
func (l *learner) loadProfile() *prefetch.Profile {
	k := l.profileKey()
	if !l.cache.Contains(k) {
		return nil
	}
	buf := make([]byte, profileRecord)
	if _, ok, err := l.cache.ReadAt(context.Background(), k, buf, 0); !ok || err != nil {
		l.cfg.Logger.Info("open profile not read; the built-in one stands", "err", err)
		return nil
	}
	n := binary.LittleEndian.Uint32(buf)
	if int64(n) > profileRecord-4 {
		l.cfg.Logger.Info("open profile damaged; the built-in one stands", "length", n)
		return nil
	}
	p, err := prefetch.UnmarshalProfile(buf[4:4+n], l.cfg.Source)
	if err != nil {
		l.cfg.Logger.Info("open profile ignored; the built-in one stands", "err", err)
		return nil
	}
	l.stats.ProfileLoaded.Store(1)
	return p
}

// learn records a read of h's file, if it belongs to an index directory
// and comes within ProfileWindow of the first one seen, and does not
// continue h's last read forward: a copy's reads each start where the
// one before ended, and teach nothing; an open's reads jump (header,
// footer, a metadata block).
func (l *learner) learn(h *Handle, off, n int64) {
	if !l.cfg.SegmentPrefetch || h.dir == nil {
		return
	}
	last := h.lastEnd.Swap(off + n)
	first := l.first.Load()
	if last == off || first == 0 || time.Now().UnixNano()-first > int64(ProfileWindow) || !h.dir.HoldsIndex() {
		return
	}
	l.mu.Lock()
	if !l.loaded && l.p.Record(h.entry.Name, h.entry.Size(), off, n) {
		l.grew = true
	}
	l.mu.Unlock()
}

// saveProfile stores what was learned, unless a profile was loaded or
// nothing was learned.
func (l *learner) saveProfile() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loaded || !l.grew {
		return
	}
	l.p.Source = l.cfg.Source
	data, err := prefetch.MarshalProfile(&l.p)
	if err != nil || len(data) > profileRecord-4 {
		return // an absurd number of extensions: nothing worth keeping
	}
	rec := make([]byte, profileRecord)
	binary.LittleEndian.PutUint32(rec, uint32(len(data)))
	copy(rec[4:], data)
	if err := l.cache.PutSummed(context.Background(), l.profileKey(), rec, nil); err != nil {
		l.cfg.Logger.Debug("open profile not stored", "err", err)
		return
	}
	l.grew = false
}
