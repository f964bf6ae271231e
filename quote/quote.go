// Package quote makes names and messages from a store safe to print:
// for people (Name, Text) and for programs (JSON, WriteJSON).
package quote

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Names from the store reach the terminal in the lines segfs prints for
// people: the file table of status, the lines of warm and verify, error
// messages. A key is any byte string an S3 client chose: one holding a
// newline would forge a line of that output, one holding an escape
// sequence would drive the terminal. So every name or path printed goes
// through Name and every message that may hold one through
// Text. Output meant for programs (--json, --log-format json) is
// JSON, escaped by its encoder and by JSON for what the encoder
// passes; the text log is quoted by slog's handler (TestLogEscapesNames).

// Name returns name as a line of output shows it: unchanged when it
// is valid UTF-8 of printable runes without a space, quote or backslash,
// as every Lucene file name is (_0.cfs, segments_5, indices/x/0/_1.fdt);
// otherwise as a Go string literal (strconv.Quote), which writes each
// unprintable rune and each byte that is not UTF-8 as an escape. The
// quoted form never holds a control byte, and strconv.Unquote gives back
// the exact bytes of the name, invalid UTF-8 included; a name that would
// look like a quoted one (it starts with a quote) or is empty is quoted
// too, so a printed name is never ambiguous.
func Name(name string) string {
	if name != "" && plain(name) {
		return name
	}
	return strconv.Quote(name)
}

// plain reports whether s is valid UTF-8 of printable runes (as
// strconv.IsPrint, which admits no space but U+0020) without a space,
// quote or backslash.
func plain(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false // a byte that is not UTF-8
			}
		}
		if !strconv.IsPrint(r) || r == ' ' || r == '"' || r == '\'' || r == '\\' {
			return false
		}
	}
	return true
}

// Text returns the message s with every unprintable rune written
// as its Go escape (a newline as \n, ESC as \x1b, U+202E as \u202e) and
// every byte that is not UTF-8 as \xNN; the rest, spaces included, stays
// as it is. The result is one line with no control byte, whatever names
// the message quotes. Unlike Name it does not escape backslashes:
// it is for people, who read the escapes as such; a message's names, when
// they must be told apart exactly, are Name'd where it is made.
func Text(s string) string {
	if Printable(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, r := range s {
		switch _, size := utf8.DecodeRuneInString(s[i:]); {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r) // '\n', '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

// Printable reports whether s is valid UTF-8 of printable runes (as
// strconv.IsPrint: U+0020 is the one space among them).
func Printable(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return false
			}
		}
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// JSON returns the JSON text p (as encoding/json and slog write
// it) with each rune that is unprintable but not escaped by them written
// as a \u escape: DEL, the C1 controls (U+009B is CSI to terminals that
// take C1 controls in UTF-8) and format runes such as U+202E, which the
// encoders pass as they are. Outside its strings JSON text is printable
// ASCII, so every such rune is in a string, where the escape means the
// same rune: the values a program decodes are unchanged. p is returned
// as it is when it holds none.
func JSON(p []byte) []byte {
	clean := true
	for i := 0; i < len(p) && clean; {
		r, size := utf8.DecodeRune(p[i:])
		clean = !escapedInJSON(r, size)
		i += size
	}
	if clean {
		return p
	}
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case escapedInJSON(r, size):
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r) // a byte that is not UTF-8 as U+FFFD, as json does
			}
		default:
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	return out
}

// escapedInJSON reports whether JSON escapes the rune r, decoded
// from size bytes: DEL, an unprintable rune beyond ASCII, a byte that is
// not UTF-8. The encoders escape the ASCII controls themselves.
func escapedInJSON(r rune, size int) bool {
	return r == 0x7f || r == utf8.RuneError && size == 1 || r >= utf8.RuneSelf && !strconv.IsPrint(r)
}

// JSONWriter writes JSON text through JSON. Each Write must hold
// whole runes, as slog's JSON handler and json.Encoder write a whole
// record or value at once.
type JSONWriter struct{ W io.Writer }

// WriteJSON writes v to w as indented JSON, with the characters a
// terminal would act on escaped (JSONWriter): a command's --json output.
func WriteJSON(w io.Writer, v any) {
	enc := json.NewEncoder(JSONWriter{W: w})
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (e JSONWriter) Write(p []byte) (int, error) {
	if _, err := e.W.Write(JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
