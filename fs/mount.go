package fs

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/segfs/segfs/mountinfo"
)

// MountConfig configures Mount.
type MountConfig struct {
	// FsName is shown as the mount's source in /proc/mounts.
	FsName string
	// MaxRead is the largest read the kernel sends, in bytes. Default 1 MiB.
	MaxRead int
	// Readahead is how far ahead of a sequential reader the kernel asks,
	// in bytes (the mount's read_ahead_kb, set as root). Default MaxRead.
	// The kernel sends it as reads of up to MaxRead, all in flight at
	// once. It is also the span the kernel reads around a page fault of a
	// mapped file that has not asked for MADV_RANDOM.
	Readahead int
	// Debug logs every FUSE request.
	Debug bool
	// Logger receives go-fuse's own messages. Default slog.Default().
	Logger *slog.Logger
	// AllowOther lets every user use the mount (the kernel's allow_other),
	// as the tree's owner and modes permit. Without it or AllowRoot, the
	// kernel refuses every user but the mounting one.
	AllowOther bool
	// AllowRoot lets the mounting user and root use the mount, and no one
	// else (libfuse's allow_root; see ownerAndRoot).
	AllowRoot bool
}

// FuseType is the file system type of a segfs mount in /proc/self/mountinfo.
const FuseType = "fuse.segfs"

// Mount mounts root read-only at mountpoint and starts serving it. As root
// it mounts directly; otherwise it uses fusermount3, which allows
// AllowOther and AllowRoot to a user other than root only with
// user_allow_other in its configuration. With either, the kernel checks
// every caller against the owner and modes the tree shows
// (default_permissions). The caller waits on the returned server and
// unmounts it.
func Mount(mountpoint string, root *Root, cfg MountConfig) (*fuse.Server, error) {
	if cfg.MaxRead <= 0 {
		cfg.MaxRead = 1 << 20
	}
	if cfg.Readahead <= 0 {
		cfg.Readahead = cfg.MaxRead
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AllowOther && cfg.AllowRoot {
		return nil, fmt.Errorf("mount %s: allow_other and allow_root exclude each other", mountpoint)
	}
	// A node never changes (a refresh gives a changed name a new node and
	// invalidates the kernel's entry of each name it changes), so the
	// kernel may keep entries and attributes for long. Under allow_root it keeps none: it answers
	// from them without asking segfs, whoever asks (see ownerAndRoot).
	ttl := time.Hour
	if cfg.AllowRoot {
		ttl = 0
	}
	opts := &gofs.Options{
		EntryTimeout: &ttl,
		AttrTimeout:  &ttl,
		// A mode of 0 stays 0, not go-fuse's 0644 or 0755.
		NullPermissions: true,
		// The root's st_ino; the other nodes number themselves (OnAdd).
		RootStableAttr: &gofs.StableAttr{Ino: RootIno},
		MountOptions: fuse.MountOptions{
			FsName:       cfg.FsName,
			Name:         "segfs",
			MaxWrite:     cfg.MaxRead, // go-fuse sets max_read to MaxWrite
			MaxReadAhead: cfg.MaxRead,
			Debug:        cfg.Debug,
			Logger:       log.New(slogWriter{log: cfg.Logger, trace: cfg.Debug}, "", 0),
			AllowOther:   cfg.AllowOther || cfg.AllowRoot,
			// With no attributes cached (allow_root), the automatic
			// invalidation would have the kernel ask for them before
			// every read; a node's bytes never change (a refresh gives a
			// changed name a new node), so nothing is lost.
			ExplicitDataCacheControl: cfg.AllowRoot,
		},
	}
	if os.Geteuid() == 0 {
		opts.DirectMount = true
		opts.DirectMountFlags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_RDONLY
	} else {
		opts.Options = append(opts.Options, "ro")
	}
	// gofs.Mount, with the allow_root filter between the kernel and the
	// tree.
	raw := gofs.NewNodeFS(root, opts)
	raw = &viewGuard{RawFileSystem: raw, view: &root.view}
	if cfg.AllowRoot {
		// The mounting user, as fusermount3 takes it (the real uid); a
		// direct mount is root's.
		raw = &ownerAndRoot{RawFileSystem: raw, owner: uint32(os.Getuid())}
	}
	if cfg.AllowOther || cfg.AllowRoot {
		// The kernel checks each caller against the tree's owner and
		// modes. Without it, every user the mount admits reads every
		// file. A mount of its owner alone needs no check (the kernel
		// admits no other user) and goes without: the check has the
		// kernel fetch and keep the root's attributes at mount, which
		// would let a stat of the mountpoint succeed from them after a
		// crash instead of failing with ENOTCONN. go-fuse passes the
		// option on both ways it mounts: in the data of mount(2), and to
		// fusermount3's -o.
		opts.MountOptions.Options = append(opts.MountOptions.Options, "default_permissions")
	}
	server, err := fuse.NewServer(raw, mountpoint, &opts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		// The serve loop ends by itself: it has no mount to serve.
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	if err := setReadahead(mountpoint, cfg.Readahead); err != nil {
		cfg.Logger.Debug("kernel readahead left at its default", "err", err)
	}
	return server, nil
}

// setReadahead sets the kernel's readahead for the mount to size bytes.
// The kernel caps a FUSE mount's readahead at its default (128 KiB)
// whatever the file system asks for at init, which splits a sequential
// reader's stream into small requests; the mount's backing device setting
// lifts the cap. It takes root; otherwise the default stays.
func setReadahead(mountpoint string, size int) error {
	e, ok, err := mountinfo.Find(mountpoint)
	if err != nil || !ok {
		return fmt.Errorf("readahead: mount not found: %v", err)
	}
	path := "/sys/class/bdi/" + e.Dev + "/read_ahead_kb"
	if err := os.WriteFile(path, []byte(fmt.Sprint(size>>10)), 0); err != nil {
		return fmt.Errorf("readahead: %w", err)
	}
	return nil
}

// slogWriter passes go-fuse's log lines to slog: at debug level, or at
// info level with trace (--debug), so that the trace the operator asked
// for is shown at the default --log-level.
type slogWriter struct {
	log   *slog.Logger
	trace bool
}

func (w slogWriter) Write(p []byte) (int, error) {
	level := slog.LevelDebug
	if w.trace {
		level = slog.LevelInfo
	}
	w.log.Log(context.Background(), level, "go-fuse: "+string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && p[len(p)-1] == '\n' {
		p = p[:len(p)-1]
	}
	return p
}
