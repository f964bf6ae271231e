// Package mountinfo reads the kernel's table of mounts (/proc/self/mountinfo)
// and acts on a FUSE mount found there: it names a mount point as the
// kernel does, aborts a connection whose server is gone, and unmounts.
package mountinfo

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Entry is one line of /proc/self/mountinfo.
type Entry struct {
	Dev    string // "major:minor" of the mounted file system
	Dir    string // mount point
	FsType string // e.g. "fuse.segfs"
	Source string // e.g. "s3://bucket/prefix"
}

// Canonical returns dir as the kernel names its mount point:
// absolute, with every symlink on the way resolved, dir itself included
// when it is one. The parents are resolved by EvalSymlinks; dir itself
// is looked at with lstat only when mountinfo lists no mount there,
// because an lstat of a mount point is a request to its server, which
// a wedged one never answers (a mount point is no symlink anyway).
func Canonical(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for range 40 { // the kernel's limit on links followed
		parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
		if err != nil {
			return "", err
		}
		abs = filepath.Join(parent, filepath.Base(abs))
		if _, mounted, err := find(abs); err == nil && mounted {
			return abs, nil
		}
		fi, err := os.Lstat(abs)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return abs, nil
		}
		target, err := os.Readlink(abs)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = parent + "/" + target
		}
		// The target's directories are resolved before its ".." are
		// applied, as the kernel does (sub/../x, sub a link, is not x
		// beside sub); only its last element is left for the loop.
		d, base := filepath.Split(target)
		switch base {
		case "", ".", "..":
			return filepath.EvalSymlinks(target)
		}
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			return "", err
		}
		abs = filepath.Join(rd, base)
	}
	return "", fmt.Errorf("%s: %w", dir, syscall.ELOOP)
}

// Find returns the entry of the mount whose mount point is dir
// (Canonical), if any. Stacked mounts return the topmost entry.
func Find(dir string) (Entry, bool, error) {
	abs, err := Canonical(dir)
	if err != nil {
		if abs, err = filepath.Abs(dir); err != nil {
			return Entry{}, false, fmt.Errorf("mountinfo: %w", err)
		}
	}
	return find(abs)
}

// find returns the topmost mount entry whose mount point is abs,
// an absolute path compared as it is.
func find(abs string) (Entry, bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Entry{}, false, fmt.Errorf("mountinfo: %w", err)
	}
	defer f.Close()
	var found Entry
	ok := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		e, valid := parseLine(sc.Text())
		if valid && e.Dir == abs {
			found, ok = e, true
		}
	}
	if err := sc.Err(); err != nil {
		return Entry{}, false, fmt.Errorf("mountinfo: %w", err)
	}
	return found, ok, nil
}

// parseLine parses "id parent maj:min root mountpoint opts
// [optional...] - fstype source superopts".
func parseLine(line string) (Entry, bool) {
	fields := strings.Fields(line)
	sep := -1
	for i, f := range fields {
		if f == "-" && i >= 6 {
			sep = i
			break
		}
	}
	if sep < 0 || len(fields) < sep+3 {
		return Entry{}, false
	}
	return Entry{
		Dev:    fields[2],
		Dir:    unescape(fields[4]),
		FsType: fields[sep+1],
		Source: unescape(fields[sep+2]),
	}, true
}

// unescape undoes the kernel's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			okOct := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					okOct = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if okOct {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// fusectlDir is where the kernel's FUSE control file system is mounted.
const fusectlDir = "/sys/fs/fuse/connections"

// Abort aborts the FUSE connection of the mount at dir through
// the fusectl file system (mounting it first if needed, which takes root).
// Every request waiting on the connection then fails, which frees a
// process stuck in the kernel on a mount whose server is dead, including
// the dead server itself.
func Abort(dir string) error {
	e, ok, err := Find(dir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("abort %s: not a mount point", dir)
	}
	_, minor, found := strings.Cut(e.Dev, ":")
	if !found {
		return fmt.Errorf("abort %s: bad device %q", dir, e.Dev)
	}
	ctl := filepath.Join(fusectlDir, minor, "abort")
	if _, err := os.Stat(ctl); os.IsNotExist(err) {
		// Mount fusectl; if another process mounted it meanwhile, fine.
		_ = syscall.Mount("fusectl", fusectlDir, "fusectl", 0, "")
	}
	if err := os.WriteFile(ctl, []byte("1"), 0); err != nil {
		return fmt.Errorf("abort FUSE connection of %s: %w", dir, err)
	}
	return nil
}

// Unmount unmounts dir: directly as root (umount2, MNT_DETACH when lazy),
// else with fusermount3. A lazy unmount leaves the namespace at once and
// the kernel drops the mount when the last open file is closed. An
// unmount that open files prevent wraps syscall.EBUSY, from fusermount3's
// text too.
func Unmount(dir string, lazy bool) error {
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
