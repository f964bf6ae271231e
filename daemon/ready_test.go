package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenNotify listens on a unixgram socket named name, as systemd does,
// and returns a function that receives one datagram.
func listenNotify(t *testing.T, name string) func() string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return func() string {
		t.Helper()
		buf := make([]byte, 4096)
		if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, _, err := conn.ReadFromUnix(buf)
		if err != nil {
			t.Fatalf("receive a notification: %v", err)
		}
		return string(buf[:n])
	}
}

func TestSdNotify(t *testing.T) {
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	for _, c := range []struct {
		name   string
		listen string // the address the listener binds, and NOTIFY_SOCKET
	}{
		{"path", filepath.Join(t.TempDir(), "notify")},
		// Go binds a name starting with "@" as an abstract socket.
		{"abstract", "@segfs-test-" + hex.EncodeToString(suffix[:])},
	} {
		t.Run(c.name, func(t *testing.T) {
			recv := listenNotify(t, c.listen)
			t.Setenv("NOTIFY_SOCKET", c.listen)
			if err := sdNotify("READY=1\nSTATUS=x"); err != nil {
				t.Fatal(err)
			}
			if got := recv(); got != "READY=1\nSTATUS=x" {
				t.Errorf("received %q", got)
			}
			SignalStopping(slog.Default())
			if got := recv(); !strings.HasPrefix(got, "STOPPING=1\n") {
				t.Errorf("received %q, want STOPPING=1 first", got)
			}
		})
	}
}

func TestSdNotifyNoSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := sdNotify("READY=1"); err != nil {
		t.Errorf("without NOTIFY_SOCKET: %v", err)
	}
	t.Setenv("NOTIFY_SOCKET", "vsock:2:1234")
	if err := sdNotify("READY=1"); err == nil {
		t.Error("NOTIFY_SOCKET=vsock:...: no error")
	}
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "nobody"))
	if err := sdNotify("READY=1"); err == nil {
		t.Error("no listener: no error")
	}
}

// TestAnnounceReady checks both listeners: the notify socket gets
// READY=1 with the status, the ready pipe its line and then its end.
func TestAnnounceReady(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	recv := listenNotify(t, sock)
	t.Setenv("NOTIFY_SOCKET", sock)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	readyPipe = w
	t.Cleanup(func() { readyPipe = nil })

	announceReady("serving s3://b at /mnt/x", slog.Default())
	if got := recv(); got != "READY=1\nSTATUS=serving s3://b at /mnt/x" {
		t.Errorf("notify socket received %q", got)
	}
	if readyPipe != nil {
		t.Error("the ready pipe is still open")
	}
	b, err := io.ReadAll(r) // ends only if the write end was closed
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != readyLine {
		t.Errorf("ready pipe carried %q, want %q", b, readyLine)
	}
}

func TestTakeReadyPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	// The ready pipe gets a descriptor of its own, as a daemon's fd 3 is.
	fd, err := syscall.Dup(int(w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if readyPipe != nil {
			readyPipe.Close()
		} else {
			syscall.Close(fd)
		}
		readyPipe = nil
	})

	t.Setenv(readyFDEnv, "1")
	if TakeReadyPipe() || readyPipe != nil {
		t.Error("took stdout as the ready pipe")
	}
	t.Setenv(readyFDEnv, "999999")
	if TakeReadyPipe() || readyPipe != nil {
		t.Error("took a closed descriptor as the ready pipe")
	}
	t.Setenv(readyFDEnv, strconv.Itoa(fd))
	if !TakeReadyPipe() || readyPipe == nil {
		t.Fatal("did not take the ready pipe")
	}
	if _, ok := os.LookupEnv(readyFDEnv); ok {
		t.Errorf("%s is still in the environment", readyFDEnv)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("the ready pipe is not close-on-exec (flags %#x, %v)", flags, err)
	}
}
