package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

// userAllowOther reads fuse.conf as fusermount3 does.
func TestUserAllowOther(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, conf string
		want       bool
	}{
		{"debian default", "# user_allow_other - Using the allow_other mount option\n#user_allow_other\n\n#mount_max = 1000\n", false},
		{"set", "#mount_max = 1000\nuser_allow_other\n", true},
		{"blanks and comment", "  \tuser_allow_other   # let users share\n", true},
		{"among others", "mount_max = 1000\nuser_allow_other\nmount_max = 10\n", true},
		{"commented out", "# user_allow_other\n", false},
		{"no newline at the end", "user_allow_other", false},
		{"a value", "user_allow_other = 1\n", false},
		{"another word", "user_allow_others\n", false},
		{"too long a line", strings.Repeat(" ", 250) + "user_allow_other\n", false},
		{"empty", "", false},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
		if err := os.WriteFile(path, []byte(c.conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := userAllowOther(path); err != nil || got != c.want {
			t.Errorf("%s: userAllowOther = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if got, err := userAllowOther(filepath.Join(dir, "missing")); err != nil || got {
		t.Errorf("a missing fuse.conf: %v, %v; want false and no error", got, err)
	}
	if _, err := userAllowOther(dir); err == nil {
		t.Errorf("a fuse.conf that cannot be read (a directory): no error")
	}
}

// --allow-other and --allow-root by a user other than root fail before
// mounting unless fuse.conf has user_allow_other, with a message that
// says what to add where; root needs nothing.
func TestCheckAllowOther(t *testing.T) {
	dir := t.TempDir()
	without := filepath.Join(dir, "without")
	with := filepath.Join(dir, "with")
	if err := os.WriteFile(without, []byte("#user_allow_other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(with, []byte("user_allow_other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--allow-other", "--allow-root"} {
		c := parseMountFlags(t, flag)
		err := c.checkAllowOther(1000, without)
		if err == nil || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), "user_allow_other") ||
			!strings.Contains(err.Error(), without) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s as uid 1000 without user_allow_other: %v; want one line naming the flag, the option and the file", flag, err)
		}
		if err := c.checkAllowOther(1000, with); err != nil {
			t.Errorf("%s as uid 1000 with user_allow_other: %v", flag, err)
		}
		if err := c.checkAllowOther(0, without); err != nil {
			t.Errorf("%s as root: %v", flag, err)
		}
	}
	c := parseMountFlags(t)
	if err := c.checkAllowOther(1000, without); err != nil {
		t.Errorf("no --allow-other: %v", err)
	}
}

func TestAccessFlags(t *testing.T) {
	d := parseMountFlags(t)
	def := d.attr()
	if def.UID != uint32(os.Getuid()) || def.GID != uint32(os.Getgid()) || def.FileMode != 0o444 || def.DirMode != 0o555 {
		t.Errorf("default attributes %+v; want the mounting user, 0444 and 0555", def)
	}
	if g := d.UnmountGrace; g != 10*time.Second {
		t.Errorf("default --unmount-grace %v, want 10s", g)
	}
	m := parseMountFlags(t, "--uid", "0", "--gid", "4242", "--file-mode", "440", "--dir-mode", "0o550")
	a := m.attr()
	if a.UID != 0 || a.GID != 4242 || a.FileMode != 0o440 || a.DirMode != 0o550 {
		t.Errorf("--uid 0 --gid 4242 --file-mode 440 --dir-mode 0o550: %+v", a)
	}
	for _, mode := range []string{"0444", "444", "0o444", "0O444", "0", "0555", "0o500", "111"} {
		var p permBits
		if err := p.UnmarshalText([]byte(mode)); err != nil {
			t.Errorf("mode %q: %v", mode, err)
		}
	}
	for mode, want := range map[string]string{
		"0644": "read-only", "0o666": "read-only", "200": "read-only",
		"1444": "0777", "04555": "0777", "7777": "0777",
		"": "octal", "0o": "octal", "0x1ff": "octal", "888": "octal", "r--r--r--": "octal", "-1": "octal",
	} {
		var p permBits
		if err := p.UnmarshalText([]byte(mode)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mode %q: %v; want an error saying %q", mode, err, want)
		}
	}
	for _, id := range []string{"-1", "4294967295", "0x10", "abc", "1e3", ""} {
		var o ownerID
		if err := o.UnmarshalText([]byte(id)); err == nil {
			t.Errorf("id %q accepted as %d", id, o.id)
		}
	}
	// Both at once is a usage error, found by the parser.
	var c cli
	p, err := kong.New(&c, kong.Name("segfs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse([]string{"mount", "--allow-other", "--allow-root", "s3://bucket", "/mnt"}); err == nil ||
		!strings.Contains(err.Error(), "--allow-other") || !strings.Contains(err.Error(), "--allow-root") {
		t.Errorf("--allow-other --allow-root: %v; want a usage error naming both", err)
	}
	if _, err := p.Parse([]string{"mount", "--file-mode", "0644", "s3://bucket", "/mnt"}); err == nil || !strings.Contains(err.Error(), "--file-mode") {
		t.Errorf("--file-mode 0644: %v; want a usage error naming the flag", err)
	}
	if m := parseMountFlags(t, "--unmount-grace=-1s"); m.validate() == nil {
		t.Errorf("--unmount-grace -1s accepted")
	}
}

// parseMountFlags returns `segfs mount`'s flags as parsed from args.
func parseMountFlags(t *testing.T, args ...string) mountCmd {
	t.Helper()
	var c cli
	p, err := kong.New(&c, kong.Name("segfs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(append(append([]string{"mount"}, args...), "s3://bucket", "/mnt")); err != nil {
		t.Fatal(err)
	}
	return c.Mount
}
