package reader

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/prefetch"
)

// Learned opens (prefetch/profile.go): for ProfileWindow after an index
// directory is first seen, every read of a file of it widens the open
// profile, which the segment policy reads live: the next index
// directory the mount sees is fetched by what the first one taught. At
// Close a profile that grew is stored in the disk cache, one per cache
// directory whatever the source, as one checksummed record under a key
// of its own; New loads it, so the next mount with that cache starts
// from it. A record that is damaged (the cache's checksums), of another
// version or that does not parse is ignored with a log line. To learn
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
	p     *prefetch.Profile // loaded, or empty; the segment policy's

	grew atomic.Bool // p grew since it was loaded or stored
}

func newLearner(r *Reader) *learner {
	return &learner{cache: r.cache, cfg: r.cfg, stats: &r.stats, p: &prefetch.Profile{}}
}

// ProfileObject is the object name of the open profile's record in the
// disk cache: with a NUL, which no object key the tree shows can hold.
const ProfileObject = "\x00open-profile"

// profileSource is the source of the profile's key: one per cache
// directory, whatever the mount's source.
const profileSource = "\x00node"

func (l *learner) profileKey() cache.Key {
	return cache.Key{Source: profileSource, Object: ProfileObject, ETag: "2", PartSize: profileRecord, Index: 0}
}

// loadProfile makes the stored profile the one learned into, if the
// cache holds one, and returns the profile.
func (l *learner) loadProfile() *prefetch.Profile {
	if p := l.readProfile(); p != nil {
		l.p = p
		l.stats.ProfileLoaded.Store(1)
	}
	return l.p
}

// readProfile returns the stored profile, nil if none or unreadable.
func (l *learner) readProfile() *prefetch.Profile {
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
	p, err := prefetch.UnmarshalProfile(buf[4 : 4+n])
	if err != nil {
		l.cfg.Logger.Info("open profile ignored; the built-in one stands", "err", err)
		return nil
	}
	return p
}

// learn records a read of h's file, if it belongs to an index directory
// and comes within ProfileWindow of that directory's first sight, and does not
// continue h's last read forward: a copy's reads each start where the
// one before ended, and teach nothing; an open's reads jump (header,
// footer, a metadata block).
func (l *learner) learn(h *Handle, off, n int64) {
	if !l.cfg.SegmentPrefetch || h.dir == nil {
		return
	}
	last := h.lastEnd.Swap(off + n)
	seen := h.dir.SeenAt()
	if last == off || seen == 0 || time.Now().UnixNano()-seen > int64(ProfileWindow) || !h.dir.HoldsIndex() {
		return
	}
	if l.p.Record(h.entry.Name, h.entry.Size(), off, n) {
		l.grew.Store(true)
	}
}

// saveProfile stores the profile if it grew, widened by what the cache
// holds now.
func (l *learner) saveProfile() {
	if !l.grew.Swap(false) {
		return
	}
	l.p.Merge(l.readProfile())
	data, err := prefetch.MarshalProfile(l.p)
	if err != nil || len(data) > profileRecord-4 {
		return // an absurd number of extensions: nothing worth keeping
	}
	rec := make([]byte, profileRecord)
	binary.LittleEndian.PutUint32(rec, uint32(len(data)))
	copy(rec[4:], data)
	if err := l.cache.PutSummed(context.Background(), l.profileKey(), rec, nil); err != nil {
		l.cfg.Logger.Debug("open profile not stored", "err", err)
	}
}
