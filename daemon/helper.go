// Package daemon runs segfs as a service: the mount helper form that
// mount(8) and /etc/fstab use (helper.go), the daemon it starts, and
// readiness, told to systemd and to that form (ready.go).
//
// The mount helper form. `mount -t fuse.segfs SOURCE MOUNTPOINT -o OPTS`
// and an /etc/fstab line of type fuse.segfs run /sbin/mount.fuse3, which
// runs `segfs SOURCE MOUNTPOINT -o OPTS` through /bin/sh (libfuse's
// util/mount.fuse.c). What reaches segfs that way:
//
//   - Only SOURCE, MOUNTPOINT and one -o group; mount.fuse3 never passes
//     -f, -d or anything else.
//   - mount.fuse3 has consumed setuid=, drop_privileges, user, nouser,
//     users, auto, noauto, _netdev and nofail, and appends dev and suid
//     unless nodev and nosuid are there.
//   - mount(8) has consumed defaults, comment=, x-* and noauto, put rw
//     (unless ro) and the generic flags first, and removed PATH from the
//     environment: /bin/sh finds segfs in its default PATH
//     (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin).
//   - mount(8) waits for segfs to exit, and expects the file system to be
//     mounted by then and served in the background.
//
// segfs turns that form into `segfs mount --flag... SOURCE MOUNTPOINT`
// and, unless told to stay in the foreground, runs it as a daemon that
// reports back once the mount serves (ready.go).
package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
)

// IsHelperForm reports whether args (without the program name) are the
// mount helper form: they start with a source URL, which no command name
// or flag looks like.
func IsHelperForm(args []string) bool {
	return len(args) > 0 && !strings.HasPrefix(args[0], "-") && strings.Contains(args[0], "://")
}

// Helper is a helper form command line turned into segfs's own.
type Helper struct {
	// Args are `mount`, its flags, then -- SOURCE MOUNTPOINT.
	Args []string
	// Foreground: run the mount in this process (-o foreground, -f, -d,
	// --foreground) instead of as a daemon.
	Foreground bool
	// options maps each flag's name ("--allow-other") to the -o option it
	// came from ("allow_other"), for error messages.
	options map[string]string
}

// ignoredOptions are the generic mount options that mean nothing to
// segfs, dropped wherever they come from: a segfs mount is always
// read-only, nosuid and nodev, and has no atime to keep. rw is among them
// because mount(8) passes it whenever ro is not given: refusing it would
// refuse every mount without -o ro; the mount is read-only regardless, as
// a read-only medium mounted without ro is.
var ignoredOptions = map[string]bool{
	"ro": true, "rw": true, "defaults": true, "auto": true, "noauto": true,
	"user": true, "nouser": true, "users": true, "owner": true, "group": true,
	"_netdev": true, "nofail": true, "dev": true, "nodev": true,
	"suid": true, "nosuid": true, "exec": true, "noexec": true,
	"atime": true, "noatime": true, "relatime": true, "norelatime": true,
	"strictatime": true, "nostrictatime": true, "lazytime": true, "nolazytime": true,
	"diratime": true, "nodiratime": true, "async": true, "sync": true, "dirsync": true,
	"mand": true, "nomand": true, "iversion": true, "noiversion": true,
	"silent": true, "loud": true, "symfollow": true, "nosymfollow": true,
}

// optionName is what an -o option's name may be: the name of a flag of
// segfs mount with dashes or underscores.
var optionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

const helperUsage = "the mount helper form is: segfs SOURCE MOUNTPOINT [-o OPTION[,OPTION...]]..."

