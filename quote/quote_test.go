package quote

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// printable fails the test if out holds a control rune (C0, DEL or C1)
// or a byte that is not UTF-8: what a terminal could act on.
func printable(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) || strings.IndexFunc(out, unicode.IsControl) >= 0 {
		t.Errorf("%s: unprintable output %q", what, out)
	}
}

func TestQuoteName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// Lucene and OpenSearch names, and other usual ones, stay as
		// they are.
		{"_0.cfs", "_0.cfs"},
		{"segments_5", "segments_5"},
		{"write.lock", "write.lock"},
		{"indices/k2ij/0/index/_1_Lucene90_0.tim", "indices/k2ij/0/index/_1_Lucene90_0.tim"},
		{"odd/uni-é", "odd/uni-é"},
		{"per%cent#hash?q", "per%cent#hash?q"},
		// What would be ambiguous or unsafe is quoted.
		{"", `""`},
		{"sp ace", `"sp ace"`},
		{`"quoted"`, `"\"quoted\""`},
		{"it's", `"it's"`},
		{`back\slash`, `"back\\slash"`},
		{"a\nsegfs: forged", `"a\nsegfs: forged"`},
		{"b\x1b[31mred", `"b\x1b[31mred"`},
		{"c\u009b31m", `"c\u009b31m"`},
		{"d\xff.cfs", `"d\xff.cfs"`},
		{"e\u202eexe.fdt", `"e\u202eexe.fdt"`},
		{"nb\u00a0sp", `"nb\u00a0sp"`},
		{"\ufffd", "\ufffd"}, // a valid U+FFFD is a printable rune
		{"h\x7fdel", `"h\x7fdel"`},
	} {
		got := Name(c.in)
		if got != c.want {
			t.Errorf("Name(%q) = %s, want %s", c.in, got, c.want)
		}
		back := got
		if strings.HasPrefix(got, `"`) {
			var err error
			if back, err = strconv.Unquote(got); err != nil {
				t.Errorf("Name(%q) = %s: does not unquote: %v", c.in, got, err)
			}
		}
		if back != c.in {
			t.Errorf("Name(%q) = %s gives back %q", c.in, got, back)
		}
		printable(t, "Name("+strconv.Quote(c.in)+")", got)
	}
}

func TestEscapeText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"fetch idx/b [0,1024): object not found", "fetch idx/b [0,1024): object not found"},
		{"uni-é: ok", "uni-é: ok"},
		{`a\b`, `a\b`},
		{"read a\nsegfs: forged: EIO", `read a\nsegfs: forged: EIO`},
		{"b\x1b[31mred", `b\x1b[31mred`},
		{"d\xff\xfe", `d\xff\xfe`},
		{"c\u009b", `c\u009b`},
		{"tab\there", `tab\there`},
		{"h\x7fdel", `h\x7fdel`},
	} {
		got := Text(c.in)
		if got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
		printable(t, "Text("+strconv.Quote(c.in)+")", got)
	}
}

// escapeJSON leaves JSON as a decoder reads it, and leaves no
// unprintable rune in it; JSON without one is returned as it is.
func TestEscapeJSON(t *testing.T) {
	values := append([]string{"_0.cfs", "uni-é", "h\x7fdel", "\U0001d11e music", "z\U000e0001tag"},
		"a\nsegfs: forged", "b\x1b[31mred", "c\u009b31m", "d\xff.cfs", "e\u202eexe.fdt", "f\tcol", "g\r")
	for _, v := range values {
		raw, err := json.Marshal(map[string]string{"name": v})
		if err != nil {
			t.Fatal(err)
		}
		got := JSON(raw)
		printable(t, "escapeJSON of "+strconv.Quote(v), string(got))
		var back map[string]string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("JSON(%s) = %s: not JSON: %v", raw, got, err)
		}
		if want := strings.ToValidUTF8(v, "\ufffd"); back["name"] != want {
			t.Errorf("JSON(%s) = %s decodes to %q, want %q", raw, got, back["name"], want)
		}
		if Printable(v) && !bytes.Equal(got, raw) {
			t.Errorf("escapeJSON changed %s to %s", raw, got)
		}
	}
	// A byte that is not UTF-8, which no encoder writes, is U+FFFD.
	if got := string(JSON([]byte("\"a\xffb\""))); got != `"a\ufffdb"` {
		t.Errorf("escapeJSON of a byte that is not UTF-8: %s", got)
	}
}
