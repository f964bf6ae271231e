package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/segfs/segfs/dirfd"
	"golang.org/x/sys/unix"
)

// Put stores data as the part named by k. len(data) must be between 1
// and k.PartSize. Put does not retain data.
//
// The part becomes visible atomically: it is written to a temporary file
// that is renamed into place, so a crash leaves either no part or a whole
// one (a file torn by a power loss is caught by its checksums on read).
// Before writing, Put evicts least recently used parts so that the bytes
// on disk stay within MaxBytes and the free space above the floor; if
// that cannot be done, or the file system is full (ENOSPC, EDQUOT), the
// part is not cached and Put returns an error wrapping ErrNoSpace, with
// no temporary file left behind.
//
// Put of a part that is already cached, or that another Put is writing
// now, returns nil at once. Put blocks while MaxWriters Puts are writing;
// ctx bounds only that wait. After Close it returns ErrClosed.
func (c *Cache) Put(ctx context.Context, k Key, data []byte) error {
	return c.put(ctx, k, data, nil)
}

// put is Put, with the blocks' checksums from sums unless it is nil.
func (c *Cache) put(ctx context.Context, k Key, data []byte, sums *Sums) error {
	if err := k.validate(); err != nil {
		return fmt.Errorf("cache put: %w", err)
	}
	if len(data) == 0 || int64(len(data)) > k.PartSize {
		return fmt.Errorf("cache put %s: %d bytes for part size %d: %w", k, len(data), k.PartSize, errBadKey)
	}
	if !c.begin() {
		return fmt.Errorf("cache put %s: %w", k, ErrClosed)
	}
	defer c.ops.Done()

	if c.hasWholeFor(k) {
		return nil // its object's whole-object file holds it
	}
	id := k.id()
	claimed, loaded := c.claim(id)
	if !claimed {
		return nil
	}
	defer c.release(id)
	if !loaded && c.adopt(id, k) {
		return nil
	}
	var hdr []byte // checksums: CPU work, outside the slot
	if sums != nil {
		hdr = encodeHeaderSums(k, int64(len(data)), c.cfg.blockSize, sums.crcs)
	} else {
		hdr = encodeHeader(k, data, c.cfg.blockSize)
	}
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return fmt.Errorf("cache put %s: %w", k, ctx.Err())
	case <-c.ctx.Done():
		return fmt.Errorf("cache put %s: %w", k, ErrClosed)
	}
	return c.store(id, k, hdr, data)
}

// claim marks a part busy for a Put, unless it is indexed or busy
// already. It also reports whether the index is loaded.
func (c *Cache) claim(id partID) (claimed, loaded bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, present := c.idx.entries[id]
	_, busy := c.idx.busy[id]
	if present || busy {
		return false, c.idx.loaded
	}
	c.idx.busy[id] = struct{}{}
	return true, c.idx.loaded
}

// adopt indexes the part's file if it is on disk, not yet indexed by the
// load, and reports whether it did. Anything but a regular file there is
// not adopted: the Put's rename replaces it.
func (c *Cache) adopt(id partID, k Key) bool {
	dfd, err := c.dirs.dir(id.slot(), false)
	if err != nil {
		return false
	}
	var st unix.Stat_t
	if dirfd.Fstatat(dfd, id.name(partSuffix), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dead := c.idx.tomb[id]; !dead {
		c.idx.insert(id, st.Size, &k, true)
	}
	return true
}

// store writes a claimed part, holding a writer slot.
func (c *Cache) store(id partID, k Key, hdr, data []byte) error {
	size := int64(len(hdr) + len(data))
	if err := c.reserve(size); err != nil {
		return fmt.Errorf("cache put %s: %w", k, err)
	}
	err := c.write(id, hdr, data)
	c.mu.Lock()
	c.idx.reserved -= size
	if err == nil {
		c.idx.insert(id, size, &k, true) // claimed: nobody else indexed it
	}
	c.mu.Unlock()

	switch {
	case err == nil:
		c.stats.puts.Add(1)
		c.stats.putBytes.Add(size)
		return nil
	case errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT):
		c.stats.noSpace.Add(1)
		// Make room for later Puts: the floor did not foresee this (a
		// quota, or another writer on the file system).
		c.evictBytes(size)
		return fmt.Errorf("cache put %s: %w: %w", k, ErrNoSpace, err)
	default:
		c.stats.putErrors.Add(1)
		c.cfg.Logger.Warn("cache: cannot write part", "part", k.String(), "err", err)
		return fmt.Errorf("cache put %s: %w", k, err)
	}
}

// release clears a busy mark set by Put.
func (c *Cache) release(id partID) {
	c.mu.Lock()
	delete(c.idx.busy, id)
	c.mu.Unlock()
}

// write writes header and data to a new temporary file and renames it
// into place. On error the temporary file is removed.
func (c *Cache) write(id partID, hdr, data []byte) (err error) {
	tmp := c.tempName(id)
	f, tfd, err := c.createTemp(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			unix.Unlinkat(tfd, tmp, 0)
		}
	}()
	_, err = f.Write(hdr)
	if err == nil {
		err = c.writeData(f, int64(len(hdr)), data)
	}
	// No fsync: see doc.go. Close still reports delayed write errors.
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return c.renameInto(tfd, tmp, id.slot(), id.name(partSuffix))
}

