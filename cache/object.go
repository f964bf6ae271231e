package cache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/segfs/segfs/directio"
	"github.com/segfs/segfs/dirfd"
	"golang.org/x/sys/unix"
)

// Whole-object files. An object whose parts are all cached can be copied
// into one file that holds its bytes at their own offsets, so the kernel
// can serve a mount's reads of it straight from that file (FUSE
// passthrough). Such a file has no room for checksums: it is checked once,
// as it is built from verified parts, and then sealed. The seal, a small
// file beside it, records the object it holds and the identity of the
// data file as built: device, inode, size, change and modification time.
// Any write to the data file, a truncation, a copy or a rename over it
// changes its change time or inode, and so breaks the seal; a broken seal
// is found at open, both files are removed and counted, and the object is
// read from its parts again. What a seal cannot see is the disk silently
// returning other bytes than it was given; the parts' block checksums do
// catch that, and whole-object files are an opt-in for that reason.
//
// Seal format, version 1, little-endian:
//
//	magic "segfsobj" | version u16 | 0 u16 | len(source) u16 |
//	len(object) u16 | len(etag) u16 | 0 u16 | size u64 | dev u64 | ino u64 |
//	ctime ns i64 | mtime ns i64 | source | object | etag |
//	CRC32C of all bytes before it u32

const (
	sealMagic   = "segfsobj"
	sealVersion = 1
	sealFixed   = 8 + 2 + 2 + 2*4 + 8*5
	objSuffix   = ".obj"
	sealSuffix  = ".seal"
)

// ObjectKey names one version of one whole object.
type ObjectKey struct {
	Source string // the store, as in Key
	Object string // the object's key in the store
	ETag   string // the version
	Size   int64  // the object's size in bytes; > 0
}

func (k ObjectKey) String() string {
	return fmt.Sprintf("%s %q etag %s (%d bytes)", k.Source, k.Object, k.ETag, k.Size)
}

func (k ObjectKey) validate() error {
	switch {
	case k.Size <= 0:
		return fmt.Errorf("%s: object size must be positive: %w", k, errBadKey)
	case len(k.Source) > maxField || len(k.Object) > maxField || len(k.ETag) > maxField:
		return fmt.Errorf("%s: source, object or etag longer than %d bytes: %w", k, maxField, errBadKey)
	}
	return nil
}

// id names the object's files. Its encoding differs from every part's
// (the prefix), so the two kinds share the index without colliding.
func (k ObjectKey) id() partID {
	var stack [512]byte
	return sha256.Sum256(appendObject(append(stack[:0], "segfs object\x00"...), k.Source, k.Object, k.ETag))
}

func (id partID) objPath(dir string) string {
	name := id.String()
	return filepath.Join(dir, name[:2], name+objSuffix)
}

func (id partID) sealPath(dir string) string {
	name := id.String()
	return filepath.Join(dir, name[:2], name+sealSuffix)
}

// sealed is what a seal records.
type sealed struct {
	key          ObjectKey
	dev, ino     uint64
	ctime, mtime int64 // ns
}

func sealOf(k ObjectKey, st *unix.Stat_t) sealed {
	return sealed{key: k, dev: st.Dev, ino: st.Ino,
		ctime: st.Ctim.Nano(), mtime: st.Mtim.Nano()}
}

