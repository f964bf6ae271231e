package fs

import (
	"context"
	"log/slog"
	"testing"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
)

// Under allow_root, a request that names a node is refused unless root
// or the owner sent it; a request on an open handle, which was checked at
// its open, passes whoever sends it.
func TestOwnerAndRootRefusesOthers(t *testing.T) {
	const owner, other = 1000, 65534
	f := &ownerAndRoot{RawFileSystem: fuse.NewDefaultRawFileSystem(), owner: owner}
	header := func(uid uint32) fuse.InHeader {
		var h fuse.InHeader
		h.Uid = uid
		return h
	}
	ops := map[string]func(uid uint32) fuse.Status{
		"lookup": func(uid uint32) fuse.Status {
			h := header(uid)
			return f.Lookup(nil, &h, "x", &fuse.EntryOut{})
		},
		"getattr": func(uid uint32) fuse.Status {
			return f.GetAttr(nil, &fuse.GetAttrIn{InHeader: header(uid)}, &fuse.AttrOut{})
		},
		"open": func(uid uint32) fuse.Status {
			return f.Open(nil, &fuse.OpenIn{InHeader: header(uid)}, &fuse.OpenOut{})
		},
		"opendir": func(uid uint32) fuse.Status {
			return f.OpenDir(nil, &fuse.OpenIn{InHeader: header(uid)}, &fuse.OpenOut{})
		},
		"access": func(uid uint32) fuse.Status {
			return f.Access(nil, &fuse.AccessIn{InHeader: header(uid)})
		},
		"statfs": func(uid uint32) fuse.Status {
			h := header(uid)
			return f.StatFs(nil, &h, &fuse.StatfsOut{})
		},
		"listxattr": func(uid uint32) fuse.Status {
			h := header(uid)
			_, st := f.ListXAttr(nil, &h, nil)
			return st
		},
	}
	for name, op := range ops {
		if st := op(other); st != fuse.EACCES {
			t.Errorf("%s by uid %d: %v, want EACCES", name, other, st)
		}
		for _, uid := range []uint32{0, owner} {
			if st := op(uid); st == fuse.EACCES {
				t.Errorf("%s by uid %d: EACCES, want it passed on", name, uid)
			}
		}
	}
	handleOps := map[string]func() fuse.Status{
		"read": func() fuse.Status {
			_, st := f.Read(nil, &fuse.ReadIn{InHeader: header(other)}, nil)
			return st
		},
		"readdir": func() fuse.Status {
			return f.ReadDir(nil, &fuse.ReadIn{InHeader: header(other)}, nil)
		},
		"getattr of a handle": func() fuse.Status {
			return f.GetAttr(nil, &fuse.GetAttrIn{InHeader: header(other), Flags_: fuse.FUSE_GETATTR_FH}, &fuse.AttrOut{})
		},
	}
	for name, op := range handleOps {
		if st := op(); st == fuse.EACCES {
			t.Errorf("%s by uid %d: EACCES, want it passed on", name, other)
		}
	}
}

// Every node shows the tree's owner and modes, without write bits
// whatever it is given.
func TestRootShowsAttr(t *testing.T) {
	entries := []entry.Entry{{Name: "d/f", Obj: fetcher.Object{Key: "d/f", Size: 3}}}
	root := NewRoot(entries, nil, Attr{UID: 7, GID: 8, FileMode: 0o644, DirMode: 0o777}, slog.New(slog.DiscardHandler))
	gofs.NewNodeFS(root, &gofs.Options{}) // builds the tree (OnAdd)
	dir := root.GetChild("d")
	file := dir.GetChild("f")
	for _, c := range []struct {
		name  string
		inode *gofs.Inode
		mode  uint32
	}{
		{"root", &root.Inode, fuse.S_IFDIR | 0o555},
		{"d", dir, fuse.S_IFDIR | 0o555},
		{"d/f", file, fuse.S_IFREG | 0o444},
	} {
		var out fuse.AttrOut
		if errno := c.inode.Operations().(gofs.NodeGetattrer).Getattr(context.Background(), nil, &out); errno != 0 {
			t.Fatalf("%s: %v", c.name, errno)
		}
		if out.Uid != 7 || out.Gid != 8 || out.Mode != c.mode {
			t.Errorf("%s: uid %d gid %d mode %#o; want 7, 8, %#o", c.name, out.Uid, out.Gid, out.Mode, c.mode)
		}
	}
}
