package harness

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

// The tool's lines parse into the result, the directory last and kept
// whole with its spaces; "ready" calls the callback once, in order.
func TestParseOpen(t *testing.T) {
	out := strings.Join([]string{
		"warm ms=812.5 queries=200",
		"ready",
		"open kind=nio ms=12.345 segments=3 docs=3000 dir=/tmp/a dir/index",
		"queries kind=nio n=200 hits=10483 digest=07792a38 p50=0.123 p99=1.234 max=2.345 total=45.6 dir=/tmp/a dir/index",
		"",
	}, "\n")
	var res LuceneResult
	var kept strings.Builder
	readies := 0
	err := parseOpen(bufio.NewScanner(strings.NewReader(out)), &kept, &res, func() error {
		readies++
		if len(res.Opens) != 0 {
			t.Error("ready called after an open line")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if readies != 1 || res.WarmMs != 812.5 {
		t.Errorf("ready called %d times, warm %v ms; want once, 812.5", readies, res.WarmMs)
	}
	wantOpen := LuceneOpened{Dir: "/tmp/a dir/index", Kind: "nio", Ms: 12.345, Segments: 3, Docs: 3000}
	if len(res.Opens) != 1 || res.Opens[0] != wantOpen {
		t.Errorf("opens %+v, want [%+v]", res.Opens, wantOpen)
	}
	wantQ := LuceneQueries{Dir: "/tmp/a dir/index", Kind: "nio", N: 200, Hits: 10483, Digest: "07792a38", P50: 0.123, P99: 1.234, Max: 2.345, Total: 45.6}
	if len(res.Queries) != 1 || res.Queries[0] != wantQ {
		t.Errorf("queries %+v, want [%+v]", res.Queries, wantQ)
	}
	if kept.String() != strings.TrimSuffix(out, "\n")+"\n" {
		t.Errorf("kept output %q", kept.String())
	}
}

// A malformed figure and a failing callback stop the parse with an
// error naming the line.
func TestParseOpenErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct{ name, out string }{
		{"bad ms", "open kind=mmap ms=x segments=3 docs=1 dir=/d\n"},
		{"missing hits", "queries kind=mmap n=1 digest=0 p50=1 p99=1 max=1 total=1 dir=/d\n"},
		{"ready fails", "ready\nopen kind=mmap ms=1 segments=1 docs=1 dir=/d\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res LuceneResult
			var kept strings.Builder
			err := parseOpen(bufio.NewScanner(strings.NewReader(tc.out)), &kept, &res, func() error { return boom })
			if err == nil || !strings.Contains(err.Error(), "line ") {
				t.Errorf("err = %v, want one naming the line", err)
			}
		})
	}
}