// reserve reserves size bytes for a part about to be written, first
// evicting parts so that MaxBytes and the free-space floor will hold with
// it written. On success the caller must give the reservation back.
func (c *Cache) reserve(size int64) error {
	var victims []victim
	limit := c.cfg.MaxBytes
	c.mu.Lock()
	if limit > 0 {
		// Every indexed part can be evicted, pinned or not; Puts in
		// progress cannot.
		if others := c.idx.reserved; others+size > limit {
			c.mu.Unlock()
			c.stats.boundSkips.Add(1)
			return fmt.Errorf("%d bytes do not fit within the cache size %d (%d being written): %w", size, limit, others, ErrNoSpace)
		}
		victims = c.idx.evict(func(int64) bool { return c.idx.used+c.idx.reserved+size <= limit })
	}
	c.idx.reserved += size
	c.mu.Unlock()
	c.removeVictims(victims)

	if err := c.keepFloor(size); err != nil {
		c.mu.Lock()
		c.idx.reserved -= size
		c.mu.Unlock()
		c.stats.noSpace.Add(1)
		return err
	}
	return nil
}

// keepFloor evicts parts until writing size bytes (already reserved)
// leaves the free space at or above the floor. If statfs fails, the floor
// is not enforced for this Put and the failure is logged.
func (c *Cache) keepFloor(size int64) error {
	for attempt := 0; ; attempt++ {
		sp, err := c.cfg.statfs(c.dir)
		if err != nil {
			c.cfg.Logger.Warn("cache: cannot check free space", "err", err)
			return nil
		}
		c.mu.Lock()
		need := c.shortfallLocked(sp, size)
		var victims []victim
		if need > 0 && attempt < 4 {
			victims = c.idx.evict(func(freed int64) bool { return freed >= need })
		}
		c.mu.Unlock()
		if need == 0 {
			return nil
		}
		if len(victims) == 0 {
			return fmt.Errorf("%d bytes free, %d needed to keep the floor of %d: %w", sp.avail, need, c.floor(sp), ErrNoSpace)
		}
		c.removeVictims(victims)
	}
}

// evictBytes evicts least recently used parts of at least n bytes.
func (c *Cache) evictBytes(n int64) {
	c.mu.Lock()
	victims := c.idx.evict(func(freed int64) bool { return freed >= n })
	c.mu.Unlock()
	c.removeVictims(victims)
}

// removeVictims removes the files of parts evict took from the index and
// clears their busy marks.
func (c *Cache) removeVictims(victims []victim) {
	for _, v := range victims {
		if v.whole {
			c.removeObjectFiles(v.id)
		} else if err := c.removeFile(v.id.slot(), v.id.name(partSuffix)); err != nil {
			c.cfg.Logger.Warn("cache: cannot remove evicted part", "file", v.id.path(c.dir), "err", err)
		}
		c.stats.evictions.Add(1)
		c.stats.evictedBytes.Add(v.size)
	}
	if len(victims) == 0 {
		return
	}
	c.mu.Lock()
	for _, v := range victims {
		delete(c.idx.busy, v.id)
	}
	c.mu.Unlock()
}

// removeFile removes the file name of fan-out directory slot (a
// directory there only if it is empty). A file already gone is no error.
func (c *Cache) removeFile(slot int, name string) error {
	dfd, err := c.dirs.dir(slot, false)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return err
	}
	return removeName(dfd, name)
}

// createTemp creates the temporary file name in tmp/ (O_EXCL, 0600) and
// returns it with the descriptor of the directory it is in, which the
// rename and the removal on error must use. tmp/ removed under a running
// cache is made anew.
func (c *Cache) createTemp(name string) (*os.File, int, error) {
	const flags = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL
	path := filepath.Join(c.dir, tmpName, name)
	tfd, err := c.dirs.dir(tmpSlot, true)
	if err != nil {
		return nil, -1, &os.PathError{Op: "open", Path: filepath.Dir(path), Err: err}
	}
	fd, err := dirfd.Openat(tfd, name, flags, 0o600)
	if err == unix.ENOENT {
		if tfd, err = c.dirs.renew(tmpSlot, tfd); err == nil {
			fd, err = dirfd.Openat(tfd, name, flags, 0o600)
		}
	}
	if err != nil {
		return nil, -1, &os.PathError{Op: "create", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), tfd, nil
}

// renameInto renames the temporary file tmp of the directory tfd to name
// in fan-out directory slot, making the directory if missing (or anew if
// it was removed under a running cache). Whatever is at name is replaced,
// a symlink included (renameat does not follow it); a directory is not.
func (c *Cache) renameInto(tfd int, tmp string, slot int, name string) error {
	dfd, err := c.dirs.dir(slot, true)
	if err == nil {
		err = unix.Renameat(tfd, tmp, dfd, name)
		if err == unix.ENOENT {
			if dfd, err = c.dirs.renew(slot, dfd); err == nil {
				err = unix.Renameat(tfd, tmp, dfd, name)
			}
		}
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(c.dir, tmpName, tmp), New: filepath.Join(c.dir, slotName(slot), name), Err: err}
	}
	return nil
}
