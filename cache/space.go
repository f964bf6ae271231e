package cache

import (
	"fmt"
	"syscall"
)

// space is what statfs tells about the cache's file system.
type space struct {
	avail int64 // bytes an unprivileged user may still allocate
	total int64 // the file system's size in bytes
}

func statfs(dir string) (space, error) {
	var st syscall.Statfs_t
	for {
		err := syscall.Statfs(dir, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return space{}, fmt.Errorf("statfs %s: %w", dir, err)
		}
		break
	}
	unit := st.Frsize
	if unit <= 0 {
		unit = st.Bsize
	}
	return space{avail: int64(st.Bavail) * unit, total: int64(st.Blocks) * unit}, nil
}

// floor returns the free-space floor in bytes, or -1 if there is none.
func (c *Cache) floor(sp space) int64 {
	switch {
	case c.cfg.MinFree < 0:
		return -1
	case c.cfg.MinFree > 0:
		return c.cfg.MinFree
	default:
		return int64(float64(sp.total) * c.cfg.MinFreeFraction)
	}
}

// shortfall returns how many bytes must be freed so that writing size more
// bytes leaves the free-space floor intact, counting the bytes other Puts
// have reserved as if they were already written (a safe overestimate).
// It returns 0 if nothing need be freed or the file system cannot be
// asked. It requires c.mu.
func (c *Cache) shortfallLocked(sp space, size int64) int64 {
	f := c.floor(sp)
	if f < 0 {
		return 0
	}
	others := c.idx.reserved - size
	return max(0, f+size+others-sp.avail)
}
