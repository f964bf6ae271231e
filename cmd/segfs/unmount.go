package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"

	segfs "github.com/segfs/segfs/fs"
)

// unmountCmd is `segfs unmount`.
type unmountCmd struct {
	Mountpoint string `arg:"" help:"Where a segfs file system is mounted."`
	Lazy       bool   `help:"Detach the mount even while files are open (they keep working until closed)."`
}

// Run unmounts a segfs mount, refusing mounts of other file systems.
func (c *unmountCmd) Run(log *slog.Logger) error {
	e, mounted, err := segfs.FindMount(c.Mountpoint)
	if err != nil {
		return err
	}
	if !mounted {
		return fmt.Errorf("%s is not a mount point", c.Mountpoint)
	}
	if e.FsType != segfs.FuseType {
		return fmt.Errorf("%s is a %s mount, not segfs; refusing to unmount it", c.Mountpoint, e.FsType)
	}
	if c.Lazy {
		err = detach(c.Mountpoint)
	} else {
		err = unmount(c.Mountpoint)
	}
	if errors.Is(err, syscall.EBUSY) {
		return fmt.Errorf("unmount %s: files are open (close them, or use --lazy): %w", c.Mountpoint, err)
	}
	if err != nil {
		return err
	}
	log.Info("unmounted", "mountpoint", c.Mountpoint)
	return nil
}

// unmount unmounts dir: directly as root, else with fusermount3.
func unmount(dir string) error {
	return umount(dir, false)
}

// detach lazily unmounts dir: it leaves the namespace at once and the
// kernel drops it when the last open file is closed.
func detach(dir string) error {
	return umount(dir, true)
}

func umount(dir string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = syscall.MNT_DETACH
		}
		if err := syscall.Unmount(dir, flags); err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
		return nil
	}
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	out, err := exec.Command("fusermount3", append(args, dir)...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "busy") {
			// fusermount3 reports only text; keep the errno for callers.
			return fmt.Errorf("fusermount3 -u %s: %s: %w", dir, msg, syscall.EBUSY)
		}
		return fmt.Errorf("fusermount3 -u %s: %s: %w", dir, msg, err)
	}
	return nil
}
