package e2e

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/segfs/segfs/tests/harness"
)

// TestDropAfterRead reads files through the mount and checks, with
// mincore, which of them keep their pages in the kernel's page cache
// after the last handle closes: a file larger than a part read whole
// loses them (a copy out of the mount); a file read in part, a file no
// larger than a part, and any file with --no-drop-after-read keep them.
func TestDropAfterRead(t *testing.T) {
	dir := t.TempDir()
	const part = 1 << 20
	files := map[string][]byte{
		"whole":   randomBytes(1, 3*part+12345),
		"partial": randomBytes(2, 3*part+12345),
		"small":   randomBytes(3, part-100),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	m := mountFile(t, dir, "--part-size", "1MiB")
	readFile(t, m, "whole", files["whole"], -1)
	readFile(t, m, "partial", files["partial"], 2*part)
	readFile(t, m, "small", files["small"], -1)
	s := harness.WaitStats(t, m, "every handle released", func(s map[string]int64) bool { return s["open_handles"] == 0 })
	if s["page_cache_drops"] != 1 {
		t.Errorf("page_cache_drops = %d, want 1 (the file read whole)", s["page_cache_drops"])
	}
	if n := resident(t, m, "whole"); n != 0 {
		t.Errorf("whole: %d pages still in the page cache after a whole read and close; want 0", n)
	}
	if n := resident(t, m, "partial"); n < 2*part/os.Getpagesize() {
		t.Errorf("partial: %d pages in the page cache after reading %d bytes; want them kept", n, 2*part)
	}
	if n := resident(t, m, "small"); n == 0 {
		t.Errorf("small: no pages in the page cache after a whole read; a file no larger than a part keeps them")
	}
	// A second whole read is served again, and correctly, through segfs.
	readFile(t, m, "whole", files["whole"], -1)
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}

	m = mountFile(t, dir, "--part-size", "1MiB", "--no-drop-after-read")
	readFile(t, m, "whole", files["whole"], -1)
	s = harness.WaitStats(t, m, "every handle released", func(s map[string]int64) bool { return s["open_handles"] == 0 })
	if s["page_cache_drops"] != 0 {
		t.Errorf("--no-drop-after-read: page_cache_drops = %d, want 0", s["page_cache_drops"])
	}
	if n, all := resident(t, m, "whole"), (len(files["whole"])+os.Getpagesize()-1)/os.Getpagesize(); n != all {
		t.Errorf("--no-drop-after-read: %d of %d pages in the page cache after a whole read; want all kept", n, all)
	}
}

// readFile reads the first n bytes of name through the mount (all of it
// if n < 0), checks them against want and closes the file.
func readFile(t *testing.T, m *harness.Mount, name string, want []byte, n int) {
	t.Helper()
	f, err := os.Open(filepath.Join(m.Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n < 0 {
		n = len(want)
	}
	got := make([]byte, n)
	if _, err := io.ReadFull(f, got); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !bytes.Equal(got, want[:n]) {
		t.Fatalf("%s: bytes read differ from the source", name)
	}
}

// resident counts the pages of name, in the mount, in the page cache.
func resident(t *testing.T, m *harness.Mount, name string) int {
	t.Helper()
	n := 0
	for _, in := range residentPages(t, filepath.Join(m.Dir, name)) {
		if in {
			n++
		}
	}
	return n
}
