package cache

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/segfs/segfs/directio"
	"golang.org/x/sys/unix"
)

// I/O modes of part data (Config.IO).
const (
	// IODirect writes each part's data with O_DIRECT where the file
	// system, the buffer and the offset allow it, and the rest through
	// the page cache; large reads of it (a sequential reader's) go with
	// O_DIRECT too. The data moves between the disk and segfs's buffers
	// without copies in new page-cache pages, which the reader's own page
	// cache of the mounted file would duplicate. Small reads (a
	// searcher's) go through the page cache.
	IODirect = "direct"
	// IOBuffered writes and reads every byte through the page cache.
	IOBuffered = "buffered"
)

// writeData appends data to f, whose offset is off. With direct writes on,
// the whole 4096-byte blocks of data go with O_DIRECT when off and data's
// address are aligned; the tail, and everything when the file system
// refuses O_DIRECT (EINVAL), goes through the page cache. A refusal turns
// direct writes off for the Cache, once, with a log line.
func (c *Cache) writeData(f *os.File, off int64, data []byte) error {
	n := directio.Prefix(data, off)
	if !c.direct.Load() || n == 0 {
		return writeAll(f, data)
	}
	if err := setDirect(f, true, c.cfg.setDirectFd); err != nil {
		c.noDirect(err)
		return writeAll(f, data)
	}
	w, err := c.cfg.writeDirect(f, data[:n])
	switch {
	case err == nil:
	case errors.Is(err, syscall.EINVAL):
		// Refused at once: some file systems take the flag and refuse
		// the write. After a short write, the rest goes buffered.
		if w == 0 {
			c.noDirect(err)
		}
	default:
		return err
	}
	c.stats.directBytes.Add(int64(w))
	if err := setDirect(f, false, c.cfg.setDirectFd); err != nil {
		return fmt.Errorf("clear O_DIRECT: %w", err)
	}
	return writeAll(f, data[w:])
}

// directReadMin is the smallest read of a part file's data that goes with
// O_DIRECT: a sequential reader's (the kernel sends reads of up to
// max_read, 1 MiB by default). Smaller reads, a searcher's, go through
// the page cache, which keeps the hot blocks.
const directReadMin = 128 << 10

// preadData fills dst, whole blocks of a part's data, from off. With
// direct I/O on, a read of at least directReadMin bytes whose buffer,
// length and offset are 4096-aligned goes with O_DIRECT: from the disk
// into dst, without filling page-cache pages that the mounted file's own
// page cache would duplicate. fd is the caller's own descriptor: the flag
// is set for the read and cleared after it.
func (c *Cache) preadData(fd int, dst []byte, off int64) error {
	if !c.direct.Load() || len(dst) < directReadMin || directio.Prefix(dst, off) != len(dst) {
		return preadFull(fd, dst, off)
	}
	if err := c.cfg.setDirectFd(fd, true); err != nil {
		c.noDirect(err)
		return preadFull(fd, dst, off)
	}
	err := preadFull(fd, dst, off)
	if cerr := c.cfg.setDirectFd(fd, false); cerr != nil && err == nil {
		err = fmt.Errorf("clear O_DIRECT: %w", cerr)
	}
	if errors.Is(err, syscall.EINVAL) {
		// Some file systems take the flag and refuse the read.
		c.noDirect(err)
		return preadFull(fd, dst, off)
	}
	if err == nil {
		c.stats.directReadBytes.Add(int64(len(dst)))
	}
	return err
}

// noDirect turns direct I/O off after the file system refused it.
func (c *Cache) noDirect(err error) {
	if c.direct.CompareAndSwap(true, false) {
		c.cfg.Logger.Warn("cache: the file system refuses O_DIRECT; writing and reading parts through the page cache", "dir", c.dir, "err", err)
	}
}

func writeAll(f *os.File, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := f.Write(b)
	return err
}

// setDirect sets or clears O_DIRECT on f's descriptor with set
// (setDirectFd, or a test's hook).
func setDirect(f *os.File, on bool, set func(fd int, on bool) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) { serr = set(int(fd), on) })
	if err != nil {
		return err
	}
	return serr
}

// setDirectFd sets or clears O_DIRECT on fd.
func setDirectFd(fd int, on bool) error {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		flags |= unix.O_DIRECT
	} else {
		flags &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags)
	return err
}
