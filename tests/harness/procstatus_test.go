package harness

import (
	"os"
	"strings"
	"testing"
)

const statusSample = `Name:	segfs
Umask:	0022
State:	S (sleeping)
Tgid:	4242
VmPeak:	 1300000 kB
VmSize:	 1290000 kB
VmHWM:	  180224 kB
VmRSS:	  150000 kB
RssAnon:	  140000 kB
Threads:	23
SigQ:	0/95000
`

func TestParseProcStatus(t *testing.T) {
	got, err := ParseProcStatus(strings.NewReader(statusSample))
	if err != nil {
		t.Fatal(err)
	}
	want := ProcStatus{Threads: 23, VmRSS: 150000 * 1024, VmHWM: 180224 * 1024}
	if got != want {
		t.Errorf("ParseProcStatus = %+v, want %+v", got, want)
	}
	if _, err := ParseProcStatus(strings.NewReader("Name:\tx\nThreads:\t3\n")); err == nil {
		t.Errorf("ParseProcStatus without VmRSS and VmHWM succeeded")
	}
	if _, err := ParseProcStatus(strings.NewReader("Threads:\tmany\nVmRSS:\t1 kB\nVmHWM:\t1 kB\n")); err == nil {
		t.Errorf("ParseProcStatus with a bad number succeeded")
	}
}

func TestReadProcStatusSelf(t *testing.T) {
	st, err := ReadProcStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.Threads < 1 || st.VmRSS <= 0 || st.VmHWM < st.VmRSS {
		t.Errorf("own status implausible: %+v", st)
	}
}