// ParseHelperForm rewrites args, SOURCE MOUNTPOINT and then -o groups
// (-o OPTS or -oOPTS, any number), into segfs mount's command line. An
// option name=value becomes --name=value and a bare name --name, with _
// as -; the generic options of ignoredOptions, comment=... and x-... are
// dropped. foreground, -f and --foreground keep the mount in the
// foreground; -d does too and adds --debug (libfuse's meanings).
func ParseHelperForm(args []string) (Helper, error) {
	if len(args) < 2 {
		return Helper{}, errors.New("no MOUNTPOINT: " + helperUsage)
	}
	source, mountpoint := args[0], args[1]
	if strings.HasPrefix(mountpoint, "-") {
		return Helper{}, fmt.Errorf("no MOUNTPOINT before %s: %s", mountpoint, helperUsage)
	}
	if strings.HasPrefix(mountpoint, "/dev/fd/") {
		// mount.fuse3's drop_privileges opens /dev/fuse itself and
		// passes its descriptor as the mountpoint.
		return Helper{}, fmt.Errorf("mountpoint %s: a descriptor from mount.fuse's drop_privileges, which segfs does not support (it mounts by itself)", mountpoint)
	}
	h := Helper{Args: []string{"mount"}, options: map[string]string{}}
	for i := 2; i < len(args); i++ {
		var opts string
		switch a := args[i]; {
		case a == "-o":
			if i++; i == len(args) {
				return Helper{}, errors.New("-o without options: " + helperUsage)
			}
			opts = args[i]
		case strings.HasPrefix(a, "-o"):
			opts = a[len("-o"):]
		case a == "-f" || a == "--foreground":
			h.Foreground = true
			continue
		case a == "-d":
			h.Foreground = true
			h.Args = append(h.Args, "--debug")
			continue
		default:
			return Helper{}, fmt.Errorf("unexpected argument %q: %s", a, helperUsage)
		}
		for _, opt := range strings.Split(opts, ",") {
			if err := h.addOption(opt); err != nil {
				return Helper{}, err
			}
		}
	}
	h.Args = append(h.Args, "--", source, mountpoint)
	return h, nil
}

// addOption adds the flag for one -o option, or drops it.
func (h *Helper) addOption(opt string) error {
	name, value, hasValue := strings.Cut(opt, "=")
	switch {
	case opt == "":
		return nil // "a,,b": mount.fuse3 skips empty options too
	case !hasValue && ignoredOptions[name], name == "comment", strings.HasPrefix(name, "x-"):
		return nil
	case !hasValue && name == "foreground":
		h.Foreground = true
		return nil
	case name == "help":
		return errors.New("-o help: not a mount option; `segfs mount --help` lists them")
	case name == "version":
		// It would become --version, which prints and exits 0 without
		// mounting: mount(8) would report a mount that is not there (and
		// the daemon's print goes to /dev/null). A helper's exit 0 means
		// mounted; a version is asked of the program, not of a mount.
		return errors.New("-o version: not a mount option; `segfs --version` prints the version")
	case !optionName.MatchString(name):
		return fmt.Errorf("-o %s: not an option name", opt)
	}
	flag := "--" + strings.ReplaceAll(name, "_", "-")
	h.options[flag] = name
	if hasValue {
		flag += "=" + value
	}
	h.Args = append(h.Args, flag)
	return nil
}

// Check parses the rewritten command line with parse, as main will, so
// that an option segfs does not know fails here, named as the -o option
// it was.
func (h Helper) Check(parse func(args []string) error) error {
	if err := parse(h.Args); err != nil {
		return h.explain(err)
	}
	return nil
}

// explain prefixes a parse error with the -o option whose flag it names.
// Longer flags are tried first, so that --cache-dir is not taken for
// --cache.
func (h Helper) explain(err error) error {
	flags := make([]string, 0, len(h.options))
	for f := range h.options {
		flags = append(flags, f)
	}
	slices.SortFunc(flags, func(a, b string) int { return len(b) - len(a) })
	msg := err.Error()
	for _, f := range flags {
		if mentions(msg, f) {
			return fmt.Errorf("-o %s: %w", h.options[f], err)
		}
	}
	return err
}

// mentions reports whether msg holds flag as a whole word.
func mentions(msg, flag string) bool {
	for rest := msg; ; {
		i := strings.Index(rest, flag)
		if i < 0 {
			return false
		}
		rest = rest[i+len(flag):]
		if rest == "" || !isFlagChar(rest[0]) {
			return true
		}
	}
}