func (s sealed) encode() []byte {
	b := make([]byte, 0, sealFixed+len(s.key.Source)+len(s.key.Object)+len(s.key.ETag)+4)
	b = append(b, sealMagic...)
	b = binary.LittleEndian.AppendUint16(b, sealVersion)
	b = binary.LittleEndian.AppendUint16(b, 0)
	for _, f := range []string{s.key.Source, s.key.Object, s.key.ETag} {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(f)))
	}
	b = binary.LittleEndian.AppendUint16(b, 0)
	for _, v := range []uint64{uint64(s.key.Size), s.dev, s.ino, uint64(s.ctime), uint64(s.mtime)} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = append(b, s.key.Source...)
	b = append(b, s.key.Object...)
	b = append(b, s.key.ETag...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// parseSeal decodes and checks a seal; the error wraps errBadPart.
func parseSeal(b []byte) (sealed, error) {
	var s sealed
	if len(b) < sealFixed+4 || string(b[:8]) != sealMagic {
		return s, badPart("seal: bad magic or %d bytes", len(b))
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		return s, badPart("seal checksum %08x, want %08x", got, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != sealVersion {
		return s, badPart("seal format version %d, want %d", v, sealVersion)
	}
	ns, no, ne := int(binary.LittleEndian.Uint16(b[12:])), int(binary.LittleEndian.Uint16(b[14:])), int(binary.LittleEndian.Uint16(b[16:]))
	if sealFixed+ns+no+ne != len(body) {
		return s, badPart("seal: %d bytes for fields of %d", len(body), sealFixed+ns+no+ne)
	}
	u := func(i int) uint64 { return binary.LittleEndian.Uint64(b[20+8*i:]) }
	s.key.Size, s.dev, s.ino, s.ctime, s.mtime = int64(u(0)), u(1), u(2), int64(u(3)), int64(u(4))
	rest := body[sealFixed:]
	s.key.Source, s.key.Object, s.key.ETag = string(rest[:ns]), string(rest[ns:ns+no]), string(rest[ns+no:])
	return s, nil
}

// ErrIncomplete: Promote found a part of the object missing from the cache.
var ErrIncomplete = errors.New("object not wholly cached")

// Promote copies the object's cached parts, cut at partSize, into a
// whole-object file and seals it. Every part is read through ReadAt, so
// its checksums are checked first; the file is written under tmp/, synced
// (a seal vouches for its bytes, so they must be on disk before it), and
// renamed into place, then the seal is written and renamed beside it. The
// file counts toward MaxBytes like a part and is evicted like one; an
// object larger than a quarter of MaxBytes is not promoted (ErrNoSpace).
// Once the file is in place the parts are removed: ReadAt serves them
// from it.
//
// It returns nil if the object's file exists already or another Promote
// is building it, ErrIncomplete if a part is missing, and ErrNoSpace if
// there is no room.
func (c *Cache) Promote(ctx context.Context, k ObjectKey, partSize int64) error {
	if err := k.validate(); err != nil {
		return fmt.Errorf("cache promote: %w", err)
	}
	if partSize <= 0 {
		return fmt.Errorf("cache promote %s: part size %d: %w", k, partSize, errBadKey)
	}
	if !c.begin() {
		return fmt.Errorf("cache promote %s: %w", k, ErrClosed)
	}
	defer c.ops.Done()
	if limit := c.cfg.MaxBytes; limit > 0 && k.Size > limit/4 {
		return fmt.Errorf("cache promote %s: larger than a quarter of the cache size %d: %w", k, limit, ErrNoSpace)
	}
	parts := (k.Size + partSize - 1) / partSize
	pk := func(i int64) Key {
		return Key{Source: k.Source, Object: k.Object, ETag: k.ETag, PartSize: partSize, Index: i}
	}
	for i := range parts {
		if !c.Contains(pk(i)) {
			return fmt.Errorf("cache promote %s: part %d: %w", k, i, ErrIncomplete)
		}
	}
	id := k.id()
	claimed, _ := c.claim(id)
	if !claimed {
		return nil
	}
	defer c.release(id)

	seal := sealed{key: k}.encode() // its length; the fields come later
	size := k.Size + int64(len(seal))
	if err := c.reserve(size); err != nil {
		return fmt.Errorf("cache promote %s: %w", k, err)
	}
	written, err := c.buildObject(ctx, id, k, parts, partSize, pk)
	c.mu.Lock()
	c.idx.reserved -= size
	if err == nil {
		c.idx.insertWhole(id, written, &Key{Object: k.Object, ETag: k.ETag}, true)
	}
	c.mu.Unlock()
	if err != nil {
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
			c.stats.noSpace.Add(1)
			err = fmt.Errorf("%w: %w", ErrNoSpace, err)
		} else if !errors.Is(err, ErrIncomplete) && ctx.Err() == nil {
			c.stats.promoteErrors.Add(1)
		}
		return fmt.Errorf("cache promote %s: %w", k, err)
	}
	c.dropParts(k, parts, partSize)
	c.stats.promotions.Add(1)
	c.stats.promotedBytes.Add(k.Size)
	return nil
}

// buildObject writes the object's file and seal and returns their bytes.
// On error neither is left behind.
func (c *Cache) buildObject(ctx context.Context, id partID, k ObjectKey, parts, partSize int64, pk func(int64) Key) (written int64, err error) {
	tmp := c.tempName(id)
	f, tfd, err := c.createTemp(tmp)
	if err != nil {
		return 0, err
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			unix.Unlinkat(tfd, tmp, 0)
		}
	}()
	buf := directio.Buf(min(partSize, k.Size))
	for i := range parts {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		want := min(partSize, k.Size-i*partSize)
		// The checked read of ReadAt, without its counters: these are
		// not reads of the mount.
		key := pk(i)
		n, ok := c.read(key.id(), key, buf[:want], 0)
		if !ok || int64(n) != want {
			return 0, fmt.Errorf("part %d: %w", i, ErrIncomplete)
		}
		if err := c.writeSlot(ctx, func() error { return c.writeData(f, i*partSize, buf[:n]) }); err != nil {
			return 0, err
		}
	}
	if err := c.writeSlot(ctx, f.Sync); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		f = nil
		return 0, err
	}
	f = nil
	objName := id.name(objSuffix)
	if err := c.renameInto(tfd, tmp, id.slot(), objName); err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			c.removeFile(id.slot(), objName)
		}
	}()
	dfd, err := c.dirs.dir(id.slot(), false)
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := dirfd.Fstatat(dfd, objName, &st); err != nil {
		return 0, err
	}
	seal := sealOf(k, &st).encode()
	stmp := tmp + sealSuffix
	sf, stfd, err := c.createTemp(stmp)
	if err != nil {
		return 0, err
	}
	_, err = sf.Write(seal)
	if cerr := sf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = c.renameInto(stfd, stmp, id.slot(), id.name(sealSuffix))
	}
	if err != nil {
		unix.Unlinkat(stfd, stmp, 0)
		return 0, err
	}
	return st.Size + int64(len(seal)), nil
}

