package fs

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"syscall"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/reader"
)

// toErrno converts an error from the read path into the errno the kernel
// returns to the application, and logs it once. It is the only place where
// errors become errnos.
func toErrno(log *slog.Logger, op string, key string, err error) syscall.Errno {
	return toErrnoOnce(log, op, key, err, nil)
}

// toErrnoOnce is toErrno for the reads of one file: once, when not nil,
// records that the file's object was found changed or gone from the
// store, and only the first such read is logged at warn (the others at
// debug): a reader of a file whose blob the writer deleted fails every
// uncached read alike, and a log line each would bury the others.
func toErrnoOnce(log *slog.Logger, op string, key string, err error, once *atomic.Bool) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The reader was interrupted; nothing is wrong with the object.
		log.Debug("interrupted", "op", op, "key", key, "err", err)
		return syscall.EINTR
	case errors.Is(err, fetcher.ErrChanged):
		errno = syscall.ESTALE
	case errors.Is(err, fetcher.ErrNotFound):
		errno = syscall.ESTALE
	case errors.As(err, &errno) && passThrough[errno]:
		// A local store's permission or memory error says more than EIO.
	default:
		// Everything else, including the errnos of a failed connection
		// (ECONNRESET, ETIMEDOUT, ...) that a remote read may carry after
		// its retries, is an I/O error to the application: a file read
		// has no business returning network errnos.
		errno = syscall.EIO
	}
	var logged reader.LoggedError
	if errors.As(err, &logged) || errno == syscall.ESTALE && once != nil && once.Swap(true) {
		log.Debug("read failed", "op", op, "key", key, "errno", errno.Error(), "err", err)
		return errno
	}
	if errno == syscall.ESTALE && once != nil {
		log.Warn("read failed: the store no longer holds this version of the file; its reads of bytes not cached fail alike (logged once per file, counted in stale_reads)",
			"op", op, "key", key, "errno", errno.Error(), "err", err)
		return errno
	}
	log.Warn("read failed", "op", op, "key", key, "errno", errno.Error(), "err", err)
	return errno
}

// passThrough are the errnos from below that reach the application as
// they are; any other becomes EIO.
var passThrough = map[syscall.Errno]bool{
	syscall.EACCES: true,
	syscall.EPERM:  true,
	syscall.ENOMEM: true,
	syscall.EIO:    true,
}