func isFlagChar(c byte) bool {
	return c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Daemonize starts this program with args as the mount's daemon and
// returns the status for the foreground process to exit with: 0 once the
// daemon reports that the mount serves, else the daemon's own (it has
// printed why). The daemon runs in a session of its own (no terminal, no
// SIGHUP when the caller's goes) in /, reads /dev/null, writes nothing to
// stdout, and gets the write end of the ready pipe as fd 3. Its log goes
// where daemonLog says.
func Daemonize(args []string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "segfs: start the mount daemon: %v\n", err)
		return 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "segfs: start the mount daemon: ready pipe: %v\n", err)
		return 1
	}
	args, err = absolutePaths(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "segfs: %v\n", err)
		return 2
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, readyFDEnv+"=")
	}), readyFDEnv+"=3")
	// In /: a daemon in the caller's directory would keep the file
	// system holding it busy for as long as it serves.
	cmd.Dir = "/"
	relay, err := daemonLog(cmd)
	if err != nil {
		fmt.Fprintf(os.Stderr, "segfs: start the mount daemon: %v\n", err)
		return 1
	}
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Until the mount serves, an interrupt of mount(8) stops the daemon
	// too, which then exits without mounting: no mount appears after
	// mount(8) gave up.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "segfs: start the mount daemon: %v\n", err)
		return 1
	}
	w.Close() // the daemon holds the only write end: its exit ends the read
	relay.started()
	go func() {
		for range sigs {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}()
	ready := waitReady(r)
	relay.finish()
	if ready {
		return 0
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		// It exited cleanly without reporting the mount ready: a signal
		// stopped it first, or the mount did not answer and it
		// unmounted (ready.go). Either way nothing is mounted.
		fmt.Fprintln(os.Stderr, "segfs: the mount daemon exited before the mount served")
		return 1
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "segfs: the mount daemon: %v\n", err)
		return 1
	}
}

// logRelay copies the daemon's log to this process's stderr until the
// mount serves or fails; nil when the daemon writes to stderr itself.
type logRelay struct {
	r, w *os.File
	done chan struct{}
}

// daemonLog sets the daemon's stdout to /dev/null and its stderr: this
// process's own when that is the journal, a file or a character device
// other than a terminal, which are meant to hold a daemon's log for as
// long as it runs. A pipe, a socket or a terminal is the caller's (ssh,
// `$(...)`, a shell), which would then wait on it, or be written to,
// until the unmount: the daemon's log is relayed to it until the mount
// serves, and after that goes nowhere (the systemd unit, or `2>>FILE`,
// keeps it).
func daemonLog(cmd *exec.Cmd) (*logRelay, error) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	cmd.Stdout = null
	if keepsLog(os.Stderr) {
		cmd.Stderr = os.Stderr
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("log pipe: %w", err)
	}
	cmd.Stderr = w
	l := &logRelay{r: r, w: w, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		_, _ = io.Copy(os.Stderr, r)
	}()
	return l, nil
}

// started closes this process's copy of the pipe's write end once the
// daemon has its own, so the copy ends when the daemon's end closes.
func (l *logRelay) started() {
	if l != nil {
		l.w.Close()
	}
}

// keepsLog reports whether f is where a daemon's log can go for as long
// as it runs: the journal stream systemd named in JOURNAL_STREAM, a
// regular file, or a character device that is not a terminal
// (/dev/null).
func keepsLog(f *os.File) bool {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	if js := os.Getenv("JOURNAL_STREAM"); js != "" && js == fmt.Sprintf("%d:%d", st.Dev, st.Ino) {
		return true
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return true
	case syscall.S_IFCHR:
		return !term.IsTerminal(int(f.Fd()))
	}
	return false
}

// finish stops relaying: what the daemon wrote before the mount served
// (or it exited) is copied, then the pipe is closed, and the daemon's
// later writes to it fail (it ignores SIGPIPE: TakeReadyPipe's caller).
func (l *logRelay) finish() {
	if l == nil {
		return
	}
	_ = l.r.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	<-l.done
	l.r.Close()
}

// absolutePaths makes the local paths among the mount's arguments
// absolute, as the caller meant them: the daemon runs in /. They are
// the cache and control directories' flags and the mountpoint, the
// last argument (after "--", as ParseHelperForm ends them).
func absolutePaths(args []string) ([]string, error) {
	out := slices.Clone(args)
	if n := len(out); n >= 3 && out[n-3] == "--" && !filepath.IsAbs(out[n-1]) {
		abs, err := filepath.Abs(out[n-1])
		if err != nil {
			return nil, fmt.Errorf("mountpoint %s: %w", out[n-1], err)
		}
		out[n-1] = abs
	}
	for i, a := range out {
		for _, flag := range []string{"--cache-dir=", "--control-dir="} {
			if v, ok := strings.CutPrefix(a, flag); ok && v != "" && !filepath.IsAbs(v) {
				abs, err := filepath.Abs(v)
				if err != nil {
					return nil, fmt.Errorf("%s%s: %w", flag, v, err)
				}
				out[i] = flag + abs
			}
		}
	}
	return out, nil
}

// waitReady reads the ready pipe until the ready line or its end, and
// reports whether the line came.
func waitReady(r io.Reader) bool {
	line, err := bufio.NewReader(io.LimitReader(r, 64)).ReadString('\n')
	return err == nil && line == readyLine
}
