package reliability

import (
	"bytes"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// measured is how one run of a segfs command went.
type measured struct {
	stdout, stderr string
	code           int           // the exit status; -1 when killed
	killed         string        // why the test killed it; "" when it exited by itself
	took, cpu      time.Duration // wall clock; the child's user and system time
	peak           int64         // bytes, the child's VmHWM
}

// runMeasured runs segfs with args and the credentials of e's server,
// watching its peak resident set (VmHWM, every 5 ms), and kills it after
// limit or once that passes maxRSS (a segfs that trusts a hostile file
// takes hours or gigabytes: the machine is shared). The peak is read
// from /proc, not from the child's rusage: Go starts it with vfork, and
// Linux counts in its maxrss the test process's own peak at the exec.
func runMeasured(t *testing.T, e *env, limit time.Duration, maxRSS int64, args ...string) measured {
	t.Helper()
	cmd := exec.Command(binaries.Segfs, args...)
	cmd.Env = harness.ChildEnv(e.srv.Env()...)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var m measured
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-deadline.C:
			if m.killed == "" {
				m.killed = fmt.Sprintf("still running after %v", limit)
				cmd.Process.Kill()
			}
		case <-tick.C:
			st, serr := harness.ReadProcStatus(cmd.Process.Pid)
			if serr != nil {
				continue // exited, or not yet readable
			}
			m.peak = max(m.peak, st.VmHWM)
			if st.VmHWM > maxRSS && m.killed == "" {
				m.killed = fmt.Sprintf("peak RSS %d MiB, past %d MiB", st.VmHWM>>20, maxRSS>>20)
				cmd.Process.Kill()
			}
		}
	}
	m.took = time.Since(start)
	m.stdout, m.stderr, m.code = out.String(), errs.String(), cmd.ProcessState.ExitCode()
	if err != nil && m.code < 0 && m.killed == "" {
		t.Fatalf("segfs %s: %v\n%s", args[0], err, m.stderr)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.cpu = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	}
	if m.peak == 0 {
		t.Fatalf("segfs %s ended before its /proc status could be read", args[0])
	}
	killed := ""
	if m.killed != "" {
		killed = " (killed: " + m.killed + ")"
	}
	t.Logf("segfs %s: exit %d after %v, CPU %v, peak RSS %d MiB%s", args[0], m.code, m.took.Round(time.Millisecond), m.cpu.Round(time.Millisecond), m.peak>>20, killed)
	return m
}