// writeSlot runs a disk write holding a writer slot, as Put does.
func (c *Cache) writeSlot(ctx context.Context, write func() error) error {
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
	return write()
}

// OpenObject opens the object's whole-object file for reading, after
// checking its seal: the seal's checksum, that it names k, and that the
// file is the one it sealed. ok is false if there is no such file, or it
// was bad and has been removed and counted (Stats.BadObjects). The caller
// closes the file.
func (c *Cache) OpenObject(k ObjectKey) (f *os.File, ok bool) {
	if k.validate() != nil || !c.begin() {
		return nil, false
	}
	defer c.ops.Done()
	id := k.id()
	if !c.hasWhole(id) {
		return nil, false // the common case: no file, no system call
	}
	fd, s, ok := c.openSealed(id, k)
	if !ok {
		return nil, false
	}
	if s.key.Size != k.Size {
		unix.Close(fd)
		c.removeBadObject(id, k, badPart("seal says %d bytes, the store %d", s.key.Size, k.Size))
		return nil, false
	}
	// O_NONBLOCK only kept a FIFO from blocking the open; the file is
	// handed on, so it goes in the mode files are opened in.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		c.stats.readErrors.Add(1)
		return nil, false
	}
	c.stats.objectOpens.Add(1)
	return os.NewFile(uintptr(fd), id.objPath(c.dir)), true
}

