package clidoc

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Man writes the CLI's man page in roff (man(7)) to w: a NAME, a
// SYNOPSIS, the global options, then one section per command with its
// arguments and options, each with its default. section is the manual
// section (8 for a system administration command); version and date
// go in the page's header (date "" leaves it out, for a page that must
// not change with the day it is built).
func (c CLI) Man(w io.Writer, section int, version, date string) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format+"\n", args...) }
	upper := strings.ToUpper(c.Name)
	p(`.TH %s %d %s %s "%s"`, upper, section, quoteArg(date), quoteArg(c.Name+" "+version), "System Administration")
	p(".SH NAME")
	p(`%s \- %s`, roff(c.Name), roff(strings.TrimSuffix(strings.TrimPrefix(c.Help, c.Name+" "), ".")))
	p(".SH SYNOPSIS")
	p(`.B %s`, roff(c.Name))
	p(`[\fIGLOBAL OPTIONS\fR] \fICOMMAND\fR [\fIOPTIONS\fR] [\fIARGUMENTS\fR]`)
	p(".SH DESCRIPTION")
	p("%s", roff(c.Help))
	p(".PP")
	p("The commands:")
	for _, cmd := range c.Commands {
		p(".TP")
		p(`.B %s`, roff(cmd.Name))
		p("%s", roff(firstSentence(cmd.Help)+"."))
	}
	p(".SH GLOBAL OPTIONS")
	manFlags(p, c.Globals)
	for _, cmd := range c.Commands {
		p(".SH %s", roff(strings.ToUpper(c.Name+" "+cmd.Name)))
		synopsis := `.B "` + roff(c.Name+" "+cmd.Name) + `"`
		p("%s", synopsis)
		line := `[\fIOPTIONS\fR]`
		for _, a := range cmd.Args {
			arg := `\fI` + roff(strings.ToUpper(a.Name)) + `\fR`
			if a.Optional {
				arg = "[" + arg + "]"
			}
			line += " " + arg
		}
		p("%s", line)
		p(".PP")
		p("%s", roff(cmd.Help))
		if cmd.Detail != "" {
			p(".PP")
			p("%s", roff(cmd.Detail))
		}
		if len(cmd.Args) > 0 {
			p(".SS Arguments")
			for _, a := range cmd.Args {
				p(".TP")
				p(`.I %s`, roff(strings.ToUpper(a.Name)))
				p("%s", roff(a.Help))
			}
		}
		if len(cmd.Flags) > 0 {
			p(".SS Options")
			manFlags(p, cmd.Flags)
		}
	}
	return bw.Flush()
}

func manFlags(p func(string, ...any), flags []Flag) {
	for _, f := range flags {
		p(".TP")
		head := `\fB\-\-` + roff(f.Name) + `\fR`
		if f.Negation != "" {
			head += `, \fB\-\-` + roff(f.Negation) + `\fR`
		}
		if f.Short != 0 {
			head = `\fB\-` + roff(string(f.Short)) + `\fR, ` + head
		}
		if f.TakesValue() {
			head += `=\fI` + roff(f.PlaceHolder) + `\fR`
		}
		p("%s", head)
		help := f.Help
		if f.Default != "" {
			help += " Default: " + f.Default + "."
		}
		p("%s", roff(help))
	}
}

// roff escapes text for a line of roff: backslashes, a leading dot or
// quote (which would make the line a request), and every dash as \-,
// which man renders as the ASCII hyphen a command line needs (a plain
// "-" may become a typographic hyphen that cannot be pasted).
func roff(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, `\`, `\e`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return strings.ReplaceAll(s, "-", `\-`)
}

// quoteArg is a macro argument in double quotes.
func quoteArg(s string) string {
	return `"` + strings.ReplaceAll(roff(s), `"`, `\(dq`) + `"`
}
