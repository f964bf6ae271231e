// Package ops serves a running segfs to its operators: the control
// socket through which `segfs status` and `segfs warm` reach a mount
// (control.go, handlers.go), the counters at /stats and /metrics and
// the Go profiles (metrics.go, prom.go), each HTTP listener held to its
// Limits (listen.go), which the daemon's memory and file bounds count.
//
// It reads the daemon through a Daemon: plain values of the packages
// that hold the state (the store's counters, the Reader, the fetch
// pool, the disk cache, the tree). It knows nothing of flags or of the
// shape of a mount.
package ops

import (
	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
)

// Daemon is what the operator surface reads of a running command.
type Daemon struct {
	Store  fetcher.Store
	Reader *reader.Reader
	Sched  *prefetch.Scheduler
	Disk   *cache.Cache // nil when the command keeps no part cache
	Root   *segfs.Root  // nil for a command without a tree (restore)
	// Version is what `segfs --version` prints (the status report's);
	// BuildVersion and Revision are the version alone and the VCS commit
	// (segfs_build_info's labels).
	Version, BuildVersion, Revision string
}
