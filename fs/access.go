package fs

import (
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ownerAndRoot is libfuse's allow_root, which the kernel does not know:
// the mount is made with allow_other, and this filter refuses, with
// EACCES, every request of a caller that is neither root nor owner (the
// mounting user) before it reaches the tree.
//
// What is checked is every request that names a node by itself: lookups,
// attributes, opens, access, statfs, extended attributes, and every
// mutation (which the tree refuses anyway). What passes is every request
// on a handle that a permitted caller opened (reads, listings, lseek,
// flush, release, and GETATTR or STATX of an open handle, which the
// kernel sends at a read past the size it knows), as libfuse does: the
// handle was checked at its open, as with Unix permissions, so a process
// that opens a file as root and then drops its privileges reads on (but
// its fstat fails: the kernel sends it as a GETATTR without the handle);
// and the kernel's own requests (FORGET, INIT, DESTROY), which name
// nobody.
//
// The kernel answers from its caches without asking, whoever asks, so
// Mount has it cache no entries and no attributes under allow_root:
// otherwise any user could stat, for an hour, every path that root or
// the owner had looked up.
type ownerAndRoot struct {
	fuse.RawFileSystem
	owner uint32
}

// allowed reports whether the caller of a request may use the mount.
func (f *ownerAndRoot) allowed(h *fuse.InHeader) bool {
	return h.Uid == 0 || h.Uid == f.owner
}

func (f *ownerAndRoot) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if !f.allowed(h) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Lookup(cancel, h, name, out)
}

func (f *ownerAndRoot) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if in.Flags()&fuse.FUSE_GETATTR_FH == 0 && !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.GetAttr(cancel, in, out)
}

func (f *ownerAndRoot) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	if in.GetattrFlags&fuse.FUSE_GETATTR_FH == 0 && !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Statx(cancel, in, out)
}

func (f *ownerAndRoot) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Access(cancel, in)
}

func (f *ownerAndRoot) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Open(cancel, in, out)
}

func (f *ownerAndRoot) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.OpenDir(cancel, in, out)
}

func (f *ownerAndRoot) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	if !f.allowed(h) {
		return nil, fuse.EACCES
	}
	return f.RawFileSystem.Readlink(cancel, h)
}

func (f *ownerAndRoot) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	if !f.allowed(h) {
		return fuse.EACCES
	}
	return f.RawFileSystem.StatFs(cancel, h, out)
}

func (f *ownerAndRoot) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if !f.allowed(h) {
		return 0, fuse.EACCES
	}
	return f.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (f *ownerAndRoot) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if !f.allowed(h) {
		return 0, fuse.EACCES
	}
	return f.RawFileSystem.ListXAttr(cancel, h, dest)
}

// The mutations: the tree refuses them with EROFS, a caller that may not
// use the mount learns no more than EACCES.

func (f *ownerAndRoot) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.SetAttr(cancel, in, out)
}

func (f *ownerAndRoot) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Mknod(cancel, in, name, out)
}

func (f *ownerAndRoot) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (f *ownerAndRoot) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if !f.allowed(h) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Unlink(cancel, h, name)
}

func (f *ownerAndRoot) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if !f.allowed(h) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Rmdir(cancel, h, name)
}

func (f *ownerAndRoot) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (f *ownerAndRoot) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Link(cancel, in, name, out)
}

func (f *ownerAndRoot) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if !f.allowed(h) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Symlink(cancel, h, target, name, out)
}

func (f *ownerAndRoot) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (f *ownerAndRoot) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if !f.allowed(h) {
		return fuse.EACCES
	}
	return f.RawFileSystem.RemoveXAttr(cancel, h, attr)
}

func (f *ownerAndRoot) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Create(cancel, in, name, out)
}

func (f *ownerAndRoot) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	if !f.allowed(&in.InHeader) {
		return fuse.EACCES
	}
	return f.RawFileSystem.Tmpfile(cancel, in, out)
}
