package fs

import (
	"os/exec"
	"strings"
	"testing"
)

// The module's packages stand in layers, each importing only those
// below it (docs/DESIGN.md, "Packages"), and go-fuse is imported by the
// FUSE edge alone: the read engine and the command know nothing of it.
func TestLayers(t *testing.T) {
	const mod = "github.com/segfs/segfs/"
	rank := map[string]int{
		"stats":            -1, // counters and histograms, which every layer keeps
		"dirfd":            -1, // system calls below a held directory, which cache and restore share
		"directio":         -1, // O_DIRECT alignment, which cache and restore share
		"mountinfo":        -1, // the kernel's table of mounts, which fs, the command and the tests read
		"quote":            -1, // names from a store made safe to print, for the command and its servers
		"internal/testmem": -1, // the tests' count of bytes allocated, imported by tests alone
		"fetcher":          0, "cache": 0, "compress": 0, "lucene": 0, "smile": 0, "clidoc": 0,
		"entry": 1, "prefetch": 1, "push": 1,
		"reader": 2, "snapshot": 2, "layout": 2,
		"restore": 3, "verify": 3,
		"view":      3, // what a mount shows: a layout's shapes, resolved through fetcher
		"fs":        4, // the FUSE edge: a view's tree as go-fuse nodes
		"ops":       5, // the operator surface: control socket, /stats, /metrics, profiles
		"daemon":    5, // the mount helper form, its daemon, readiness
		"follow":    6, // a mount following its store: view, fs and reader joined
		"cmd/segfs": 7,
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := strings.CutPrefix(f[0], mod)
		if !ok || strings.HasPrefix(pkg, "tests/") {
			continue // the tests' programs may use anything
		}
		r, known := rank[pkg]
		if !known {
			t.Errorf("package %s has no layer in this test", pkg)
			continue
		}
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, "github.com/hanwen/go-fuse") && pkg != "fs" {
				t.Errorf("%s imports %s: only fs may", pkg, imp)
			}
			dep, ok := strings.CutPrefix(imp, mod)
			if !ok {
				continue
			}
			if dr, known := rank[dep]; known && dr >= r {
				t.Errorf("%s imports %s, which is not below it", pkg, dep)
			}
		}
	}
}
