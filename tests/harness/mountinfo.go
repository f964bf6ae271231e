package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// mountEntry is one line of /proc/self/mountinfo, reduced to what the
// harness needs.
type mountEntry struct {
	Point  string // mount point, unescaped
	FSType string // e.g. "fuse.segfs"
	Source string
}

// readMountInfo parses /proc/self/mountinfo.
func readMountInfo() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if e, ok := parseMountInfoLine(sc.Text()); ok {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	return out, nil
}

// parseMountInfoLine parses "id parent maj:min root point opts [tags...] -
// fstype source superopts" (proc(5)).
func parseMountInfoLine(line string) (mountEntry, bool) {
	fields := strings.Fields(line)
	if len(fields) < 10 {
		return mountEntry{}, false
	}
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || sep+2 >= len(fields) {
		return mountEntry{}, false
	}
	return mountEntry{
		Point:  unescapeMountField(fields[4]),
		FSType: fields[sep+1],
		Source: unescapeMountField(fields[sep+2]),
	}, true
}

// unescapeMountField undoes the kernel's octal escapes (\040 for a space,
// \011, \012, \134).
func unescapeMountField(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// IsMounted reports whether a FUSE file system is mounted at dir.
func IsMounted(dir string) (bool, error) {
	entries, err := readMountInfo()
	if err != nil {
		return false, err
	}
	dir = filepath.Clean(dir)
	for _, e := range entries {
		if e.Point == dir && strings.HasPrefix(e.FSType, "fuse") {
			return true, nil
		}
	}
	return false, nil
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
