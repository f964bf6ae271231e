package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/segfs/segfs/ops"
	"github.com/segfs/segfs/quote"
	"github.com/segfs/segfs/verify"
)

// hostileNames are keys a store may hold that must not reach a terminal
// as they are: a newline that would forge a line, an escape sequence, a
// C1 control (U+009B is CSI to some terminals), a byte that is not
// UTF-8, a right-to-left override, a tab that would shift a column.
var hostileNames = []string{
	"a\nsegfs: forged",
	"b\x1b[31mred",
	"c\u009b31m",
	"d\xff.cfs",
	"e\u202eexe.fdt",
	"f\tcol",
	"g\r",
}

// controlFree fails the test if out holds a byte below 0x20 other than
// the newline ending each line (and the tabs a table writer may pad
// with, when tabs is set), DEL, or a C1 control rune.
func controlFree(t *testing.T, what, out string, tabs bool) {
	t.Helper()
	for i, r := range out {
		switch {
		case r == '\n', r == '\t' && tabs:
		case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
			t.Errorf("%s: control %U at byte %d:\n%q", what, r, i, out)
			return
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(out[i:]); size == 1 {
				t.Errorf("%s: a byte that is not UTF-8 at %d:\n%q", what, i, out)
				return
			}
		}
	}
}

// The file table of segfs status has one row a file whatever its name,
// and prints no control byte; plain names are printed as they are.
func TestPrintStatusQuotesNames(t *testing.T) {
	rep := &ops.StatusReport{Source: "s3://bucket/pre\x1b[2Jfix", Mountpoint: "/mnt/x", CacheDir: "/var/cache/segfs", Version: "v1"}
	rep.Files = append(rep.Files, ops.FileStatus{Name: "_0.cfs", Size: 100})
	for _, n := range hostileNames {
		rep.Files = append(rep.Files, ops.FileStatus{Name: n, Size: 10})
	}
	rep.FileCount = len(rep.Files)
	var b bytes.Buffer
	printStatus(&b, rep)
	out := b.String()
	controlFree(t, "status", out, false)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	table := lines[len(lines)-len(rep.Files):]
	if lines[len(lines)-len(rep.Files)-1] != "files:" {
		t.Fatalf("status has %d lines after its file table's heading, want %d:\n%s", len(table), len(rep.Files), out)
	}
	for i, f := range rep.Files {
		if !strings.HasSuffix(table[i], " "+quote.Name(f.Name)) {
			t.Errorf("row %d %q does not end in the file's quoted name %s", i, table[i], quote.Name(f.Name))
		}
	}
	if !strings.HasSuffix(table[0], " _0.cfs") {
		t.Errorf("a plain name is not printed as it is: %q", table[0])
	}
	if !strings.Contains(out, `"s3://bucket/pre\x1b[2Jfix"`) {
		t.Errorf("the source is not quoted:\n%s", out)
	}
}

