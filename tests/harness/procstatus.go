package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ProcStatus is what the bench and the soak read from /proc/PID/status.
type ProcStatus struct {
	Threads int64 // OS threads
	VmRSS   int64 // resident set now, bytes
	VmHWM   int64 // peak resident set since the process started, bytes
}

// ParseProcStatus reads the Threads, VmRSS and VmHWM lines of a
// /proc/PID/status text (proc(5)); the memory figures are in kB there.
func ParseProcStatus(r io.Reader) (ProcStatus, error) {
	var st ProcStatus
	seen := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		mult := int64(1)
		switch key {
		case "Threads":
			dst = &st.Threads
		case "VmRSS":
			dst, mult = &st.VmRSS, 1024
		case "VmHWM":
			dst, mult = &st.VmHWM, 1024
		default:
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			return ProcStatus{}, fmt.Errorf("proc status: empty %s", key)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return ProcStatus{}, fmt.Errorf("proc status: %s: %w", key, err)
		}
		*dst = n * mult
		seen++
	}
	if err := sc.Err(); err != nil {
		return ProcStatus{}, fmt.Errorf("proc status: %w", err)
	}
	if seen < 3 {
		return ProcStatus{}, fmt.Errorf("proc status: found %d of Threads, VmRSS, VmHWM", seen)
	}
	return st, nil
}

// ReadProcStatus reads /proc/PID/status of process pid.
func ReadProcStatus(pid int) (ProcStatus, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcStatus{}, err
	}
	defer f.Close()
	return ParseProcStatus(f)
}