// openSealed opens the whole-object file id of the object k names (its
// Size is not compared) and checks it against its seal. On success it
// returns the open descriptor and the seal, and marks the file used. A
// bad file or seal is removed and counted.
func (c *Cache) openSealed(id partID, k ObjectKey) (fd int, s sealed, ok bool) {
	objName := id.name(objSuffix)
	dfd, err := c.dirs.dir(id.slot(), false)
	if err == unix.ENOENT {
		c.dropPhantomObject(id, -1)
		return -1, s, false
	}
	if err != nil {
		c.stats.readErrors.Add(1)
		return -1, s, false
	}
	sb, err := readSmall(dfd, id.name(sealSuffix))
	if errors.Is(err, os.ErrNotExist) {
		c.dropPhantomObject(id, dfd)
		return -1, s, false
	}
	if err != nil && !errors.Is(err, errBadPart) && !errors.Is(err, io.ErrUnexpectedEOF) && !unusable(errors.Unwrap(err)) {
		c.stats.readErrors.Add(1)
		c.cfg.Logger.Warn("cache: cannot read object seal", "object", k.String(), "err", err)
		return -1, s, false
	}
	if err == nil {
		s, err = parseSeal(sb)
	}
	if err == nil && (s.key.Source != k.Source || s.key.Object != k.Object || s.key.ETag != k.ETag) {
		err = badPart("seal names %s", s.key)
	}
	if err != nil {
		c.removeBadObject(id, k, err)
		return -1, s, false
	}
	fd, err = dirfd.Openat(dfd, objName, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		c.removeBadObject(id, k, badPart("data file: %v", err))
		return -1, s, false
	}
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		unix.Close(fd)
		c.stats.readErrors.Add(1)
		return -1, s, false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || sealOf(s.key, &st) != s {
		unix.Close(fd)
		c.removeBadObject(id, k, badPart("data file changed since it was sealed (size %d, inode %d)", st.Size, st.Ino))
		return -1, s, false
	}
	c.touchObject(id, s.key, st.Size+int64(len(sb)))
	return fd, s, true
}

// wholeOf returns the ObjectKey (without its size) and file id of the
// whole-object file that may hold part k, and whether the cache may have
// it: while no whole-object file is indexed (and the load is over) the
// answer is no without hashing, which keeps the check off the read path
// of a cache that has none.
func (c *Cache) wholeOf(k Key) (ObjectKey, partID, bool) {
	c.mu.Lock()
	none := c.idx.loaded && c.idx.wholes == 0
	c.mu.Unlock()
	ok := ObjectKey{Source: k.Source, Object: k.Object, ETag: k.ETag}
	if none {
		return ok, partID{}, false
	}
	return ok, ok.id(), true
}

// hasWholeFor reports whether the index holds the whole-object file of
// part k's object.
func (c *Cache) hasWholeFor(k Key) bool {
	_, id, maybe := c.wholeOf(k)
	return maybe && c.hasWhole(id)
}

// hasWhole reports whether the index holds the whole-object file of id.
// While the index loads it looks for the seal.
func (c *Cache) hasWhole(id partID) bool {
	c.mu.Lock()
	e := c.idx.entries[id]
	loaded := c.idx.loaded
	c.mu.Unlock()
	if e != nil || loaded {
		return e != nil && e.whole
	}
	return c.isFile(id.slot(), id.name(sealSuffix))
}

// readWhole serves ReadAt of part k from its object's sealed whole-object
// file. ok is false if there is none, or it was bad (then removed).
func (c *Cache) readWhole(k Key, p []byte, off int64) (n int, ok bool) {
	okey, id, maybe := c.wholeOf(k)
	if !maybe || !c.hasWhole(id) {
		return 0, false
	}
	fd, s, ok := c.openSealed(id, okey)
	if !ok {
		return 0, false
	}
	defer unix.Close(fd)
	length := min(k.PartSize, s.key.Size-k.Offset())
	if length <= 0 {
		return 0, false // no such part in this object
	}
	if off >= length {
		return 0, true
	}
	p = p[:min(int64(len(p)), length-off)]
	if err := preadFull(fd, p, k.Offset()+off); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			c.removeBadObject(id, okey, badPart("data file short: %v", err))
		} else {
			c.stats.readErrors.Add(1)
		}
		return 0, false
	}
	return len(p), true
}

