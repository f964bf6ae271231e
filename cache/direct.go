package cache

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Part files are written with direct I/O (O_DIRECT) where the file system
// allows it. A buffered write copies every byte into the page cache, and
// on the cold read path that copy cost more CPU than receiving the bytes
// from the network (measured: docs/BENCH.md). The page cache would also
// hold a second copy of bytes the kernel already keeps for the mounted
// file. Reads stay buffered, so the kernel's readahead and WillNeed hints
// still serve them.
//
// A direct write needs an aligned buffer, offset and length: the header
// is padded to align and built in an aligned buffer, the data's aligned
// prefix is written from the caller's buffer when that is aligned (large
// Go allocations are page-aligned), and the rest through an aligned copy
// padded with zeros, after which the file is truncated to its size.

// alignedBuf returns n zeroed bytes whose address is a multiple of align.
func alignedBuf(n int64) []byte {
	b := make([]byte, n+align)
	skip := (align - int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))%align) % align
	return b[skip : skip+n : skip+n]
}

func isAligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%align == 0
}

// createTemp creates the temporary file of a part, with O_DIRECT unless
// the cache's file system refused it before.
func (c *Cache) createTemp(path string) (f *os.File, direct bool, err error) {
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if !c.noDirect.Load() {
		f, err = c.cfg.openFile(path, flags|unix.O_DIRECT, 0o600)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return nil, false, err
		}
		// tmpfs and some others refuse O_DIRECT: write through the page
		// cache from now on.
		c.noDirect.Store(true)
		c.cfg.Logger.Info("cache: file system refuses direct I/O; writing parts through the page cache", "dir", c.dir)
	}
	f, err = c.cfg.openFile(path, flags, 0o600)
	return f, false, err
}

// writePart writes hdr and data to f, a new empty file: directly if
// direct is set and the file system takes it, else through the page cache.
func (c *Cache) writePart(f *os.File, direct bool, hdr, data []byte) error {
	if direct {
		err := writeDirect(f, hdr, data)
		if !errors.Is(err, syscall.EINVAL) {
			return err
		}
		// Alignment refused after all (a device with larger blocks):
		// rewrite the file through the page cache.
		c.noDirect.Store(true)
		c.cfg.Logger.Info("cache: direct write refused; writing parts through the page cache", "dir", c.dir, "err", err)
		if err := setDirect(f, false); err != nil {
			return err
		}
		if err := f.Truncate(0); err != nil {
			return err
		}
	}
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return err
	}
	_, err := f.WriteAt(data, int64(len(hdr)))
	return err
}

// writeDirect writes hdr (aligned, of a length that is a multiple of
// align) and data after it with direct I/O.
func writeDirect(f *os.File, hdr, data []byte) error {
	if !isAligned(hdr) || int64(len(hdr))%align != 0 {
		return fmt.Errorf("direct write: unaligned header: %w", syscall.EINVAL)
	}
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return err
	}
	off, n := int64(len(hdr)), int64(len(data))
	body := n / align * align
	if isAligned(data) {
		if body > 0 {
			if _, err := f.WriteAt(data[:body], off); err != nil {
				return err
			}
		}
		if n > body {
			buf := alignedBuf(align)
			copy(buf, data[body:])
			if _, err := f.WriteAt(buf, off+body); err != nil {
				return err
			}
		}
	} else {
		buf := alignedBuf(roundUp(n, align))
		copy(buf, data)
		if _, err := f.WriteAt(buf, off); err != nil {
			return err
		}
	}
	if n%align != 0 {
		// The last block was written padded: cut the file to its size.
		return f.Truncate(off + n)
	}
	return nil
}

// setDirect sets or clears O_DIRECT on f.
func setDirect(f *os.File, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			serr = err
			return
		}
		if on {
			fl |= unix.O_DIRECT
		} else {
			fl &^= unix.O_DIRECT
		}
		_, serr = unix.FcntlInt(fd, unix.F_SETFL, fl)
	})
	if err != nil {
		return err
	}
	return serr
}
