package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
)

// mountCmd is `segfs mount`.
type mountCmd struct {
	Source     string `arg:"" help:"Remote store: s3://bucket[/prefix] or file:///dir."`
	Mountpoint string `arg:"" help:"An existing empty directory to mount on."`

	Endpoint  string `help:"Base URL of an S3-compatible service (e.g. http://127.0.0.1:7070). Default: AWS S3."`
	Region    string `help:"S3 region. Default: from the AWS config chain (AWS_REGION, ~/.aws/config), else us-east-1."`
	PathStyle bool   `name:"path-style" help:"Use path-style S3 addressing (bucket in the path), as most S3-compatible services need."`

	PartSize    byteSize      `name:"part-size" default:"8MiB" help:"Size of the aligned parts fetched and cached."`
	MaxFetches  int           `name:"max-fetches" default:"16" help:"Most remote reads in flight at once, for the whole mount."`
	MemoryCache byteSize      `name:"memory-cache" default:"128MiB" help:"Memory kept for recently read parts."`
	MaxRead     byteSize      `name:"max-read" default:"1MiB" help:"Largest read request the kernel sends (max_read)."`
	IdleTimeout time.Duration `name:"idle-timeout" default:"30s" help:"A response body that delivers no bytes for this long is re-requested."`
	MetricsAddr string        `name:"metrics-addr" help:"Serve counters as JSON at http://ADDR/stats (e.g. 127.0.0.1:9100). Off by default."`
	Debug       bool          `help:"Log every FUSE request (very verbose)."`
}

func (c *mountCmd) validate() error {
	switch {
	case c.PartSize < 4096:
		return fmt.Errorf("--part-size %v: must be at least 4KiB", c.PartSize)
	case c.PartSize > 1<<30:
		return fmt.Errorf("--part-size %v: must be at most 1GiB", c.PartSize)
	case c.MaxFetches < 1 || c.MaxFetches > 1024:
		return fmt.Errorf("--max-fetches %d: must be between 1 and 1024", c.MaxFetches)
	case c.MaxRead < 4096 || c.MaxRead > 1<<20:
		return fmt.Errorf("--max-read %v: must be between 4KiB and 1MiB", c.MaxRead)
	case c.IdleTimeout <= 0:
		return fmt.Errorf("--idle-timeout %v: must be positive", c.IdleTimeout)
	}
	return nil
}

// Run mounts and serves until the mount goes away or a signal arrives.
// Every check a user can fail (bad URL, mountpoint, bucket, credentials)
// runs before anything is mounted.
func (c *mountCmd) Run(log *slog.Logger) error {
	if err := c.validate(); err != nil {
		return err
	}
	if _, err := fetcher.ParseSource(c.Source); err != nil {
		return err
	}
	if err := checkMountpoint(c.Mountpoint); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	store, err := fetcher.Open(ctx, c.Source, fetcher.Config{
		Region:      c.Region,
		Endpoint:    c.Endpoint,
		PathStyle:   c.PathStyle,
		IdleTimeout: c.IdleTimeout,
		MaxConns:    c.MaxFetches * 2,
		Logger:      log,
	})
	if err != nil {
		return err
	}
	start := time.Now()
	objects, err := store.List(ctx)
	if err != nil {
		return fmt.Errorf("list %s: %w", store, err)
	}
	var total int64
	for _, o := range objects {
		total += o.Size
	}
	log.Info("listed", "source", store.String(), "objects", len(objects), "bytes", total, "took", time.Since(start).Round(time.Millisecond))

	reader := segfs.NewReader(store, segfs.ReaderConfig{
		PartSize:    int64(c.PartSize),
		MaxFetches:  c.MaxFetches,
		MemoryLimit: int64(c.MemoryCache),
		Logger:      log,
	})
	defer reader.Close()

	var metrics *metricsServer
	if c.MetricsAddr != "" {
		metrics, err = startMetrics(c.MetricsAddr, store, reader, log)
		if err != nil {
			return err
		}
		defer metrics.Close()
	}

	root := segfs.NewRoot(objects, reader, log)
	server, err := segfs.Mount(c.Mountpoint, root, segfs.MountConfig{
		FsName:  store.String(),
		MaxRead: int(c.MaxRead),
		Debug:   c.Debug,
		Logger:  log,
	})
	if err != nil {
		return err
	}
	log.Info("mounted", "source", store.String(), "mountpoint", c.Mountpoint)

	served := make(chan struct{})
	go func() {
		server.Wait()
		close(served)
	}()
	select {
	case <-served:
		log.Info("unmounted", "mountpoint", c.Mountpoint)
	case <-ctx.Done():
		log.Info("signal received; unmounting", "mountpoint", c.Mountpoint)
		// Fail reads still waiting on the remote, so that the kernel
		// can release the mount.
		reader.Close()
		unmountServer(server, c.Mountpoint, served, log)
	}
	logSummary(log, store, reader)
	return nil
}

// unmountServer unmounts after a signal. If files are still open it
// detaches the mount (it disappears from the namespace at once). The reader
// is closed by then, so open files could only get errors: the process
// waits a moment for replies in flight and exits, which ends the
// connection.
const detachGrace = time.Second

func unmountServer(server *fuse.Server, mountpoint string, served <-chan struct{}, log *slog.Logger) {
	err := server.Unmount()
	if err == nil {
		<-served
		return
	}
	log.Warn("mount busy; detaching it", "mountpoint", mountpoint, "err", err)
	if err := detach(mountpoint); err != nil {
		log.Error("detach failed", "mountpoint", mountpoint, "err", err)
	}
	select {
	case <-served:
	case <-time.After(detachGrace):
		log.Info("detached mount still had open files; they now fail", "mountpoint", mountpoint)
	}
}

func logSummary(log *slog.Logger, store fetcher.Store, reader *segfs.Reader) {
	c := store.Counters()
	rs := reader.Stats()
	log.Info("summary",
		"reads", rs.Reads, "read_bytes", rs.ReadBytes,
		"gets", c.Gets.Load(), "get_bytes", c.GetBytes.Load(),
		"retries", c.Retries.Load(), "read_errors", c.ReadErrors.Load())
}

// checkMountpoint fails with a clear message unless dir is an existing
// directory that nothing is mounted on.
func checkMountpoint(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		return fmt.Errorf("mountpoint %s: a dead FUSE mount is still there; clear it with `segfs unmount %s`", dir, dir)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("mountpoint %s does not exist; create the directory first", dir)
	case err != nil:
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("mountpoint %s is not a directory", dir)
	}
	if e, mounted, err := segfs.FindMount(dir); err == nil && mounted {
		return fmt.Errorf("mountpoint %s is busy: %s (%s) is already mounted there", dir, e.Source, e.FsType)
	}
	return nil
}
