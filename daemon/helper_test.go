package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestIsHelperForm(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"s3://b/p", "/mnt/x", "-o", "ro"}, true},
		{[]string{"file:///srv/shard", "/mnt/x"}, true},
		{[]string{"mount", "s3://b", "/mnt/x"}, false},
		{[]string{"--log-level=debug", "mount", "s3://b", "/mnt"}, false},
		{[]string{"-test.run=x://y"}, false},
		{[]string{"verify", "s3://b"}, false},
		{nil, false},
	} {
		if got := IsHelperForm(c.args); got != c.want {
			t.Errorf("IsHelperForm(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestParseHelperForm(t *testing.T) {
	const src, mnt = "s3://bucket/prefix", "/mnt/x"
	tail := []string{"--", src, mnt}
	for _, c := range []struct {
		name       string
		args       []string // after SOURCE MOUNTPOINT
		want       []string // the flags between "mount" and "--"
		foreground bool
		err        string // a substring of the error; "" for none
	}{
		{name: "none", want: nil},
		{
			name: "fstab",
			args: []string{"-o", "ro,_netdev,allow_other,endpoint=http://127.0.0.1:7070,path_style,cache_dir=/var/cache/segfs"},
			want: []string{"--allow-other", "--endpoint=http://127.0.0.1:7070", "--path-style", "--cache-dir=/var/cache/segfs"},
		},
		{
			// A node's repository mount (docs/USAGE.md).
			name: "repository",
			args: []string{"-o", "ro,_netdev,allow_other,layout=opensearch,max_shards=500,cache_dir=/var/cache/segfs/node"},
			want: []string{"--allow-other", "--layout=opensearch", "--max-shards=500", "--cache-dir=/var/cache/segfs/node"},
		},
		{
			// What mount(8) and mount.fuse3 pass without -o ro.
			name: "mount.fuse3 defaults",
			args: []string{"-o", "rw,endpoint=x,dev,suid"},
			want: []string{"--endpoint=x"},
		},
		{
			name: "generic options dropped",
			args: []string{"-o", "ro,noatime,noexec,nosuid,nodev,exec,suid,dev,defaults,auto,noauto,user,nouser,users,owner,nofail,atime,relatime,nodiratime,async,sync"},
			want: nil,
		},
		{
			name: "userspace options dropped",
			args: []string{"-o", "x-systemd.automount,x-systemd.mount-timeout=30,x-gvfs-hide,comment=systemd.automount,region=eu-west-1"},
			want: []string{"--region=eu-west-1"},
		},
		{
			name: "several groups and -oOPTS",
			args: []string{"-o", "part_size=4MiB", "-oprefetch=all,max_fetches=8", "-o", "no_segment_prefetch"},
			want: []string{"--part-size=4MiB", "--prefetch=all", "--max-fetches=8", "--no-segment-prefetch"},
		},
		{
			name: "empty options",
			args: []string{"-o", ",,ro,,path_style,"},
			want: []string{"--path-style"},
		},
		{
			name: "value with = and ,-free URL",
			args: []string{"-o", "endpoint=http://h:1/?a=b"},
			want: []string{"--endpoint=http://h:1/?a=b"},
		},
		{name: "foreground option", args: []string{"-o", "ro,foreground"}, foreground: true},
		{name: "-f", args: []string{"-f", "-o", "ro"}, foreground: true},
		{name: "--foreground", args: []string{"--foreground"}, foreground: true},
		{name: "-d", args: []string{"-d"}, want: []string{"--debug"}, foreground: true},
		{name: "global flag", args: []string{"-o", "log_level=debug"}, want: []string{"--log-level=debug"}},
		{name: "-o at the end", args: []string{"-o"}, err: "-o without options"},
		{name: "stray argument", args: []string{"extra"}, err: `unexpected argument "extra"`},
		{name: "verbose", args: []string{"-v"}, err: `unexpected argument "-v"`},
		{name: "help", args: []string{"-o", "help"}, err: "-o help: not a mount option"},
		{name: "version", args: []string{"-o", "ro,version"}, err: "-o version: not a mount option; `segfs --version`"},
		{name: "version=", args: []string{"-o", "version=1", "-f"}, err: "-o version: not a mount option"},
		{name: "bad name", args: []string{"-o", "--cache-dir=/x"}, err: "not an option name"},
		{name: "bad name 2", args: []string{"-o", "a b"}, err: "not an option name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := ParseHelperForm(append([]string{src, mnt}, c.args...))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Concat([]string{"mount"}, c.want, tail)
			if !slices.Equal(h.Args, want) {
				t.Errorf("args %q, want %q", h.Args, want)
			}
			if h.Foreground != c.foreground {
				t.Errorf("foreground %v, want %v", h.Foreground, c.foreground)
			}
		})
	}
}

func TestParseHelperFormMountpoint(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"s3://b"}, "no MOUNTPOINT"},
		{[]string{"s3://b", "-o", "ro"}, "no MOUNTPOINT before -o"},
		{[]string{"s3://b", "/dev/fd/5", "-o", "ro"}, "drop_privileges"},
	} {
		if _, err := ParseHelperForm(c.args); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("ParseHelperForm(%q) = %v, want an error saying %q", c.args, err, c.err)
		}
	}
}

func TestMentions(t *testing.T) {
	for _, c := range []struct {
		msg, flag string
		want      bool
	}{
		{"unknown flag --cache", "--cache", true},
		{"unknown flag --cache, did you mean", "--cache", true},
		{"unknown flag --cache-dir", "--cache", false},
		{"--cache-dir x; --cache: bad", "--cache", true},
		{"nothing", "--cache", false},
	} {
		if got := mentions(c.msg, c.flag); got != c.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", c.msg, c.flag, got, c.want)
		}
	}
}

func TestWaitReady(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{"ready\n", true},
		{"", false},
		{"ready", false}, // closed before the newline
		{"failed\n", false},
		{strings.Repeat("x", 100) + "\n", false},
	} {
		if got := waitReady(strings.NewReader(c.in)); got != c.want {
			t.Errorf("waitReady(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// The daemon runs in /, so the local paths among its flags are made
// absolute first, as the caller meant them; nothing else changes.
func TestAbsolutePaths(t *testing.T) {
	t.Chdir(t.TempDir())
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	in := []string{"mount", "--cache-dir=c", "--control-dir=/run/x", "--part-size=1MiB", "--cache-dir=", "--", "s3://b/p", "mnt"}
	got, err := absolutePaths(in)
	want := []string{"mount", "--cache-dir=" + filepath.Join(wd, "c"), "--control-dir=/run/x", "--part-size=1MiB", "--cache-dir=", "--", "s3://b/p", filepath.Join(wd, "mnt")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("absolutePaths(%q) = %q, %v; want %q", in, got, err, want)
	}
}

// A daemon's log stays on a file or /dev/null; a pipe is the caller's.
func TestKeepsLog(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	t.Setenv("JOURNAL_STREAM", "")
	if !keepsLog(file) || !keepsLog(null) || keepsLog(w) {
		t.Errorf("keepsLog: file %v, /dev/null %v, pipe %v; want true, true, false", keepsLog(file), keepsLog(null), keepsLog(w))
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(w.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	if !keepsLog(w) {
		t.Errorf("keepsLog of the stream JOURNAL_STREAM names: false; want true")
	}
}
