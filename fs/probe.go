package fs

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// ProbePassthrough checks that the kernel accepts a backing file from the
// cache directory for passthrough on server's connection: that it offered
// passthrough at init, and that this process may register a file (it
// takes CAP_SYS_ADMIN, and a cache directory on a file system that is not
// itself stacked).
func ProbePassthrough(server *fuse.Server, cacheDir string) error {
	if server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return errors.New("the kernel does not offer FUSE passthrough (Linux 6.9 or later)")
	}
	f, err := os.Open(cacheDir + "/lock")
	if err != nil {
		return fmt.Errorf("passthrough probe: %w", err)
	}
	defer f.Close()
	id, errno := server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(f.Fd())})
	if errno != 0 {
		switch errno {
		case syscall.EPERM:
			return errors.New("registering a passthrough file takes CAP_SYS_ADMIN (run as root)")
		case syscall.ELOOP:
			return fmt.Errorf("the file system of %s is itself stacked (overlayfs?); passthrough needs the cache on a plain file system", cacheDir)
		}
		return fmt.Errorf("registering a passthrough file from %s: %w", cacheDir, errno)
	}
	if errno := server.UnregisterBackingFd(id); errno != 0 {
		return fmt.Errorf("unregistering the passthrough probe: %w", errno)
	}
	return nil
}
