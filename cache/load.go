package cache

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/segfs/segfs/dirfd"
	"golang.org/x/sys/unix"
)

// loadWorkers is how many goroutines stat part files at start. The walk
// is cheap per file (one fstatat) and mostly bound by syscalls; a few
// workers hide the latency of a cold directory.
const loadWorkers = 4

// found is a part file seen by the load.
type found struct {
	id    partID
	size  int64
	used  int64 // last use: max(atime, mtime), in ns
	whole bool  // a whole-object file with its seal
}

// load indexes the part files on disk: it stats them (it reads no
// header; ReadAt checks headers), then adds them to the index, least
// recently used at the back, skipping parts that ReadAt and Put indexed
// or removed meanwhile. Then it evicts to the bounds. It runs once, in
// its own goroutine, and closes c.loadDone when it returns.
func (c *Cache) load() {
	defer close(c.loadDone)
	if c.cfg.holdLoad != nil {
		select {
		case <-c.cfg.holdLoad:
		case <-c.ctx.Done():
			return
		}
	}
	start := time.Now()
	parts, orphans, strays, err := c.walk()
	if err != nil {
		c.cfg.Logger.Warn("cache: index load incomplete", "dir", c.dir, "err", err)
	}
	c.stats.strays.Store(strays)
	if c.ctx.Err() != nil {
		return
	}
	// Newest first, each pushed behind the ones before: the oldest ends
	// at the back of the LRU, behind every part used since Open.
	slices.SortFunc(parts, func(a, b found) int { return cmp.Compare(b.used, a.used) })
	const chunk = 4096 // bounds how long ReadAt waits for mu
	for i := 0; i < len(parts); i += chunk {
		c.mu.Lock()
		for _, f := range parts[i:min(i+chunk, len(parts))] {
			if !c.idx.mayIndex(f.id) {
				continue
			}
			if f.whole {
				c.idx.insertWhole(f.id, f.size, nil, false)
			} else {
				c.idx.insert(f.id, f.size, nil, false)
			}
		}
		if i+chunk >= len(parts) {
			c.finishLoadLocked(orphans)
		}
		c.mu.Unlock()
	}
	if len(parts) == 0 {
		c.mu.Lock()
		c.finishLoadLocked(orphans)
		c.mu.Unlock()
	}
	c.stats.loadedParts.Store(int64(len(parts)))
	c.stats.loadNanos.Store(int64(time.Since(start)))
	c.stats.indexLoaded.Store(true)
	st := c.Stats()
	c.cfg.Logger.Info("cache: index loaded", "dir", c.dir, "parts", st.Parts, "bytes", st.Bytes,
		"found", len(parts), "duration", st.IndexLoadTime)
	c.trim()
}

// finishLoadLocked marks the index loaded and removes the halves of
// whole-object files whose other half the walk did not find (a crash
// between writing a data file and its seal), unless a Promote has
// indexed or is writing that object since.
func (c *Cache) finishLoadLocked(orphans []partID) {
	for _, id := range orphans {
		_, present := c.idx.entries[id]
		_, busy := c.idx.busy[id]
		if !present && !busy {
			c.removeObjectFiles(id)
		}
	}
	c.idx.loaded = true
	c.idx.tomb = nil
}

// walk stats every part file and whole-object file in the fan-out
// directories.
func (c *Cache) walk() (parts []found, orphans []partID, strays int64, err error) {
	subs := make(chan int)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for range loadWorkers {
		wg.Go(func() {
			for sub := range subs {
				p, o, s, err := c.walkSub(sub)
				mu.Lock()
				parts = append(parts, p...)
				orphans = append(orphans, o...)
				strays += s
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range 256 {
		if c.ctx.Err() != nil {
			break
		}
		subs <- i
	}
	close(subs)
	wg.Wait()
	return parts, orphans, strays, errors.Join(errs...)
}

// walkSub stats the part files and whole-object files in one fan-out
// directory. A data file and its seal make one entry; a half without the
// other is an orphan. An entry named as one of them that is not a regular
// file (a symlink, say) is removed and counted; entries of other names
// are strays, left alone.
func (c *Cache) walkSub(slot int) (parts []found, orphans []partID, strays int64, err error) {
	sub := slotName(slot)
	dfd, err := c.dirs.dir(slot, false)
	if err == unix.ENOENT {
		return nil, nil, 0, nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%s: %w", filepath.Join(c.dir, sub), err)
	}
	names, err := dirfd.ReadNames(dfd)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%s: %w", filepath.Join(c.dir, sub), err)
	}
	objs := make(map[partID]found)
	seals := make(map[partID]int64)
	for _, name := range names {
		if c.ctx.Err() != nil {
			return parts, nil, strays, nil
		}
		id, ok := parsePartName(sub, name)
		obj, seal := false, false
		if !ok {
			if id, ok = parseName(sub, name, objSuffix); ok {
				obj = true
			} else if id, ok = parseName(sub, name, sealSuffix); ok {
				seal = true
			}
		}
		if !ok {
			strays++
			continue
		}
		var st unix.Stat_t
		if err := dirfd.Fstatat(dfd, name, &st); err != nil {
			continue // removed meanwhile
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			c.removeBadFile(id, "", dfd, name, &st, fmt.Errorf("%s, not a regular file", kind(st.Mode)))
			continue
		}
		f := found{id: id, size: st.Size, used: max(st.Atim.Nano(), st.Mtim.Nano())}
		switch {
		case obj:
			f.whole = true
			objs[id] = f
		case seal:
			seals[id] = st.Size
		default:
			parts = append(parts, f)
		}
	}
	for id, f := range objs {
		if n, ok := seals[id]; ok {
			f.size += n
			parts = append(parts, f)
			delete(seals, id)
		} else {
			orphans = append(orphans, id)
		}
	}
	for id := range seals {
		orphans = append(orphans, id)
	}
	return parts, orphans, strays, nil
}

// trim evicts to the bounds once the index is loaded: the parts found on
// disk may exceed a MaxBytes lowered since the last run.
func (c *Cache) trim() {
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-c.ctx.Done():
		return
	}
	var victims []victim
	c.mu.Lock()
	if limit := c.cfg.MaxBytes; limit > 0 {
		victims = c.idx.evict(func(int64) bool { return c.idx.used+c.idx.reserved <= limit })
	}
	c.mu.Unlock()
	c.removeVictims(victims)
	_ = c.keepFloor(0)
}
