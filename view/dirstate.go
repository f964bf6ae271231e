package view

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// The timing of a lazy tree's resolutions. RetryAfter is how long a
// directory that failed to resolve answers with its error before its
// next use tries again; ResolveTimeout bounds one resolution, which no
// caller's interrupt cuts short (its result serves every caller that
// waits for it); RelistEvery is the least time between two listings of
// one directory that lookups of names it does not hold ask for (tools
// probe names such as .git at every call, and any local user of an
// --allow-other mount can stat random names: each such name costs a
// remote listing at most once an interval, in all).
const (
	RetryAfter     = 30 * time.Second
	ResolveTimeout = 2 * time.Minute
	RelistEvery    = 5 * time.Second
)

// DirState is one lazily resolved directory's state: whether it is
// resolved, when it was last listed, and a failure to answer with until
// RetryAfter. Resolve runs one resolution at a time, which every caller
// waiting for it shares. Its zero value is a directory not resolved.
type DirState struct {
	// ready is set once the directory is listed (or its files added)
	// and cleared by Invalidate: a lookup that finds it set, and the
	// name it asks for, needs no remote call.
	ready atomic.Bool
	// listedAt is when the directory's last listing ended (Unix
	// nanoseconds; stamped at its start too): a lookup of a name it
	// lacks lists it again only RelistEvery after.
	listedAt atomic.Int64
	// gen counts the Invalidates: a listing that began before one does
	// not set ready, so the relisting the refresh asked for still
	// happens.
	gen atomic.Uint64

	mu    sync.Mutex // held while resolving: other users of the directory wait for the one resolution
	shown bool       // a listing of directories was shown: a failed relisting keeps it
	err   error
	at    time.Time // when err was found
}

// Ready reports whether the directory is resolved and not asked to list
// again.
func (st *DirState) Ready() bool { return st.ready.Load() }

// RelistDue reports whether a lookup of a name the directory lacks may
// list it again at now.
func (st *DirState) RelistDue(now time.Time) bool {
	return now.Sub(time.Unix(0, st.listedAt.Load())) >= RelistEvery
}

// Invalidate makes the directory list again at its next use (a
// refresh): a listing in flight cannot set it back.
func (st *DirState) Invalidate() {
	st.gen.Add(1) // before ready
	st.ready.Store(false)
}

// Relisted forgets when the directory was last listed, so that the next
// lookup of a name it lacks lists it again (tests).
func (st *DirState) Relisted() { st.listedAt.Store(0) }

// Resolve resolves the directory named name once with fn: a listing of
// directories (dirs) or the adding of a shard's files; with relist, a
// directory of directories is listed again if RelistEvery has passed
// since its last listing. fn runs under a context of ResolveTimeout that
// ctx's cancellation does not end. A failure is logged once and
// answered for RetryAfter before it is tried again; a relisting that
// fails keeps the listing shown (logged), to be tried again at the next
// one due. Call with no lock of the tree held: fn makes remote calls.
func (st *DirState) Resolve(ctx context.Context, log *slog.Logger, name string, dirs, relist bool, fn func(ctx context.Context) error) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	if st.ready.Load() && !(relist && st.RelistDue(now)) {
		return nil // listed, or resolved, by the caller before this one
	}
	if !st.shown && st.err != nil && now.Sub(st.at) < RetryAfter {
		return st.err
	}
	st.listedAt.Store(now.UnixNano())
	gen := st.gen.Load()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ResolveTimeout)
	defer cancel()
	err := fn(ctx)
	st.listedAt.Store(time.Now().UnixNano()) // a slow listing is not followed at once by the next
	if name == "" {
		name = "/"
	}
	switch {
	case err != nil && st.shown:
		log.Warn("relisting a directory failed; it keeps its last listing", "dir", name, "retry_after", RelistEvery, "err", err)
	case err != nil:
		st.err, st.at = err, now
		log.Error("directory not shown: its lookups fail with EIO", "dir", name, "retry_after", RetryAfter, "err", err)
		return err
	default:
		st.err = nil
		st.shown = dirs
	}
	st.ready.Store(true)
	if st.gen.Load() != gen {
		st.ready.Store(false) // an Invalidate came since: its listing is still to be made
	}
	return nil
}
