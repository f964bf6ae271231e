package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCloseSendsNoFlush opens and closes files through the mount and
// counts, in the FUSE trace (--debug), the FLUSH requests the kernel
// sent: segfs answers the first with ENOSYS, and the kernel sends no
// other for the whole mount, so a close(2) no longer waits on a round
// trip to segfs. A Lucene open closes every file it opened; on a busy
// node each such round trip costs as much as a cached read.
func TestCloseSendsNoFlush(t *testing.T) {
	dir := t.TempDir()
	const files, opens = 4, 5
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), randomBytes(uint64(i), 10000+i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := mountFile(t, dir, "--debug")
	buf := make([]byte, 4096)
	for range opens {
		for i := range files {
			f, err := os.Open(filepath.Join(m.Dir, fmt.Sprintf("f%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.ReadAt(buf, 0); err != nil {
				t.Fatalf("read f%d: %v", i, err)
			}
			if err := f.Close(); err != nil {
				t.Fatalf("close f%d: %v (an ENOSYS flush must not reach the caller)", i, err)
			}
		}
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	// Counted from the lookup of the first file on: go-fuse opens and
	// flushes a file of its own at mount, and answers that FLUSH itself.
	var flushes, opened int
	ours := false
	for _, line := range strings.Split(m.Log(), "\n") {
		switch {
		case strings.Contains(line, ": LOOKUP ") && strings.Contains(line, "f0"):
			ours = true
		case !ours:
		case strings.Contains(line, ": FLUSH "):
			flushes++
		case strings.Contains(line, ": OPEN "):
			opened++
		}
	}
	if opened < files*opens {
		t.Fatalf("the trace shows %d OPENs for %d opens: --debug did not trace the requests", opened, files*opens)
	}
	if flushes != 1 {
		t.Errorf("the kernel sent %d FLUSH requests for %d closes; want 1 (answered ENOSYS, then none)", flushes, files*opens)
	}
}
