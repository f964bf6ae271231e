package main

import (
	"os"

	"github.com/alecthomas/kong"

	"github.com/segfs/segfs/clidoc"
)

// completionCmd is `segfs completion SHELL`.
type completionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"The shell: bash, zsh or fish."`
}

// Run prints the shell's completion script, made from the command line
// model that --help prints (package clidoc).
func (c *completionCmd) Run(kctx *kong.Context) error {
	cli := clidoc.FromKong(kctx.Model)
	switch c.Shell {
	case "zsh":
		return cli.Zsh(os.Stdout)
	case "fish":
		return cli.Fish(os.Stdout)
	}
	return cli.Bash(os.Stdout)
}

// manCmd is `segfs man`, hidden: the packages and `make install` write
// segfs(8) with it.
type manCmd struct {
	Date string `help:"The date the page's header shows (the build's commit date); none if empty."`
}

// Run prints segfs(8).
func (c *manCmd) Run(kctx *kong.Context) error {
	return clidoc.FromKong(kctx.Model).Man(os.Stdout, 8, buildInfo().version, c.Date)
}
