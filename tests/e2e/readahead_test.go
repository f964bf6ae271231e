package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/segfs/segfs/mountinfo"
	"github.com/segfs/segfs/tests/harness"
)

// TestReadaheadFlag: as root, the mount's kernel readahead (its backing
// device's read_ahead_kb) is --readahead, 1 MiB by default; a bad value
// is refused before mounting.
func TestReadaheadFlag(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting a mount's read_ahead_kb takes root")
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/f", []byte("readahead"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{{nil, "1024"}, {[]string{"--readahead", "256KiB"}, "256"}, {[]string{"--readahead", "4MiB"}, "4096"}} {
		m := mountFile(t, dir, c.args...)
		e, ok, err := mountinfo.Find(m.Dir)
		if err != nil || !ok {
			t.Fatalf("%v: mount not found in mountinfo: %v", c.args, err)
		}
		got, err := os.ReadFile("/sys/class/bdi/" + e.Dev + "/read_ahead_kb")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(got)) != c.want {
			t.Errorf("%v: read_ahead_kb %s, want %s", c.args, strings.TrimSpace(string(got)), c.want)
		}
		if err := m.Unmount(); err != nil {
			t.Fatal(err)
		}
	}
	d := t.TempDir()
	out := mountFails(t, harness.MountOptions{Source: "file://" + dir, Dir: d, Args: []string{"--readahead", "6000"}})
	if !strings.Contains(out, "--readahead") {
		t.Errorf("--readahead 6000: output %q; want a refusal naming the flag", out)
	}
}
