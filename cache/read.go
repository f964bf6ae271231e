package cache

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"

	"github.com/segfs/segfs/dirfd"
	"golang.org/x/sys/unix"
)

// ReadAt copies bytes of the part named by k, from off (relative to the
// part) on, into p. On a hit it returns ok and n = min(len(p), length-off),
// where length is the part's length (n is 0 if off is at or past it).
// Every byte counted in n was checked against the block checksums in the
// part's header, and the header against its own checksum and against k,
// before ReadAt returned.
//
// On a miss it returns ok=false and no error: the part is not cached, or
// its file is bad (corrupt, truncated, of another key or format) and has
// been removed and counted, or could not be read. p's contents are then
// unspecified. err is non-nil only for an invalid k or off, a done ctx,
// or a closed Cache.
//
// ReadAt does not retain p. Concurrent ReadAt, Put and eviction of the
// same part are safe: a file removed while it is read is read to the end
// through its open descriptor.
func (c *Cache) ReadAt(ctx context.Context, k Key, p []byte, off int64) (n int, ok bool, err error) {
	if err := k.validate(); err != nil {
		return 0, false, fmt.Errorf("cache read: %w", err)
	}
	if off < 0 || off >= k.PartSize {
		return 0, false, fmt.Errorf("cache read %s at %d: offset outside the part: %w", k, off, errBadKey)
	}
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("cache read %s: %w", k, err)
	}
	if !c.begin() {
		return 0, false, fmt.Errorf("cache read %s: %w", k, ErrClosed)
	}
	defer c.ops.Done()

	n, ok = c.readWhole(k, p, off)
	if !ok {
		n, ok = c.read(k.id(), k, p, off)
	}
	if !ok {
		c.stats.misses.Add(1)
		return 0, false, nil
	}
	c.stats.hits.Add(1)
	c.stats.readBytes.Add(int64(n))
	return n, true, nil
}

// read serves ReadAt from the part's file, removing the file if it is bad
// or cannot be used as a file.
func (c *Cache) read(id partID, k Key, p []byte, off int64) (int, bool) {
	name := id.name(partSuffix)
	dfd, fd, err := c.openFile(id.slot(), name)
	switch {
	case err == unix.ENOENT:
		c.dropPhantom(id, dfd, name)
		return 0, false
	case dfd >= 0 && unusable(err):
		c.removeUnusable(id, k.String(), dfd, name, err)
		return 0, false
	case err != nil:
		c.stats.readErrors.Add(1)
		if dfd >= 0 || c.dirs.warnOnce(id.slot()) {
			c.cfg.Logger.Warn("cache: cannot open part", "part", k.String(), "file", id.path(c.dir), "err", err)
		}
		return 0, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		c.stats.readErrors.Add(1)
		c.cfg.Logger.Warn("cache: cannot stat part", "part", k.String(), "err", err)
		return 0, false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		c.removeBadFile(id, k.String(), dfd, name, &st, fmt.Errorf("%s, not a regular file", kind(st.Mode)))
		return 0, false
	}

	n, err := c.readVerified(fd, k, &st, p, off)
	if err != nil {
		corrupt := errors.Is(err, errBadPart) || errors.Is(err, io.ErrUnexpectedEOF)
		if !corrupt {
			c.stats.readErrors.Add(1)
		}
		// Several readers may find the same bad file: only the one that
		// removes it counts and logs it.
		if c.removeBad(id, dfd, name, &st) {
			if corrupt {
				c.stats.corrupt.Add(1)
			}
			c.cfg.Logger.Warn("cache: removed bad part", "part", k.String(), "file", id.path(c.dir), "err", err)
		}
		return 0, false
	}
	c.touch(id, k, fd, st.Size)
	return n, true
}

