package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module is the module path that marks the repository root.
const Module = "github.com/segfs/segfs"

// Environment variables that name the binaries. The Makefile exports both as
// absolute paths; without them the binaries are looked up in <root>/bin.
const (
	EnvSegfsBin     = "SEGFS_BIN"
	EnvVersitygwBin = "VERSITYGW_BIN"
	// EnvRequireE2E, when set to a non-empty value, turns a missing binary
	// from a skipped test into a failed one (see RequireBinaries).
	EnvRequireE2E = "SEGFS_REQUIRE_E2E"
)

// ErrBinaryMissing is wrapped by the errors FindBinaries returns for a
// binary that does not exist.
var ErrBinaryMissing = errors.New("binary not found")

// Binaries are the absolute paths of the programs an end-to-end run needs.
type Binaries struct {
	// Root is the repository root (the directory holding go.mod).
	Root string
	// Segfs is the segfs binary.
	Segfs string
	// Versitygw is the versitygw S3 server binary.
	Versitygw string
}

// RepoRoot walks up from the working directory to the go.mod of Module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repo root: %w", err)
	}
	for {
		if isModuleRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repo root: no go.mod of module %s above the working directory", Module)
		}
		dir = parent
	}
}

func isModuleRoot(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == Module
		}
	}
	return false
}

// FindBinaries locates the repository root and both binaries: from
// SEGFS_BIN and VERSITYGW_BIN when set, else <root>/bin/segfs and
// <root>/bin/versitygw. It always fills in every path it could compute;
// the error (wrapping ErrBinaryMissing) names each binary that is absent.
func FindBinaries() (Binaries, error) {
	root, rootErr := RepoRoot()
	b := Binaries{Root: root}
	var errs []error
	var err error
	if b.Segfs, err = binPath(EnvSegfsBin, root, "segfs", rootErr); err != nil {
		errs = append(errs, err)
	}
	if b.Versitygw, err = binPath(EnvVersitygwBin, root, "versitygw", rootErr); err != nil {
		errs = append(errs, err)
	}
	return b, errors.Join(errs...)
}

func binPath(envVar, root, name string, rootErr error) (string, error) {
	p := os.Getenv(envVar)
	if p == "" {
		if root == "" {
			return "", fmt.Errorf("%s: %s not set and no repository root (%v): %w", name, envVar, rootErr, ErrBinaryMissing)
		}
		p = filepath.Join(root, "bin", name)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p, fmt.Errorf("%s: %w", name, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return abs, fmt.Errorf("%s at %s (set %s or run make build deps): %w", name, abs, envVar, ErrBinaryMissing)
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return abs, fmt.Errorf("%s at %s is not an executable file: %w", name, abs, ErrBinaryMissing)
	}
	return abs, nil
}

// BuildSegfs builds ./cmd/segfs of the repository at root into
// <root>/bin/segfs with the go command on PATH and returns the binary's
// path. Programs that want a fresh binary without make can call it; the
// tests never build on their own.
func BuildSegfs(ctx context.Context, root string) (string, error) {
	out := filepath.Join(root, "bin", "segfs")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/segfs")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/segfs: %w\n%s", err, b)
	}
	return out, nil
}
