package fs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// viewGuard holds the tree's view lock for reading around the requests
// after which go-fuse records a child in its parent (LOOKUP: the child a
// Lookup returned; READDIRPLUS: the child of each entry), so that a
// refresh, which takes it for writing while it changes the tree, never
// has a lookup that began before it put back a node it took out. A
// change of the tree makes no call to the kernel, so a request never
// waits on a refresh that waits on the kernel.
type viewGuard struct {
	fuse.RawFileSystem
	view *sync.RWMutex
}

func (g *viewGuard) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	g.view.RLock()
	defer g.view.RUnlock()
	return g.RawFileSystem.Lookup(cancel, header, name, out)
}

func (g *viewGuard) ReadDirPlus(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	g.view.RLock()
	defer g.view.RUnlock()
	return g.RawFileSystem.ReadDirPlus(cancel, input, out)
}