// openFile opens the file name of fan-out directory slot for reading. It
// returns the directory's descriptor too, or -1 if the directory could
// not be opened (err is then about it). It follows no symlink, and does
// not wait for a writer of a FIFO (O_NONBLOCK, which regular files
// ignore).
func (c *Cache) openFile(slot int, name string) (dfd, fd int, err error) {
	dfd, err = c.dirs.dir(slot, false)
	if err != nil {
		return -1, -1, err
	}
	fd, err = dirfd.Openat(dfd, name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	return dfd, fd, err
}

// unusable reports whether an error opening a file says that the entry
// cannot be used as a part file, whatever it is (a symlink, a socket, a
// file segfs may not read): such an entry is removed and fetched again.
// Other errors (out of descriptors or memory, I/O errors) leave it.
func unusable(err error) bool {
	switch err {
	case unix.ELOOP, unix.EACCES, unix.EPERM, unix.ENXIO, unix.ENODEV, unix.EISDIR, unix.EOPNOTSUPP:
		return true
	}
	return false
}

// removeUnusable removes the entry name of the directory dfd that could
// not be opened (openErr), and counts it; what names the file in logs.
func (c *Cache) removeUnusable(id partID, what string, dfd int, name string, openErr error) {
	var st unix.Stat_t
	if err := dirfd.Fstatat(dfd, name, &st); err != nil {
		c.stats.readErrors.Add(1) // gone meanwhile, or the directory unreadable
		return
	}
	c.removeBadFile(id, what, dfd, name, &st, openErr)
}

// removeBadFile removes an entry named as one of id's files that cannot be
// used as a file, whose stat is st, counts it (Stats.BadFilesRemoved) and
// logs it. The next Put of the part writes it again.
func (c *Cache) removeBadFile(id partID, what string, dfd int, name string, st *unix.Stat_t, why error) {
	if c.removeBad(id, dfd, name, st) {
		c.stats.badFiles.Add(1)
		c.cfg.Logger.Warn("cache: removed an unusable file where a part belongs", "part", what,
			"file", filepath.Join(c.dir, slotName(id.slot()), name), "err", why)
	}
}

// readVerified reads and verifies the header, then the blocks that
// [off, off+len(p)) touches.
func (c *Cache) readVerified(fd int, k Key, st *unix.Stat_t, p []byte, off int64) (int, error) {
	c.prefetchBlocks(fd, k, off, int64(len(p)))
	bufp := c.getBuf(probeLen)
	defer c.scratch.Put(bufp)
	buf := (*bufp)[:min(probeLen, st.Size)]
	if err := preadFull(fd, buf, 0); err != nil {
		return 0, err
	}
	hl, err := probeHeader(buf, st.Size)
	if err != nil {
		return 0, err
	}
	if hl > int64(len(buf)) {
		buf = make([]byte, hl)
		if err := preadFull(fd, buf, 0); err != nil {
			return 0, err
		}
	}
	h, err := parseHeader(buf[:hl], k, st.Size)
	if err != nil {
		return 0, err
	}
	if off >= h.length {
		return 0, nil
	}
	p = p[:min(int64(len(p)), h.length-off)]
	return len(p), c.readBlocks(fd, &h, p, off)
}

// prefetchBlocks asks the kernel to start reading the blocks that
// [off, off+n) of the part's data touches, before the header is read: when
// neither is in the page cache (after a restart, say) the two disk reads
// then overlap instead of following each other. Where the data starts is
// known only from the header, so it is guessed as the header length of a
// whole part: right for nearly every part of format version 2, whose
// header is padded to 4096 bytes (an object's last part has a shorter
// checksum table, which the padding takes up unless a long key puts the
// two sides of a 4096 boundary), and a few bytes off for version 1.
// Reads that go with O_DIRECT (see preadData) need no hint.
func (c *Cache) prefetchBlocks(fd int, k Key, off, n int64) {
	if c.direct.Load() && n >= directReadMin {
		return
	}
	bs := c.cfg.blockSize
	lo, hi := off/bs*bs, roundUp(off+n, bs)
	_ = unix.Fadvise(fd, headerLen(k, k.PartSize, bs)+lo, hi-lo, unix.FADV_WILLNEED)
}

// readBlocks fills p with data bytes [off, off+len(p)) after checking the
// CRC32C of every block they touch. Runs of whole blocks are read straight
// into p; a block the range covers only in part goes through a scratch
// buffer.
func (c *Cache) readBlocks(fd int, h *header, p []byte, off int64) error {
	bs, end := h.blockSize, off+int64(len(p))
	for b := off / bs; b*bs < end; {
		lo, hi := b*bs, min((b+1)*bs, h.length)
		if lo >= off && hi <= end { // whole blocks: find the run
			e := b + 1
			for e*bs < end && min((e+1)*bs, h.length) <= end {
				e++
			}
			hi = min(e*bs, h.length)
			dst := p[lo-off : hi-off]
			if err := c.preadData(fd, dst, h.hdrLen+lo); err != nil {
				return err
			}
			for i := b; i < e; i++ {
				if err := h.check(i, dst[(i-b)*bs:min((i-b+1)*bs, int64(len(dst)))]); err != nil {
					return err
				}
			}
			b = e
			continue
		}
		bufp := c.getBuf(bs)
		blk := (*bufp)[:hi-lo]
		err := preadFull(fd, blk, h.hdrLen+lo)
		if err == nil {
			err = h.check(b, blk)
		}
		if err == nil {
			from, to := max(off, lo), min(end, hi)
			copy(p[from-off:to-off], blk[from-lo:to-lo])
		}
		c.scratch.Put(bufp)
		if err != nil {
			return err
		}
		b++
	}
	return nil
}

func (h *header) check(b int64, data []byte) error {
	if got, want := crc32.Checksum(data, castagnoli), h.blockCRC(b); got != want {
		return badPart("block %d checksum %08x, want %08x", b, got, want)
	}
	return nil
}

// getBuf returns a scratch buffer of at least n bytes; put it back in
// c.scratch.
func (c *Cache) getBuf(n int64) *[]byte {
	bufp := c.scratch.Get().(*[]byte)
	if int64(cap(*bufp)) < n {
		b := make([]byte, n)
		bufp = &b
	}
	return bufp
}

// touch marks a part just read as most recently used, indexing it if the
// index (still loading) does not know it yet.
func (c *Cache) touch(id partID, k Key, fd int, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.idx.entries[id]; e != nil {
		c.idx.lru.moveToFront(e)
		c.idx.attach(e, &k)
		return
	}
	var st unix.Stat_t
	// Nlink 0: the file was removed since it was opened.
	if c.idx.mayIndex(id) && fstat(fd, &st) == nil && st.Nlink > 0 {
		c.idx.insert(id, size, &k, true)
	}
}

// removeBad removes a bad entry, name in the directory dfd, found through
// a descriptor (or fstatat) whose stat is st, and its index entry: a file,
// or a directory only if empty. It holds c.mu throughout: bad parts are
// rare, and no Put or eviction may replace the file between the check
// that the name still names the file found bad and its removal. It
// reports whether it removed the entry.
func (c *Cache) removeBad(id partID, dfd int, name string, st *unix.Stat_t) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.idx.busy[id]; busy {
		return false // being evicted, or rewritten by a Put
	}
	var cur unix.Stat_t
	if err := dirfd.Fstatat(dfd, name, &cur); err != nil || cur.Dev != st.Dev || cur.Ino != st.Ino {
		return false // already removed or replaced
	}
	err := removeName(dfd, name)
	if e := c.idx.entries[id]; e != nil {
		c.idx.remove(e)
	} else if !c.idx.loaded {
		c.idx.tomb[id] = struct{}{}
	}
	if err != nil {
		// A directory that is not empty: what is in it is not segfs's
		// to remove. The part is not cached while it is there, and not
		// counted as cached.
		c.cfg.Logger.Warn("cache: cannot remove bad part", "file", filepath.Join(c.dir, slotName(id.slot()), name), "err", err)
		return false
	}
	return true
}

