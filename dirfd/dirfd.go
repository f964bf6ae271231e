// Package dirfd holds the few system calls segfs makes relative to a
// directory descriptor it holds, never following a symlink at the name
// it gives: the part cache's directory and a restore's DEST_DIR are
// each reached only this way, so that whoever else can change what is
// below them cannot redirect a write. Each call is retried when a signal
// interrupts it (Go programs are interrupted often: SIGURG preempts).
package dirfd

import (
	"os"

	"golang.org/x/sys/unix"
)

// Openat opens name in the directory dfd with flags, adding O_NOFOLLOW
// (a symlink at name fails with ELOOP, or ENOTDIR with O_DIRECTORY) and
// O_CLOEXEC.
func Openat(dfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// ReadNames lists the directory dfd through a descriptor of its own, so
// that listings do not share dfd's offset and may run concurrently.
func ReadNames(dfd int) ([]string, error) {
	fd, err := Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

// Fstatat fills st with what name in dfd is, a symlink not followed.
func Fstatat(dfd int, name string, st *unix.Stat_t) error {
	for {
		if err := unix.Fstatat(dfd, name, st, unix.AT_SYMLINK_NOFOLLOW); err != unix.EINTR {
			return err
		}
	}
}
