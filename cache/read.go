package cache

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"syscall"

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

// read serves ReadAt from the part's file, removing the file if it is bad.
func (c *Cache) read(id partID, k Key, p []byte, off int64) (int, bool) {
	path := id.path(c.dir)
	fd, err := openRead(path)
	if err == syscall.ENOENT {
		c.dropPhantom(id, path)
		return 0, false
	}
	if err != nil {
		c.stats.readErrors.Add(1)
		c.cfg.Logger.Warn("cache: cannot open part", "part", k.String(), "err", err)
		return 0, false
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := fstat(fd, &st); err != nil {
		c.stats.readErrors.Add(1)
		c.cfg.Logger.Warn("cache: cannot stat part", "part", k.String(), "err", err)
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
		if c.removeBad(id, path, &st) {
			if corrupt {
				c.stats.corrupt.Add(1)
			}
			c.cfg.Logger.Warn("cache: removed bad part", "part", k.String(), "file", path, "err", err)
		}
		return 0, false
	}
	c.touch(id, k, fd, st.Size)
	return n, true
}

// readVerified reads and verifies the header, then the blocks that
// [off, off+len(p)) touches.
func (c *Cache) readVerified(fd int, k Key, st *syscall.Stat_t, p []byte, off int64) (int, error) {
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, badPart("not a regular file")
	}
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
	var st syscall.Stat_t
	// Nlink 0: the file was removed since it was opened.
	if c.idx.mayIndex(id) && fstat(fd, &st) == nil && st.Nlink > 0 {
		c.idx.insert(id, size, &k, true)
	}
}

// removeBad removes a bad part file, read through a descriptor whose
// stat is st, and its index entry. It holds c.mu throughout: bad parts
// are rare, and no Put or eviction may replace the file between the
// check that the path still names the file found bad and its removal.
// It reports whether it removed the file.
func (c *Cache) removeBad(id partID, path string, st *syscall.Stat_t) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.idx.busy[id]; busy {
		return false // being evicted, or rewritten by a Put
	}
	var cur syscall.Stat_t
	if err := syscall.Lstat(path, &cur); err != nil || cur.Dev != st.Dev || cur.Ino != st.Ino {
		return false // already removed or replaced
	}
	var err error
	if cur.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		err = os.RemoveAll(path) // not ours, but in our directory and in the way
	} else if err = syscall.Unlink(path); err == syscall.ENOENT {
		err = nil
	}
	if err != nil {
		c.cfg.Logger.Warn("cache: cannot remove bad part", "file", path, "err", err)
		return false
	}
	if e := c.idx.entries[id]; e != nil {
		c.idx.remove(e)
	} else if !c.idx.loaded {
		c.idx.tomb[id] = struct{}{}
	}
	return true
}

// dropPhantom removes the index entry of a part whose file is gone
// (removed by hand, say), so that it is no longer counted.
func (c *Cache) dropPhantom(id partID, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.idx.entries[id]
	if e == nil {
		return
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err == syscall.ENOENT {
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
	var st syscall.Stat_t
	return syscall.Lstat(id.path(c.dir), &st) == nil
}

func openRead(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func fstat(fd int, st *syscall.Stat_t) error {
	for {
		if err := syscall.Fstat(fd, st); err != syscall.EINTR {
			return err
		}
	}
}

// preadFull fills p from offset off; a file shorter than that is
// io.ErrUnexpectedEOF.
func preadFull(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := syscall.Pread(fd, p, off)
		if err == syscall.EINTR {
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
		if fd, err := openRead(wid.objPath(c.dir)); err == nil {
			_ = unix.Fadvise(fd, k.Offset(), k.PartSize, unix.FADV_WILLNEED)
			syscall.Close(fd)
		}
		return
	}
	if c.direct.Load() {
		return // large reads of part files go past the page cache
	}
	fd, err := openRead(k.id().path(c.dir))
	if err != nil {
		return
	}
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_WILLNEED)
	syscall.Close(fd)
}
