package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/segfs/segfs/clidoc"
	"github.com/segfs/segfs/daemon"
	"github.com/segfs/segfs/prefetch"
)

func TestParseByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"4096", 4096, true},
		{"8MiB", 8 << 20, true},
		{"8M", 8 << 20, true},
		{"8 mb", 8 << 20, true},
		{"1GiB", 1 << 30, true},
		{"64k", 64 << 10, true},
		{"2T", 2 << 40, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"1.5MiB", 0, false},
		{"3 parsecs", 0, false},
		{"99999999999999T", 0, false},
	} {
		got, err := parseByteSize(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
	if s := byteSize(8 << 20).String(); s != "8MiB" {
		t.Errorf("String() = %q", s)
	}
}

func TestCheckMountpoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string
	}{
		{dir, ""},
		{filepath.Join(dir, "missing"), "does not exist"},
		{file, "not a directory"},
		{"/proc", "busy"},
	} {
		err := checkMountpoint(c.path, slog.Default())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("checkMountpoint(%s): %v", c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("checkMountpoint(%s) = %v, want an error saying %q", c.path, err, c.want)
		}
	}
}

func TestMountFlagBounds(t *testing.T) {
	base := defaultMountCmd(t)
	cases := []struct {
		max, background int
		ok              bool
		reserved        int
		prefetch        prefetch.Mode
	}{
		{16, 0, true, 0, prefetch.Open}, // the scheduler's default
		{16, 12, true, 4, prefetch.Open},
		{16, 15, true, 1, prefetch.Open},
		{16, 16, false, 0, prefetch.Open}, // nothing left for reads that wait
		{16, -1, false, 0, prefetch.Open},
		{1, 1, true, 0, prefetch.Open},
		{1, 2, false, 0, prefetch.Open},
		{16, 0, true, 1, prefetch.All}, // a copy's mount: all but one
		{16, 12, true, 4, prefetch.All},
		{1, 0, true, 0, prefetch.All}, // the only worker: the scheduler's default
	}
	for _, c := range cases {
		m := base
		m.MaxFetches, m.BackgroundFetches, m.Prefetch = c.max, c.background, string(c.prefetch)
		err := m.validate()
		if (err == nil) != c.ok {
			t.Errorf("--max-fetches %d --background-fetches %d: err %v, want ok %v", c.max, c.background, err, c.ok)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), "--background-fetches") {
			t.Errorf("error %q does not name the flag", err)
		}
		if c.ok && m.reserved() != c.reserved {
			t.Errorf("--max-fetches %d --background-fetches %d --prefetch %s: reserved %d, want %d", c.max, c.background, c.prefetch, m.reserved(), c.reserved)
		}
	}
	for _, c := range []struct {
		readahead byteSize
		ok        bool
	}{{4096, true}, {4 << 20, true}, {64 << 20, true}, {0, false}, {4095, false}, {6000, false}, {64<<20 + 4096, false}} {
		m := base
		m.Readahead = c.readahead
		err := m.validate()
		if (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), "--readahead") {
			t.Errorf("--readahead %d: err %v, want ok %v", c.readahead, err, c.ok)
		}
	}
}

// defaultMountCmd returns `segfs mount`'s flags as parsed with none
// given: every default, as a user gets them.
func defaultMountCmd(t *testing.T) mountCmd {
	t.Helper()
	var c cli
	p, err := kong.New(&c, kong.Name("segfs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse([]string{"mount", "s3://bucket", "/mnt"}); err != nil {
		t.Fatal(err)
	}
	return c.Mount
}

// TestHelperFormCheck parses rewritten command lines with the real
// command line model: known options pass, unknown ones and bad values
// fail naming the -o option.
func TestHelperFormCheck(t *testing.T) {
	for _, c := range []struct {
		opts string
		err  []string // substrings of the error; nil for none
	}{
		{"ro,endpoint=http://127.0.0.1:7070,path_style,cache_dir=/var/cache/segfs,region=us-east-1", nil},
		{"part_size=4MiB,prefetch=all,no_segment_prefetch,log_level=debug", nil},
		{"ro,no_such_option", []string{"-o no_such_option", "unknown flag --no-such-option"}},
		{"cache=1", []string{"-o cache", "--cache"}},
		{"cache_dir=/x,part_size=lots", []string{"-o part_size"}},
		{"prefetch=sometimes", []string{"-o prefetch"}},
	} {
		h, err := daemon.ParseHelperForm([]string{"s3://bucket", "/mnt/x", "-o", c.opts})
		if err != nil {
			t.Fatal(err)
		}
		err = h.Check(parseOnly)
		if c.err == nil {
			if err != nil {
				t.Errorf("-o %s: %v", c.opts, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("-o %s: no error, want one saying %q", c.opts, c.err)
			continue
		}
		for _, s := range c.err {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("-o %s: error %q does not say %q", c.opts, err, s)
			}
		}
	}
}

// docs/FLAGS.md, written by hand, names every flag of segfs mount that
// --help shows, so that it does not fall behind the command line.
func TestFlagsDocNamesEveryMountFlag(t *testing.T) {
	var c cli
	p, err := kong.New(&c, kong.Name("segfs"), kong.Vars{"version": "test"})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "FLAGS.md"))
	if err != nil {
		t.Fatal(err)
	}
	model := clidoc.FromKong(p.Model)
	found := false
	for _, cmd := range model.Commands {
		if cmd.Name != "mount" {
			continue
		}
		found = true
		for _, f := range cmd.Flags {
			if !strings.Contains(string(doc), "`--"+f.Name) && !strings.Contains(string(doc), "`--[no-]"+f.Name) {
				t.Errorf("docs/FLAGS.md does not name --%s", f.Name)
			}
		}
	}
	if !found {
		t.Fatal("no mount command in the model")
	}
}
