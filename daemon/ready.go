package daemon

// Readiness: how a mount tells whoever started it that it serves. Two
// listeners may wait for that: systemd, through the notify socket of a
// Type=notify unit (NOTIFY_SOCKET, the sd_notify(3) protocol), and the
// foreground process of the mount helper form (helper.go), through the
// ready pipe it hands its daemon. Both are told only once the mount
// answers, so that whatever starts after them finds the files there.

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/mountinfo"
)

const (
	// readyFDEnv names the descriptor of the ready pipe in the
	// environment of a daemon the helper form starts.
	readyFDEnv = "SEGFS_READY_FD"
	// readyLine is what the daemon writes on the ready pipe once the
	// mount serves; the pipe closing without it means the mount failed.
	readyLine = "ready\n"
	// readyCheckTimeout bounds the stat that confirms the mount answers.
	// A fresh mount answers at once; one that does not within this long
	// is not reported ready.
	readyCheckTimeout = 10 * time.Second
	// notifyTimeout bounds a send to the notify socket, which blocks
	// while the receiver's queue is full.
	notifyTimeout = 5 * time.Second
)

// readyPipe is the write end of the ready pipe when this process is the
// helper form's daemon, else nil. TakeReadyPipe sets it before main runs;
// after that only the goroutine that runs the mount touches it.
var readyPipe *os.File

// TakeReadyPipe takes the ready pipe that readyFDEnv names, if any, and
// reports whether it did. The variable is removed from the environment
// and the descriptor made close-on-exec, so that no program segfs runs
// (fusermount3) inherits it: a copy of the write end held elsewhere would
// keep the foreground process waiting after this one exited.
func TakeReadyPipe() bool {
	v, ok := os.LookupEnv(readyFDEnv)
	if !ok {
		return false
	}
	os.Unsetenv(readyFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "segfs: ignoring %s=%q: not a descriptor above stderr\n", readyFDEnv, v)
		return false
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		fmt.Fprintf(os.Stderr, "segfs: ignoring %s=%d: %v\n", readyFDEnv, fd, err)
		return false
	}
	syscall.CloseOnExec(fd)
	readyPipe = os.NewFile(uintptr(fd), "segfs ready pipe")
	return true
}

// SignalReady tells systemd and the helper form's foreground process that
// the mount at mountpoint serves. It first confirms that the mount answers:
// a stat of mountpoint must reach the segfs mount's own root, not the
// directory beneath it. If it does not, nothing is reported ready; under
// systemd its start timeout then stops the service. The helper form's
// daemon stops itself (SIGTERM, which the mount handles by unmounting):
// its foreground process, and mount(8) with it, waits for its exit once
// the ready pipe closes without the line.
func SignalReady(mountpoint string, log *slog.Logger) {
	source, err := confirmServing(mountpoint, readyCheckTimeout)
	if err != nil {
		log.Error("the mount does not answer; not reporting it ready", "mountpoint", mountpoint, "err", err)
		if readyPipe != nil {
			closeReadyPipe(log)
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		}
		return
	}
	announceReady(fmt.Sprintf("serving %s at %s", source, mountpoint), log)
}

// announceReady sends READY=1 with status to systemd and writes the ready
// pipe's line, then closes the pipe.
func announceReady(status string, log *slog.Logger) {
	if err := sdNotify("READY=1\nSTATUS=" + status); err != nil {
		log.Warn("systemd readiness notification failed", "err", err)
	}
	if readyPipe != nil {
		if _, err := io.WriteString(readyPipe, readyLine); err != nil {
			log.Warn("ready pipe", "err", fmt.Errorf("write: %w", err))
		}
		closeReadyPipe(log)
	}
}

func closeReadyPipe(log *slog.Logger) {
	if readyPipe == nil {
		return
	}
	if err := readyPipe.Close(); err != nil {
		log.Debug("ready pipe", "err", fmt.Errorf("close: %w", err))
	}
	readyPipe = nil
}

// SignalStopping tells systemd that the mount is going away.
func SignalStopping(log *slog.Logger) {
	if err := sdNotify("STOPPING=1\nSTATUS=unmounting"); err != nil {
		log.Warn("systemd stopping notification failed", "err", err)
	}
}

// confirmServing checks, within timeout, that mountpoint is a segfs mount
// that answers, and returns its source as mountinfo shows it. The stat
// runs on a goroutine of its own, which a mount that never answers leaves
// blocked: the caller goes on (and soon unmounts) rather than hang.
func confirmServing(mountpoint string, timeout time.Duration) (string, error) {
	type result struct {
		source string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		s, err := mountAnswers(mountpoint)
		done <- result{s, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r.source, r.err
	case <-t.C:
		return "", fmt.Errorf("statfs %s: no answer within %v", mountpoint, timeout)
	}
}

// mountAnswers returns the source of the segfs mount at mountpoint once
// mountinfo lists it and its server answers a statfs.
func mountAnswers(mountpoint string) (string, error) {
	e, ok, err := mountinfo.Find(mountpoint)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", fmt.Errorf("%s is not a mount point in mountinfo", mountpoint)
	case e.FsType != segfs.FuseType:
		return "", fmt.Errorf("%s is a %s mount, not %s", mountpoint, e.FsType, segfs.FuseType)
	}
	// statfs, not stat: it reaches the server every time, and leaves no
	// attributes in the kernel's cache (which would let a stat of a
	// mount whose server died succeed for the attribute timeout).
	var st unix.Statfs_t
	if err := unix.Statfs(mountpoint, &st); err != nil {
		return "", fmt.Errorf("statfs %s: %w", mountpoint, err)
	}
	if st.Type != unix.FUSE_SUPER_MAGIC {
		return "", fmt.Errorf("statfs %s: file system type %#x, not FUSE", mountpoint, st.Type)
	}
	return e.Source, nil
}

// sdNotify sends state, newline-separated VAR=value assignments, in one
// datagram to systemd's notify socket when NOTIFY_SOCKET names one; with
// no NOTIFY_SOCKET it does nothing. A name starting with "@" is an
// abstract socket (its first byte is NUL).
func sdNotify(state string) error {
	addr := os.Getenv("NOTIFY_SOCKET")
	switch {
	case addr == "":
		return nil
	case addr[0] == '@':
		addr = "\x00" + addr[1:]
	case addr[0] != '/':
		return fmt.Errorf("NOTIFY_SOCKET=%q: neither a socket path nor an abstract name (@...)", addr)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify socket: %w", err)
	}
	defer conn.Close()
	if err := conn.SetWriteDeadline(time.Now().Add(notifyTimeout)); err != nil {
		return fmt.Errorf("notify socket: %w", err)
	}
	n, err := conn.Write([]byte(state))
	if err == nil && n < len(state) {
		err = errors.New("short write")
	}
	if err != nil {
		return fmt.Errorf("notify socket: send %q: %w", state, err)
	}
	return nil
}
