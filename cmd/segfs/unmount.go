package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/mountinfo"
	"github.com/segfs/segfs/reader"
)

// unmountCmd is `segfs unmount`.
type unmountCmd struct {
	Mountpoint string `arg:"" help:"Where a segfs file system is mounted."`
	Lazy       bool   `help:"Detach the mount even while files are open (they keep working until closed)."`
}

// Run unmounts a segfs mount, refusing mounts of other file systems.
func (c *unmountCmd) Run(log *slog.Logger) error {
	e, mounted, err := mountinfo.Find(c.Mountpoint)
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
		err = mountinfo.Unmount(c.Mountpoint, true)
	} else {
		err = mountinfo.Unmount(c.Mountpoint, false)
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

// unmountRetry is how often unmountServer tries again an unmount that
// open files keep from happening.
const unmountRetry = 100 * time.Millisecond

// detachGrace is how long unmountServer waits, once the reader is closed,
// for the replies in flight before the process exits.
const detachGrace = time.Second

// unmountServer unmounts after a first SIGINT or SIGTERM. While files are
// open the unmount fails (EBUSY): segfs keeps serving them, reads
// included, and tries again every unmountRetry for up to grace, so that
// readers that close their files in time lose nothing. Once grace is
// over, or at a second SIGINT or SIGTERM, it detaches the mount, which
// leaves the namespace at once (no mount is left behind), and closes the
// reader, which fails the reads still waiting on the remote; it waits
// detachGrace for their replies and returns. The process then exits,
// which ends the connection: the files still open fail from then on. So
// it returns within grace and about a second, whatever the readers, the
// kernel or the remote do.
func unmountServer(mountpoint string, served <-chan struct{}, sigs <-chan os.Signal, grace time.Duration, rd *reader.Reader, log *slog.Logger) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	retry := time.NewTicker(unmountRetry)
	defer retry.Stop()
	failed := false // an unmount failed (and was logged)
retrying:
	for {
		err := mountinfo.Unmount(mountpoint, false)
		if err == nil {
			// Nothing is open: the reads left are requests the kernel
			// gave up on, which need not wait for the remote.
			rd.Close()
			waitServed(served, log, "exiting before the serve loop ended", mountpoint)
			log.Info("unmounted", "mountpoint", mountpoint)
			return
		}
		if !failed {
			failed = true
			if errors.Is(err, syscall.EBUSY) {
				log.Info("files are open; serving them until they are closed", "mountpoint", mountpoint, "grace", grace)
			} else {
				log.Warn("unmount failed; serving on and trying again", "mountpoint", mountpoint, "grace", grace, "err", err)
			}
		}
		select {
		case <-served: // unmounted from outside, by segfs unmount say
			rd.Close()
			return
		case <-retry.C:
		case <-deadline.C:
			log.Warn("still mounted after --unmount-grace; detaching the mount, reads of the files still open fail",
				"mountpoint", mountpoint, "grace", grace, "err", err)
			break retrying
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				log.Info("SIGHUP received while unmounting; the view stays as it is", "mountpoint", mountpoint)
				continue
			}
			log.Warn("second signal received; detaching the mount now, reads of the files still open fail",
				"signal", signalName(sig), "mountpoint", mountpoint)
			break retrying
		}
	}
	if err := mountinfo.Unmount(mountpoint, true); err != nil {
		log.Error("detach failed", "mountpoint", mountpoint, "err", err)
	}
	rd.Close()
	waitServed(served, log, "exiting with files of the detached mount still open; they now fail", mountpoint)
}

// signalName names the signals segfs catches as a shell does.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}

// waitServed waits up to detachGrace for the serve loop to end, which it
// does once the mount is gone and the requests in flight are answered (a
// detached mount goes when its last open file is closed); else it logs
// msg.
func waitServed(served <-chan struct{}, log *slog.Logger, msg, mountpoint string) {
	select {
	case <-served:
	case <-time.After(detachGrace):
		log.Info(msg, "mountpoint", mountpoint)
	}
}
