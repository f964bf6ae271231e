package clidoc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

type testCLI struct {
	Level string `name:"log-level" default:"info" enum:"debug,info" help:"Log level. More words."`
	Mount struct {
		Source   string `arg:"" help:"Where from."`
		Dir      string `arg:"" optional:"" help:"Where to."`
		CacheDir string `name:"cache-dir" placeholder:"DIR" help:"The cache's directory."`
		Layout   string `default:"plain" enum:"plain,snapshot" help:"How it is laid out."`
		Fast     bool   `help:"Go fast; a \\backslash and .dot-led words."`
		Secret   bool   `hidden:"" help:"Not shown."`
		Prefetch bool   `default:"true" negatable:"" help:"Prefetch."`
	} `cmd:"" help:"Mount it. Then serve."`
	Status struct {
		JSON bool `name:"json" help:"As JSON."`
	} `cmd:"" help:"Report."`
	Completion struct {
		Shell string `arg:"" enum:"bash,zsh" help:"The shell."`
	} `cmd:"" help:"Print a script."`
	Hidden struct{} `cmd:"" hidden:"" help:"Never shown."`
}

func model(t *testing.T) CLI {
	t.Helper()
	var c testCLI
	p, err := kong.New(&c, kong.Name("tool"), kong.Description("tool does things."))
	if err != nil {
		t.Fatal(err)
	}
	return FromKong(p.Model)
}

func TestFromKong(t *testing.T) {
	c := model(t)
	if len(c.Commands) != 3 || c.Commands[0].Name != "mount" || c.Commands[1].Name != "status" || c.Commands[2].Name != "completion" {
		t.Fatalf("commands %+v; want mount, status and completion, not the hidden one", c.Commands)
	}
	if e := c.Commands[2].argEnum(); strings.Join(e, " ") != "bash zsh" {
		t.Errorf("completion's argument values %q", e)
	}
	if e := c.Commands[0].argEnum(); e != nil {
		t.Errorf("mount's arguments are paths, not a choice: %q", e)
	}
	m := c.Commands[0]
	if len(m.Args) != 2 || m.Args[0].Optional || !m.Args[1].Optional {
		t.Errorf("args %+v", m.Args)
	}
	byName := map[string]Flag{}
	for _, f := range m.Flags {
		byName[f.Name] = f
	}
	if _, ok := byName["secret"]; ok {
		t.Error("a hidden flag is listed")
	}
	if f := byName["cache-dir"]; f.PlaceHolder != "DIR" || !f.TakesValue() {
		t.Errorf("cache-dir: %+v", f)
	}
	if f := byName["layout"]; f.Default != "plain" || strings.Join(f.Enum, ",") != "plain,snapshot" || f.PlaceHolder != "LAYOUT" {
		t.Errorf("layout: %+v", f)
	}
	if f := byName["fast"]; f.TakesValue() || f.Default != "" || f.Negation != "" {
		t.Errorf("a boolean: %+v", f)
	}
	if f := byName["prefetch"]; f.Negation != "no-prefetch" {
		t.Errorf("a negatable boolean: %+v", f)
	}
}

// The page names every command, argument and flag with its default,
// escapes what roff would take for requests, and formats without a
// warning where groff is installed.
func TestMan(t *testing.T) {
	var b bytes.Buffer
	if err := model(t).Man(&b, 8, "v1", "2026-12-04"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`.TH TOOL 8 "2026\-12\-04" "tool v1"`, ".SH TOOL MOUNT", ".SH TOOL STATUS", `\fB\-\-cache\-dir\fR=\fIDIR\fR`,
		`Default: plain.`, `.I SOURCE`, `[\fIDIR\fR]`, `\ebackslash`, `\fB\-\-log\-level\fR`, `tool \- does things`, `\fB\-\-prefetch\fR, \fB\-\-no\-prefetch\fR`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "Never shown") || strings.Contains(page, "Not shown") {
		t.Error("the page shows a hidden command or flag")
	}
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, ".") && !strings.HasPrefix(line, ".TH") && !strings.HasPrefix(line, ".S") &&
			!strings.HasPrefix(line, ".TP") && !strings.HasPrefix(line, ".PP") && !strings.HasPrefix(line, ".B") && !strings.HasPrefix(line, ".I") {
			t.Errorf("a text line is a request: %q", line)
		}
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command(groff, "-man", "-ww", "-z")
		cmd.Stdin = strings.NewReader(page)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff: %v: %s", err, out)
		}
	}
}

// The bash script completes commands, flags, enum values (after a
// space or an "="), and a command after a global flag's value.
func TestBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	var b bytes.Buffer
	if err := model(t).Bash(&b); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "c.bash")
	if err := os.WriteFile(script, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ words, want string }{
		{"tool mo", "mount"},
		{"tool ", "mount status completion --help --log-level"},
		{"tool mount --cache", "--cache-dir"},
		{"tool mount --layout sn", "snapshot"},
		{"tool mount --layout = sn", "snapshot"},
		{"tool --log-level debug st", "status"},
		{"tool --log-level = info mount --fa", "--fast"},
		{"tool status --j", "--json"},
		{"tool mount --no-p", "--no-prefetch"},
		{"tool completion z", "zsh"},
	} {
		words := strings.Split(c.words, " ")
		src := `source ` + script + `; COMP_WORDS=(` + quoteWords(words) + `); COMP_CWORD=` + itoa(len(words)-1) + `; _tool; echo "${COMPREPLY[*]}"`
		out, err := exec.Command(bash, "-c", src).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || !strings.HasPrefix(got, c.want) {
			t.Errorf("%q: %q, %v; want it to start with %q", c.words, got, err, c.want)
		}
	}
}

// The zsh function finds the command past global flags and their
// values, and hands _arguments the command's words.
func TestZshCommandPastGlobals(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh is not installed")
	}
	var b bytes.Buffer
	if err := model(t).Zsh(&b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "_tool")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// The completion system's functions, stubbed to say how they were called.
	script := `_describe() { print -r -- describe }
_arguments() { print -r -- "args ${words[1]} $CURRENT" }
_files() { : }
words=(tool --log-level debug mo); CURRENT=4; source ` + p + `
words=(tool --log-level=info mount --ca); CURRENT=4; source ` + p + `
words=(tool mount --ca); CURRENT=3; source ` + p
	out, err := exec.Command(zsh, "-f", "-c", script).CombinedOutput()
	want := "describe\nargs tool 4\nargs mount 2\nargs mount 2\n"
	if err != nil || string(out) != want {
		t.Errorf("zsh: %v\n%s\nwant\n%s", err, out, want)
	}
}

// The zsh and fish scripts parse, where the shells are installed.
func TestZshFishParse(t *testing.T) {
	c := model(t)
	for _, sh := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{{"zsh", func(b *bytes.Buffer) error { return c.Zsh(b) }}, {"fish", func(b *bytes.Buffer) error { return c.Fish(b) }}} {
		bin, err := exec.LookPath(sh.name)
		if err != nil {
			t.Logf("%s is not installed: its script is not parsed", sh.name)
			continue
		}
		var b bytes.Buffer
		if err := sh.write(&b); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "script")
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "-n", p).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v: %s\n%s", sh.name, err, out, b.String())
		}
		for _, want := range []string{"mount", "status", "cache-dir", "snapshot"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("the %s script lacks %q", sh.name, want)
			}
		}
	}
}

func quoteWords(ws []string) string {
	var q []string
	for _, w := range ws {
		q = append(q, "'"+w+"'")
	}
	return strings.Join(q, " ")
}

func itoa(n int) string { return strconv.Itoa(n) }
