package harness

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// child is a started process and the one goroutine that waits for it.
type child struct {
	// Immutable after startChild.
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once cmd.Wait has returned

	waitErr error // written before exited is closed; read only after
}

// startChild starts bin with its stdout and stderr appended to logPath. The
// child runs in its own process group (a terminal's Ctrl-C reaches only the
// harness, which then stops its children in order) and receives deathSig if
// the harness dies first.
func startChild(bin string, args, env []string, logPath string, deathSig syscall.Signal) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c := &child{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// hasExited reports whether the process has exited and been waited for.
func (c *child) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// signal sends sig unless the process is already gone.
func (c *child) signal(sig os.Signal) {
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		fmt.Fprintf(os.Stderr, "harness: signal %v to pid %d: %v\n", sig, c.cmd.Process.Pid, err)
	}
}

// waitFor waits up to d for the process to exit and reports whether it did.
func (c *child) waitFor(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
		return false
	}
}

// stop sends sig, waits up to grace, then kills and waits for good.
// It reports whether the process exited within grace.
func (c *child) stop(sig os.Signal, grace time.Duration) bool {
	if c.hasExited() {
		return true
	}
	c.signal(sig)
	if c.waitFor(grace) {
		return true
	}
	c.kill()
	return false
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill() {
	if !c.hasExited() {
		c.signal(syscall.SIGKILL)
	}
	<-c.exited
}

// exitCode is the exit status once the process has exited: -1 if a signal
// ended it.
func (c *child) exitCode() int {
	<-c.exited
	if c.waitErr == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(c.waitErr, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// exitError is the error cmd.Wait returned (nil for status 0).
func (c *child) exitError() error {
	<-c.exited
	return c.waitErr
}

// log returns the whole log file, or a note saying why it cannot.
func (c *child) log() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return fmt.Sprintf("(log %s unreadable: %v)", c.logPath, err)
	}
	return string(b)
}

// logTail returns about the last max bytes of the log, indented for use
// inside an error message.
func (c *child) logTail(max int64) string {
	return readTail(c.logPath, max)
}

func readTail(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("    (log %s unreadable: %v)", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		if _, err := f.Seek(st.Size()-max, io.SeekStart); err != nil {
			return fmt.Sprintf("    (log %s: %v)", path, err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("    (log %s: %v)", path, err)
	}
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return "    (log is empty)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// ChildEnv returns the harness's own environment without the variables that
// would point a child at real AWS settings or configure versitygw (AWS_*
// but AWS_CA_BUNDLE, VGW_*, ROOT_ACCESS_KEY*, ROOT_SECRET_*), followed by
// extra. Later entries
// win, as with exec.Cmd.Env.
func ChildEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		// AWS_CA_BUNDLE passes: segfs must work with the machine's CA
		// bundle set, as it is where it runs.
		if (strings.HasPrefix(k, "AWS_") && k != "AWS_CA_BUNDLE") || strings.HasPrefix(k, "VGW_") ||
			strings.HasPrefix(k, "ROOT_ACCESS_KEY") || strings.HasPrefix(k, "ROOT_SECRET_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// SetEnv returns a copy of env with key set to value, replacing any
// earlier setting.
func SetEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}
