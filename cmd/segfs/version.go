package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// stamp is the version a release build is given (-ldflags "-X
// main.stamp=..."; the Makefile's VERSION, which the packages carry
// too); "" for a plain go build.
var stamp string

// build is what the binary knows of its own build.
type build struct {
	version  string // the module version, "(devel)" for a build of a work tree
	revision string // the VCS commit, with "+dirty" if the tree had changes; "unknown" if not recorded
}

// buildInfo reads the build info the Go toolchain embeds.
func buildInfo() build {
	b := build{version: "(devel)", revision: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if stamp != "" {
			b.version = stamp
		}
		return b
	}
	if bi.Main.Version != "" {
		b.version = bi.Main.Version
	}
	if stamp != "" {
		b.version = stamp
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.revision != "unknown" {
		b.revision += "+dirty"
	}
	return b
}

// versionString is what --version prints.
func versionString() string {
	b := buildInfo()
	return fmt.Sprintf("segfs %s (commit %s, %s, %s/%s)", b.version, b.revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
