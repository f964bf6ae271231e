// Package clidoc writes a command line's man page and shell completions
// from its kong model: the same flags, help and defaults that --help
// prints, so that none of them can drift from the program.
package clidoc

import (
	"strings"

	"github.com/alecthomas/kong"
)

// CLI is a program's command line: its global flags and its commands,
// each one level deep (segfs has no nested commands).
type CLI struct {
	Name, Help string
	Globals    []Flag
	Commands   []Command
}

// Command is one command of a CLI.
type Command struct {
	Name, Help, Detail string
	Flags              []Flag // its own, not the globals
	Args               []Arg
}

// Flag is one flag.
type Flag struct {
	Name        string
	Short       rune // 0 if none
	Help        string
	Default     string // "" if none
	PlaceHolder string // what its value is called; "" for a boolean
	Enum        []string
	// Negation is the name of a boolean's negated form ("no-cache" for
	// --no-cache), "" if it has none.
	Negation string
}

// Arg is one positional argument.
type Arg struct {
	Name, Help string
	Optional   bool
	Enum       []string // the values it may take; none for a path or a name
}

// FromKong reads a CLI from app, the model kong built. Hidden commands
// and flags are left out.
func FromKong(app *kong.Application) CLI {
	c := CLI{Name: app.Name, Help: app.Help, Globals: flags(app.Flags)}
	for _, n := range app.Children {
		if n.Hidden || n.Type != kong.CommandNode {
			continue
		}
		cmd := Command{Name: n.Name, Help: n.Help, Detail: n.Detail, Flags: flags(n.Flags)}
		for _, p := range n.Positional {
			cmd.Args = append(cmd.Args, Arg{Name: p.Name, Help: p.Help, Optional: !p.Required, Enum: splitEnum(p.Enum)})
		}
		c.Commands = append(c.Commands, cmd)
	}
	return c
}

func flags(in []*kong.Flag) []Flag {
	var out []Flag
	for _, f := range in {
		if f.Hidden {
			continue
		}
		fl := Flag{Name: f.Name, Short: f.Short, Help: f.Help}
		if f.Tag != nil && f.IsBool() {
			switch neg := f.Tag.Negatable; neg {
			case "":
			case "_": // kong's mark for the default, --no-NAME
				fl.Negation = "no-" + f.Name
			default:
				fl.Negation = neg
			}
		}
		if f.HasDefault && !f.IsBool() {
			fl.Default = f.Default
		}
		if !f.IsBool() && !f.IsCounter() {
			fl.PlaceHolder = f.PlaceHolder
			if fl.PlaceHolder == "" && !f.HasDefault {
				fl.PlaceHolder = f.FormatPlaceHolder() // its type, as --help shows it
			}
			if fl.PlaceHolder == "" { // kong would show the default: the page shows it apart
				fl.PlaceHolder = strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			}
		}
		fl.Enum = splitEnum(f.Enum)
		out = append(out, fl)
	}
	return out
}

func splitEnum(enum string) []string {
	var out []string
	for _, e := range strings.Split(enum, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// argEnum is the values of the command's arguments when they are a
// choice (each argument an enum); none when any is a path or a name.
func (c Command) argEnum() []string {
	var out []string
	for _, a := range c.Args {
		if len(a.Enum) == 0 {
			return nil
		}
		out = append(out, a.Enum...)
	}
	return out
}

// TakesValue reports whether the flag is followed by a value.
func (f Flag) TakesValue() bool { return f.PlaceHolder != "" }

// firstSentence is help cut at its first sentence's end, for the short
// descriptions completions show.
func firstSentence(help string) string {
	help = strings.Join(strings.Fields(help), " ")
	if i := strings.Index(help, ". "); i >= 0 {
		help = help[:i]
	}
	return strings.TrimSuffix(help, ".")
}
