package shaper

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// spliceMover holds a direction's chunks in a ring of pipes: splice(2)
// moves the bytes from the source socket into a pipe and, when due, from
// the pipe to the destination socket, without copying them into the
// process (measured in docs/BENCH.md: the buffered proxy's two copies
// cost about 0.4 CPU s per GB, an eighth of the machine's CPU during a
// cold sequential read). A chunk lies in one pipe; the reader moves on to the
// next pipe when one is full. Chunks leave in the order they came, so
// each pipe's bytes leave in its own order too.
type spliceMover struct {
	dst, src syscall.RawConn
	pipes    []pipe
	next     int // the pipe the reader fills
	fulls    int // reads that found every pipe full; the reader's
}

type pipe struct{ r, w int } // both ends non-blocking

// probePipeSize returns the pipe size the shaper uses: shapeQueued if a
// pipe may be that large, else the largest an unprivileged process may
// make (/proc/sys/fs/pipe-max-size, 1 MiB by default), if that is at least
// a sixteenth of it.
func probePipeSize() (int, error) {
	for size := shapeQueued; size >= shapeQueued/16; size /= 2 {
		p, err := newPipe(size)
		if err == nil {
			p.close()
			return size, nil
		}
		if !errors.Is(err, unix.EPERM) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("shaper: no pipe of %d KiB or more allowed", shapeQueued/16>>10)
}

func newPipe(size int) (pipe, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return pipe{}, fmt.Errorf("shaper: pipe: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, size); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return pipe{}, fmt.Errorf("shaper: pipe of %d KiB: %w", size>>10, err)
	}
	return pipe{r: p[0], w: p[1]}, nil
}

func (p pipe) close() {
	unix.Close(p.r)
	unix.Close(p.w)
}

// newSpliceMover makes n pipes of pipeSize each.
func newSpliceMover(dst, src *net.TCPConn, pipeSize, n int) (*spliceMover, error) {
	drc, err := dst.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("shaper: %w", err)
	}
	src2, err := src.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("shaper: %w", err)
	}
	m := &spliceMover{dst: drc, src: src2}
	for range n {
		p, err := newPipe(pipeSize)
		if err != nil {
			m.close()
			return nil, err
		}
		m.pipes = append(m.pipes, p)
	}
	return m, nil
}

func (m *spliceMover) close() {
	for _, p := range m.pipes {
		p.close()
	}
}

// read splices up to room bytes (at most shapeChunk) from the source
// socket into a pipe, waiting for the socket to have some. It returns
// io.EOF at the socket's end, and errPipeFull when the socket is
// readable (bytes or its end wait) but every pipe is full (a pipe's slots may hold less than a page each,
// so a byte count below the pipes' size does not rule that out).
func (m *spliceMover) read(room int) (held, int, error) {
	var n, full int
	var serr error
	err := m.src.Read(func(fd uintptr) bool {
		for {
			k, e := unix.Splice(int(fd), nil, m.pipes[m.next].w, nil, min(room, shapeChunk), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch e {
			case nil:
				n = int(k)
				if n == 0 {
					serr = io.EOF
				}
				return true
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				// Either side may be the cause: a readable socket (bytes
				// waiting, or its end) means the pipe is full.
				if !readable(int(fd)) {
					return false // wait until the socket is readable
				}
				if full++; full == len(m.pipes) {
					m.fulls++
					serr = errPipeFull
					return true
				}
				m.next = (m.next + 1) % len(m.pipes)
			default:
				serr = fmt.Errorf("shaper: splice from socket: %w", e)
				return true
			}
		}
	})
	if err != nil {
		return held{}, 0, err
	}
	return held{pipe: m.next}, n, serr
}

// write splices n bytes from the chunk's pipe to the destination socket,
// waiting while the socket's send buffer is full. The pipe holds them:
// the reader counted them in.
func (m *spliceMover) write(h held, _, n int) (bool, error) {
	var werr error
	waited := false
	err := m.dst.Write(func(fd uintptr) bool {
		for n > 0 {
			k, e := unix.Splice(m.pipes[h.pipe].r, nil, int(fd), nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case e == unix.EINTR:
				continue
			case e == unix.EAGAIN:
				waited = true
				return false // wait until the socket is writable
			case e != nil:
				werr = fmt.Errorf("shaper: splice to socket: %w", e)
				return true
			case k == 0:
				werr = fmt.Errorf("shaper: pipe empty with %d bytes to send", n)
				return true
			}
			n -= int(k)
		}
		return true
	})
	if err != nil {
		return waited, err
	}
	return waited, werr
}

func (m *spliceMover) release(held) {}

// readable reports whether a read of the socket would not block: bytes,
// its end or an error wait.
func readable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}
