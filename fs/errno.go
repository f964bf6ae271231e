package fs

import (
	"context"
	"errors"
	"log/slog"
	"syscall"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/reader"
)

// toErrno converts an error from the read path into the errno the kernel
// returns to the application, and logs it once. It is the only place where
// errors become errnos.
func toErrno(log *slog.Logger, op string, key string, err error) syscall.Errno {
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
	if errors.As(err, &logged) {
		log.Debug("read failed", "op", op, "key", key, "errno", errno.Error(), "err", err)
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
