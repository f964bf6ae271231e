package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/segfs/segfs/fetcher"
)

func TestToErrno(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, tc := range []struct {
		err  error
		want syscall.Errno
	}{
		{fmt.Errorf("read x: %w", context.Canceled), syscall.EINTR},
		{fmt.Errorf("read x: %w", fetcher.ErrChanged), syscall.ESTALE},
		{fmt.Errorf("read x: %w", fetcher.ErrNotFound), syscall.ESTALE},
		{fmt.Errorf("s3 get x: %w", reset), syscall.EIO},
		{fmt.Errorf("s3 get x: %w", syscall.ETIMEDOUT), syscall.EIO},
		{fmt.Errorf("s3 get x: %w", syscall.ECONNREFUSED), syscall.EIO},
		{fmt.Errorf("open x: %w", &os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}), syscall.EACCES},
		{errors.New("anything else"), syscall.EIO},
	} {
		if got := toErrno(log, "read", "x", tc.err); got != tc.want {
			t.Errorf("toErrno(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