// segfs warm prints one line a file, "cached NAME" or "segfs: warm:
// NAME: ERROR", whatever the names and the daemon's messages hold, and
// its failure names them escaped.
func TestWarmFollowQuotesNames(t *testing.T) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.Encode(ops.WarmEvent{Files: 2*len(hostileNames) + 1, TotalBytes: 100})
	enc.Encode(ops.WarmEvent{Bytes: 1, File: "_0.cfs"})
	for _, n := range hostileNames {
		enc.Encode(ops.WarmEvent{Bytes: 2, File: n})
		enc.Encode(ops.WarmEvent{Bytes: 2, File: n + "x", Error: "fetch " + n + "x: not found\nsegfs: forged too"})
	}
	enc.Encode(ops.WarmEvent{Bytes: 3, Done: true, Failed: len(hostileNames)})
	var stdout, stderr bytes.Buffer
	c := &warmCmd{Mountpoint: "/mnt"}
	err := c.follow(context.Background(), &body, &stdout, &stderr)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("warm with failures: %v, want exit 1", err)
	}
	controlFree(t, "warm's stdout", stdout.String(), false)
	controlFree(t, "warm's stderr", stderr.String(), false)
	controlFree(t, "warm's error", err.Error(), false)
	outLines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if want := 2 + 1 + len(hostileNames); len(outLines) != want {
		t.Errorf("warm printed %d lines on stdout, want %d (warming, one a cached file, warmed):\n%s", len(outLines), want, stdout.String())
	}
	if outLines[1] != "cached _0.cfs" {
		t.Errorf("a plain name: %q, want \"cached _0.cfs\"", outLines[1])
	}
	// The events are JSON, which carries a byte that is not UTF-8 as
	// U+FFFD.
	for i, n := range hostileNames {
		if want := "cached " + quote.Name(strings.ToValidUTF8(n, "\ufffd")); outLines[2+i] != want {
			t.Errorf("line %d: %q, want %q", 2+i, outLines[2+i], want)
		}
	}
	errLines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(errLines) != len(hostileNames) {
		t.Errorf("warm printed %d lines on stderr, want one a failed file:\n%s", len(errLines), stderr.String())
	}
	for i, l := range errLines {
		if want := "segfs: warm: " + quote.Name(strings.ToValidUTF8(hostileNames[i], "\ufffd")+"x") + ": fetch "; !strings.HasPrefix(l, want) {
			t.Errorf("stderr line %d: %q, want it to start with %q", i, l, want)
		}
	}
}

// The table of segfs verify has one row a file; its names and problems
// print no control byte.
func TestVerifyReportQuotesNames(t *testing.T) {
	results := []verify.Result{{Name: "_0.cfs", Size: 10, Status: verify.OK}}
	for _, n := range hostileNames {
		results = append(results, verify.Result{Name: n, Size: 1, Status: verify.Damaged, Problem: "read " + n + ": EIO"})
	}
	var b bytes.Buffer
	c := &verifyCmd{}
	if bad := c.report(&b, results); bad != len(hostileNames) {
		t.Errorf("report counts %d bad, want %d", bad, len(hostileNames))
	}
	controlFree(t, "verify", b.String(), false)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if want := 1 + len(results) + 1; len(lines) != want {
		t.Fatalf("verify printed %d lines, want %d (heading, a row a file, summary):\n%s", len(lines), want, b.String())
	}
	for i, r := range results {
		if !strings.HasPrefix(lines[1+i], quote.Name(r.Name)+" ") {
			t.Errorf("row %q does not start with the quoted name %s", lines[1+i], quote.Name(r.Name))
		}
	}
}

// Both log formats keep a record on one line with no control byte,
// whatever names its message and values hold, and the name can be read
// back exactly: slog's text handler quotes a value or message that needs
// it (strconv.Quote), and its JSON handler escapes control characters.
// Only a byte that is not UTF-8 is lost in JSON (as U+FFFD).
func TestLogEscapesNames(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			log := newLogger(&b, format, slog.LevelInfo)
			for _, n := range hostileNames {
				log.Info("go-fuse: LOOKUP "+n, "file", n, "err", errors.New("fetch "+n+": not found"))
			}
			out := b.String()
			controlFree(t, format+" log", out, false)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != len(hostileNames) {
				t.Fatalf("%d records logged as %d lines:\n%s", len(hostileNames), len(lines), out)
			}
			for i, l := range lines {
				want := hostileNames[i]
				var got string
				if format == "json" {
					var rec map[string]any
					if err := json.Unmarshal([]byte(l), &rec); err != nil {
						t.Fatalf("line %d is not JSON: %v: %s", i, err, l)
					}
					got, _ = rec["file"].(string)
					want = strings.ToValidUTF8(want, "\ufffd")
				} else {
					_, v, ok := strings.Cut(l, " file=")
					q, err := strconv.QuotedPrefix(v)
					if !ok || err != nil {
						t.Fatalf("line %d: no quoted file=: %s", i, l)
					}
					got, _ = strconv.Unquote(q)
				}
				if got != want {
					t.Errorf("line %d: file %q, want %q", i, got, want)
				}
			}
		})
	}
}
