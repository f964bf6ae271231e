package reader

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrInternal marks a read that failed because segfs itself broke an
// invariant (a panic on the request's path). The read fails with EIO and
// the daemon goes on serving every other file.
var ErrInternal = errors.New("segfs internal error")

// catchPanic, deferred, turns a panic of the calling goroutine into an
// error in *err that wraps ErrInternal and carries the stack. Every
// goroutine that runs on a remote object's bytes or its listed size
// defers it around that work: the part and range fetches and a split
// fetch's ranges (calls.go, ranges.go, split.go), the halves of a small
// read across a part border (reader.go), frame decodes (frames.go), and,
// in the FUSE edge, the read handler. Bad input must cost one request,
// never the daemon.
func catchPanic(err *error, what string) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%s: %w: %v\n%s", what, ErrInternal, p, debug.Stack())
	}
}

// guard runs f, turning a panic into an error as catchPanic does.
func guard(what string, f func() error) (err error) {
	defer catchPanic(&err, what)
	return f()
}

// LoggedError marks an error whose cause was logged once already where
// it was found (an object refused for good): every read of it fails
// alike, and the edge logs them at debug level only.
type LoggedError struct{ error }

func (e LoggedError) Unwrap() error { return e.error }
