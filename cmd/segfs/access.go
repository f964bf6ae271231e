package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	segfs "github.com/segfs/segfs/fs"
)

// ownerID is a --uid or --gid value: a decimal id, or unset, which means
// the mounting user's.
type ownerID struct {
	id  uint32
	set bool
}

func (o *ownerID) UnmarshalText(text []byte) error {
	n, err := strconv.ParseUint(strings.TrimSpace(string(text)), 10, 32)
	// 4294967295 is (uid_t)-1, which chown and the kernel take as no id.
	if err != nil || n == 1<<32-1 {
		return fmt.Errorf("bad id %q: want a decimal number below 4294967295", text)
	}
	*o = ownerID{id: uint32(n), set: true}
	return nil
}

// or returns the id, or def when none was given.
func (o ownerID) or(def uint32) uint32 {
	if o.set {
		return o.id
	}
	return def
}

// permBits is a --file-mode or --dir-mode value: permission bits in
// octal ("0444", "444" or "0o444"), read and execute bits only, as the
// mount is read-only.
type permBits uint32

func (p *permBits) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0O")
	n, err := strconv.ParseUint(digits, 8, 32)
	switch {
	case err != nil || digits == "":
		return fmt.Errorf("bad mode %q: want octal permission bits such as 0444", s)
	case n&^0o777 != 0:
		return fmt.Errorf("bad mode %q: only permission bits (at most 0777) may be given", s)
	case n&0o222 != 0:
		return fmt.Errorf("mode %q has write bits (%#o): the mount is read-only; use read and execute bits only, such as %#o", s, n&0o222, n&^0o222)
	}
	*p = permBits(n)
	return nil
}

func (p permBits) String() string { return fmt.Sprintf("%#o", uint32(p)) }

// attr returns what the mount's files and directories show.
func (c *mountCmd) attr() segfs.Attr {
	a := segfs.DefaultAttr()
	a.UID, a.GID = c.UID.or(a.UID), c.GID.or(a.GID)
	a.FileMode, a.DirMode = uint32(c.FileMode), uint32(c.DirMode)
	return a
}

// fuseConf is where fusermount3 reads whether users other than root may
// mount with allow_other.
const fuseConf = "/etc/fuse.conf"

// checkAllowOther fails, before anything is mounted, where fusermount3
// would refuse the mount: --allow-other or --allow-root (which mounts
// with allow_other) by a user other than root (uid) without
// user_allow_other in conf.
func (c *mountCmd) checkAllowOther(uid int, conf string) error {
	if uid == 0 || !c.AllowOther && !c.AllowRoot {
		return nil
	}
	flag := "--allow-other"
	if c.AllowRoot {
		flag = "--allow-root"
	}
	ok, err := userAllowOther(conf)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	if !ok {
		return fmt.Errorf("%s needs, for a user other than root, the line user_allow_other in %s (as root: echo user_allow_other >> %s)", flag, conf, conf)
	}
	return nil
}

// userAllowOther reports whether the fuse.conf at path allows users other
// than root to mount with allow_other, read as fusermount3 reads it: each
// line loses what follows a '#' and the blanks around it, and the line
// user_allow_other allows; a last line without its newline is not read,
// nor a line of more than 254 bytes. A missing file allows nothing.
func userAllowOther(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) { // a line without its newline is not read
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", path, err)
		}
		if len(line) > 255 { // fusermount3 reads lines into 256 bytes
			continue
		}
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if strings.TrimSpace(line) == "user_allow_other" {
			return true, nil
		}
	}
}
