package restore

import (
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"
)

// spaceRule is what a restore checks before it starts a file: that
// DEST_DIR's file system has room for the whole file beside what the
// files being written still lack, and beside the free space the part
// cache keeps there (--cache-min-free) when the cache is on the same
// file system. A file that does not fit fails at once, naming what it
// needs, instead of filling the disk until it and the files written
// beside it fail with ENOSPC.
type spaceRule struct {
	// keepBytes and keepFraction are the cache's --cache-min-free on
	// DEST_DIR's file system; zero when the cache is elsewhere or off.
	keepBytes    int64
	keepFraction float64
}

// keep is what the rule leaves free on a file system of total bytes.
func (s spaceRule) keep(total int64) int64 {
	return max(s.keepBytes, int64(s.keepFraction*float64(total)))
}

// newSpaceRule returns the rule for a restore into dd with the part
// cache cfg names.
func newSpaceRule(dd *destDir, cfg DestConfig, log *slog.Logger) spaceRule {
	if cfg.CacheDir == "" {
		return spaceRule{}
	}
	var dst, cst unix.Stat_t
	if unix.Fstat(dd.fd(), &dst) != nil || unix.Stat(cfg.CacheDir, &cst) != nil || dst.Dev != cst.Dev {
		return spaceRule{}
	}
	log.Debug("the part cache shares DEST_DIR's file system: its --cache-min-free is kept free", "cache", cfg.CacheDir)
	return spaceRule{keepBytes: cfg.CacheMinFreeBytes, keepFraction: cfg.CacheMinFreeFraction}
}

// reserve checks that f fits on DEST_DIR's file system (spaceRule) and
// counts its bytes as pending until they are written. f.mu is held; it
// takes r.mu (the lock order: a file's lock before the restorer's).
func (r *restorer) reserve(f *File) error {
	if f.size == 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(r.dd.fd(), &st); err != nil {
		return nil // no figure to check against: the writes find out
	}
	free := int64(st.Bavail) * st.Bsize
	keep := r.space.keep(int64(st.Blocks) * st.Bsize)
	r.mu.Lock()
	defer r.mu.Unlock()
	if f.size+r.pending+keep > free {
		msg := fmt.Sprintf("it needs %s and DEST_DIR's file system has %s free", mib(f.size), mib(free))
		if r.pending > 0 {
			msg += fmt.Sprintf(", of which %s are for the files being written now", mib(r.pending))
		}
		if keep > 0 {
			msg += fmt.Sprintf("; %s stay free for the part cache there (--cache-min-free)", mib(keep))
		}
		return fmt.Errorf("%w: %s", unix.ENOSPC, msg)
	}
	r.pending += f.size
	f.reserved = f.size
	return nil
}

// wrote counts n bytes of f as written: no longer pending.
func (r *restorer) wrote(f *File, n int) {
	r.mu.Lock()
	d := min(int64(n), f.reserved)
	f.reserved -= d
	r.pending -= d
	r.mu.Unlock()
}

// unreserve drops what f still had pending: it is done or given up.
func (r *restorer) unreserve(f *File) {
	r.mu.Lock()
	r.pending -= f.reserved
	f.reserved = 0
	r.mu.Unlock()
}

// mib is n bytes in MiB, for messages.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