// dropPhantom removes the index entry of a part whose file is gone
// (removed by hand, say), so that it is no longer counted. dfd is its
// directory's descriptor, -1 if the directory is gone.
func (c *Cache) dropPhantom(id partID, dfd int, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.idx.entries[id]
	if e == nil {
		return
	}
	var st unix.Stat_t
	if dfd < 0 || dirfd.Fstatat(dfd, name, &st) == unix.ENOENT {
		c.idx.remove(e)
	}
}

// Contains reports whether the part is cached, without checking it.
// While the index loads it looks for the file.
func (c *Cache) Contains(k Key) bool {
	if k.validate() != nil {
		return false
	}
	id := k.id()
	c.mu.Lock()
	_, ok := c.idx.entries[id]
	loaded := c.idx.loaded
	c.mu.Unlock()
	if ok {
		return true
	}
	if c.hasWholeFor(k) {
		return true
	}
	if loaded {
		return false
	}
	return c.isFile(id.slot(), id.name(partSuffix))
}

// isFile reports whether the file name of fan-out directory slot is a
// regular file.
func (c *Cache) isFile(slot int, name string) bool {
	dfd, err := c.dirs.dir(slot, false)
	if err != nil {
		return false
	}
	var st unix.Stat_t
	return dirfd.Fstatat(dfd, name, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

func fstat(fd int, st *unix.Stat_t) error {
	for {
		if err := unix.Fstat(fd, st); err != unix.EINTR {
			return err
		}
	}
}

// preadFull fills p from offset off; a file shorter than that is
// io.ErrUnexpectedEOF.
func preadFull(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pread(fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// WillNeed asks the kernel to start reading the part's file into the page
// cache, if the part is cached, and returns without waiting. A reader that
// will soon read the part sequentially calls it: each ReadAt opens the
// file afresh, so the kernel's own readahead never builds up across them.
// With direct I/O on it does nothing for part files: a sequential reader's
// large reads go past the page cache (see preadData).
func (c *Cache) WillNeed(k Key) {
	if k.validate() != nil || !c.begin() {
		return
	}
	defer c.ops.Done()
	if _, wid, maybe := c.wholeOf(k); maybe && c.hasWhole(wid) {
		if _, fd, err := c.openFile(wid.slot(), wid.name(objSuffix)); err == nil {
			_ = unix.Fadvise(fd, k.Offset(), k.PartSize, unix.FADV_WILLNEED)
			unix.Close(fd)
		}
		return
	}
	if c.direct.Load() {
		return // large reads of part files go past the page cache
	}
	id := k.id()
	_, fd, err := c.openFile(id.slot(), id.name(partSuffix))
	if err != nil {
		return
	}
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_WILLNEED)
	unix.Close(fd)
}
