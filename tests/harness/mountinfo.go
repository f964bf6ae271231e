package harness

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/segfs/segfs/mountinfo"
	"golang.org/x/sys/unix"
)

// IsMounted reports whether a FUSE file system is mounted at dir.
func IsMounted(dir string) (bool, error) {
	e, ok, err := mountinfo.Find(dir)
	if err != nil {
		return false, err
	}
	return ok && strings.HasPrefix(e.FsType, "fuse"), nil
}

// lazyUnmount detaches whatever is mounted at dir (umount -l): directly
// when privileged, else through fusermount3 -uz.
func lazyUnmount(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) { // EINVAL: not a mount point (any more)
		return nil
	}
	if !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("umount -l %s: %w", dir, err)
	}
	if out, ferr := exec.Command("fusermount3", "-u", "-z", dir).CombinedOutput(); ferr != nil {
		return fmt.Errorf("fusermount3 -uz %s: %w: %s", dir, ferr, strings.TrimSpace(string(out)))
	}
	return nil
}
