package main

import (
	"fmt"
	"log/slog"
	"syscall"

	"github.com/segfs/segfs/cache"
)

// fileNeed is how many file descriptors a mount may hold at once, term
// by term, as its flags set them. A read that finds none free fails
// with EIO (the store cannot dial, the cache cannot open a part), so the
// mount checks its open-file limit against it (checkFileLimit).
type fileNeed struct {
	Listeners int // the HTTP listeners: each one's socket and its connections at the cap
	Fetches   int // the store's connections
	Cache     int // the cache's directory, lock and subdirectories, and the files its writers write
	Reserve   int // what no flag bounds (fileReserve)
}

// fileReserve covers the descriptors no flag bounds: the FUSE device,
// stdio, the runtime's poller, the part files open for the reads in
// flight (one per FUSE read: a thread reading the mount, or one of the
// kernel's background requests) and the files of a file:// source being
// read. Not counted: the whole-object file each file open in passthrough
// mode holds (--passthrough), one per open file.
const fileReserve = 256

// fileNeedOf returns the descriptors the mount c may need.
func fileNeedOf(c *mountCmd) fileNeed {
	n := fileNeed{
		// The S3 transport keeps up to 2 × --max-fetches connections idle
		// (storeFlags.config's maxConns); at most --max-fetches GETs run
		// at once, each on a worker of the fetch pool; and as many dials
		// may be under way, to end idle when a connection came free
		// first.
		Fetches: 4 * c.MaxFetches,
		Cache:   cache.HeldDescriptors + cache.DefaultMaxWriters,
		Reserve: fileReserve,
	}
	for _, l := range c.listeners() {
		n.Listeners += l.Files()
	}
	return n
}

// Total returns the sum of the terms.
func (n fileNeed) Total() int { return n.Listeners + n.Fetches + n.Cache + n.Reserve }

// checkFileLimit warns, once, when the process's open-file limit is
// below what the mount may need. It warns rather than refuses: the need
// is a peak that most mounts never reach (the idle pool full, every
// cache subdirectory open), a mount below it serves until such a peak,
// and where segfs runs (a container, a unit) the user may not be the one
// who can raise the limit. The Go runtime has already raised the soft
// limit to the hard one, so the soft limit is what there is.
func checkFileLimit(need fileNeed, log *slog.Logger) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		log.Warn("cannot read the open-file limit (RLIMIT_NOFILE)", "err", err)
		return
	}
	warnFileLimit(need, rl.Cur, log)
}

// warnFileLimit logs the warning of checkFileLimit for a limit of limit
// descriptors, and reports whether it did.
func warnFileLimit(need fileNeed, limit uint64, log *slog.Logger) bool {
	if limit >= uint64(need.Total()) {
		return false
	}
	log.Warn("the open-file limit is below what segfs may need: at a peak, reads of the mount may fail with EIO (too many open files); raise it (ulimit -n, LimitNOFILE= in a systemd unit) or lower --max-fetches",
		"limit", limit, "need", need.Total(), "terms", fmt.Sprintf("%+v", need))
	return true
}
