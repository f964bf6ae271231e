package mountinfo

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Canonical names a directory as the kernel names a mount on
// it: links in the parents and at the end resolved, relative ones from
// their own directory; a loop is an error.
func TestCanonicalMountpoint(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(base, "data", "real")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(base, "other")
	if err := os.MkdirAll(filepath.Join(other, "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(other, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"sub":    filepath.Join(other, "deep"), // so sub/.. is other, not base
		"dotdot": "sub/../real",                // other/real

		"rel":    "data/real",               // relative, at the end
		"abs":    real,                      // absolute
		"chain":  "rel",                     // a link to a link
		"parent": "data",                    // a link in a parent
		"loop1":  "loop2", "loop2": "loop1", // a loop
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range []string{real, filepath.Join(base, "rel"), filepath.Join(base, "abs"),
		filepath.Join(base, "chain"), filepath.Join(base, "parent", "real"), filepath.Join(base, "data", "..", "data", "real")} {
		if got, err := Canonical(in); err != nil || got != real {
			t.Errorf("Canonical(%s) = %q, %v; want %s", in, got, err, real)
		}
	}
	if got, err := Canonical(filepath.Join(base, "dotdot")); err != nil || got != filepath.Join(other, "real") {
		t.Errorf("a link to sub/../real, sub a link: %q, %v; want %s", got, err, filepath.Join(other, "real"))
	}
	missing := filepath.Join(base, "parent", "absent")
	if got, err := Canonical(missing); err != nil || got != filepath.Join(base, "data", "absent") {
		t.Errorf("Canonical(%s) = %q, %v; want the name under the resolved parent", missing, got, err)
	}
	if _, err := Canonical(filepath.Join(base, "loop1")); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a symlink loop: %v; want ELOOP", err)
	}
}