// dropParts removes the part files of an object just promoted: the
// whole-object file serves them now. Parts busy with a Put or an eviction
// are left to it.
func (c *Cache) dropParts(k ObjectKey, parts, partSize int64) {
	for i := range parts {
		pk := Key{Source: k.Source, Object: k.Object, ETag: k.ETag, PartSize: partSize, Index: i}
		id := pk.id()
		c.mu.Lock()
		_, busy := c.idx.busy[id]
		e := c.idx.entries[id]
		if busy || (e == nil && c.idx.loaded) {
			c.mu.Unlock()
			continue
		}
		if e != nil {
			c.idx.remove(e)
		} else {
			c.idx.tomb[id] = struct{}{} // the load must not index it
		}
		c.idx.busy[id] = struct{}{}
		c.mu.Unlock()
		if err := c.removeFile(id.slot(), id.name(partSuffix)); err != nil {
			c.cfg.Logger.Warn("cache: cannot remove promoted part", "part", pk.String(), "err", err)
		}
		c.mu.Lock()
		delete(c.idx.busy, id)
		c.mu.Unlock()
	}
}

// touchObject marks an object's file as most recently used, indexing it if
// the index (still loading) does not know it yet.
func (c *Cache) touchObject(id partID, k ObjectKey, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pk := &Key{Object: k.Object, ETag: k.ETag}
	if e := c.idx.entries[id]; e != nil {
		c.idx.lru.moveToFront(e)
		c.idx.attach(e, pk)
		return
	}
	if c.idx.mayIndex(id) {
		c.idx.insertWhole(id, size, pk, true)
	}
}

// removeBadObject removes a whole-object file and its seal, unless a
// Promote or an eviction owns them now, and counts it.
func (c *Cache) removeBadObject(id partID, k ObjectKey, why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.idx.busy[id]; busy {
		return
	}
	c.removeObjectFiles(id)
	if e := c.idx.entries[id]; e != nil {
		c.idx.remove(e)
	} else if !c.idx.loaded {
		c.idx.tomb[id] = struct{}{}
	}
	c.stats.badObjects.Add(1)
	c.cfg.Logger.Warn("cache: removed bad whole-object file", "object", k.String(), "err", why)
}

// dropPhantomObject forgets an indexed object whose seal is gone, and
// removes a data file left without its seal. dfd is the descriptor of
// their directory, -1 if it is gone.
func (c *Cache) dropPhantomObject(id partID, dfd int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.idx.busy[id]; busy {
		return
	}
	if e := c.idx.entries[id]; e != nil {
		c.idx.remove(e)
	}
	if dfd >= 0 {
		_ = removeName(dfd, id.name(objSuffix))
	}
}

// removeObjectFiles removes the seal first: a data file without its seal
// is never served, and is removed by the next load. A directory in the
// place of either goes only if it is empty.
func (c *Cache) removeObjectFiles(id partID) {
	for _, suffix := range []string{sealSuffix, objSuffix} {
		if err := c.removeFile(id.slot(), id.name(suffix)); err != nil {
			c.cfg.Logger.Warn("cache: cannot remove whole-object file", "file", filepath.Join(c.dir, slotName(id.slot()), id.name(suffix)), "err", err)
		}
	}
}

// readSmall reads the small file name of the directory dfd whole, not
// following a symlink.
func readSmall(dfd int, name string) ([]byte, error) {
	fd, err := dirfd.Openat(dfd, name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > maxHeaderLen {
		return nil, badPart("seal is not a small regular file")
	}
	b := make([]byte, st.Size)
	if err := preadFull(fd, b, 0); err != nil {
		return nil, err
	}
	return b, nil
}
