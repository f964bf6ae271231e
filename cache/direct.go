package cache

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Write modes of part data (Config.Writes).
const (
	// WritesDirect writes each part's data with O_DIRECT where the file
	// system, the buffer and the offset allow it, and the rest through
	// the page cache. The data goes from the fetch buffer to the disk
	// without a copy into new page-cache pages, which the reader's own
	// page cache of the mounted file would duplicate.
	WritesDirect = "direct"
	// WritesBuffered writes every byte through the page cache.
	WritesBuffered = "buffered"
)

// writeData appends data to f, whose offset is off. With direct writes on,
// the whole 4096-byte blocks of data go with O_DIRECT when off and data's
// address are aligned; the tail, and everything when the file system
// refuses O_DIRECT (EINVAL), goes through the page cache. A refusal turns
// direct writes off for the Cache, once, with a log line.
func (c *Cache) writeData(f *os.File, off int64, data []byte) error {
	n := len(data) &^ (headerAlign - 1)
	if !c.direct.Load() || n == 0 || off%headerAlign != 0 || uintptr(unsafe.Pointer(&data[0]))%headerAlign != 0 {
		return writeAll(f, data)
	}
	if err := c.cfg.setDirect(f, true); err != nil {
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
	if err := c.cfg.setDirect(f, false); err != nil {
		return fmt.Errorf("clear O_DIRECT: %w", err)
	}
	return writeAll(f, data[w:])
}

// noDirect turns direct writes off after the file system refused one.
func (c *Cache) noDirect(err error) {
	if c.direct.CompareAndSwap(true, false) {
		c.cfg.Logger.Warn("cache: the file system refuses O_DIRECT; writing parts through the page cache", "dir", c.dir, "err", err)
	}
}

// alignedBuf returns a zeroed buffer of n bytes at a 4096-aligned
// address, for data that is to be written with O_DIRECT.
func alignedBuf(n int64) []byte {
	b := make([]byte, n+headerAlign)
	skip := (headerAlign - int(uintptr(unsafe.Pointer(&b[0]))%headerAlign)) % headerAlign
	return b[skip : int64(skip)+n : int64(skip)+n]
}

func writeAll(f *os.File, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := f.Write(b)
	return err
}

// setDirect sets or clears O_DIRECT on f.
func setDirect(f *os.File, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			serr = err
			return
		}
		if on {
			flags |= unix.O_DIRECT
		} else {
			flags &^= unix.O_DIRECT
		}
		_, serr = unix.FcntlInt(fd, unix.F_SETFL, flags)
	})
	if err != nil {
		return err
	}
	return serr
}
