package layout

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestMetadataNameRoundTrip(t *testing.T) {
	tests := []MetadataName{
		{PrimaryTerm: 1, Generation: 5, TranslogGeneration: 3, UploadCounter: 1, NodeHash: NodeHash("node-1"), CreatedMillis: 1700000000000, Version: 1},
		{PrimaryTerm: 12, Generation: 0, TranslogGeneration: 0, UploadCounter: 0, NodeHash: "-2147483617", CreatedMillis: 0, Version: 3},
		{PrimaryTerm: math.MaxInt64, Generation: math.MaxInt64, TranslogGeneration: 1, UploadCounter: 2, NodeHash: "0", CreatedMillis: 1, Version: 2},
	}
	for _, m := range tests {
		name := FormatMetadataName(m)
		m.Tokens = 8
		got, err := ParseMetadataName(name)
		if err != nil || got != m {
			t.Errorf("ParseMetadataName(%q) = %+v, %v; want %+v", name, got, err, m)
		}
	}
}

func TestFormatMetadataName(t *testing.T) {
	m := MetadataName{PrimaryTerm: 1, Generation: 5, TranslogGeneration: 3, UploadCounter: 1, NodeHash: "-123", CreatedMillis: 1700000000000, Version: 1}
	want := "metadata__9223372036854775806__9223372036854775802__9223372036854775804__9223372036854775806__-123__9223370336854775807__1"
	if got := FormatMetadataName(m); got != want {
		t.Errorf("FormatMetadataName = %q\nwant %q", got, want)
	}
}

// TestMetadataNameOrder checks that ascending names are newest first: a
// higher primary term, then a higher generation.
func TestMetadataNameOrder(t *testing.T) {
	base := MetadataName{PrimaryTerm: 2, Generation: 10, TranslogGeneration: 4, UploadCounter: 7, NodeHash: "5", CreatedMillis: 1000, Version: 1}
	newer := []struct {
		name string
		edit func(*MetadataName)
	}{
		{"primary term", func(m *MetadataName) { m.PrimaryTerm++; m.Generation = 1; m.UploadCounter = 1 }},
		{"generation", func(m *MetadataName) { m.Generation++; m.UploadCounter = 1 }},
		{"generation past a digit", func(m *MetadataName) { m.Generation = 100 }},
		{"upload counter", func(m *MetadataName) { m.UploadCounter++ }},
	}
	for _, tt := range newer {
		n := base
		tt.edit(&n)
		a, b := FormatMetadataName(n), FormatMetadataName(base)
		if a >= b {
			t.Errorf("%s: newer %q does not sort before %q", tt.name, a, b)
		}
		if got, err := NewestMetadata([]string{b, a}); err != nil || got != a {
			t.Errorf("%s: NewestMetadata = %q, %v; want %q", tt.name, got, err, a)
		}
	}
}

func TestParseMetadataNameOldForm(t *testing.T) {
	// The form before 2.11, as OpenSearch's RemoteStoreUtilsTests build
	// it: no node hash.
	name := "metadata__9223372036854775795__9223372036854775784__9223372036854775773__9223372036854775806__9223370336854775807__1"
	want := MetadataName{PrimaryTerm: 12, Generation: 23, TranslogGeneration: 34, UploadCounter: 1, CreatedMillis: 1700000000000, Version: 1, Tokens: 7}
	got, err := ParseMetadataName(name)
	if err != nil || got != want {
		t.Errorf("ParseMetadataName = %+v, %v; want %+v", got, err, want)
	}
}

func TestParseMetadataNameBad(t *testing.T) {
	good := strings.Split(FormatMetadataName(MetadataName{PrimaryTerm: 1, Generation: 2, TranslogGeneration: 3, UploadCounter: 4, NodeHash: "-9", CreatedMillis: 5, Version: 1}), "__")
	with := func(i int, tok string) string {
		t := slices.Clone(good)
		t[i] = tok
		return strings.Join(t, "__")
	}
	tests := map[string]string{
		"other prefix":        "refresh__" + strings.Join(good[1:], "__"),
		"pre-2.8 form":        "metadata__1__5__gX7bNIIBrs0AUNsR2yEG",
		"too few tokens":      strings.Join(good[:6], "__"),
		"too many tokens":     strings.Join(good, "__") + "__x",
		"short number":        with(1, "922337203685477580"),
		"number past MaxInt":  with(2, "9999999999999999999"),
		"signed number":       with(3, "+223372036854775807"),
		"node hash not int32": with(5, "2147483648"),
		"node hash not digit": with(5, "abc"),
		"version not digits":  with(7, "v1"),
		"empty":               "",
	}
	for name, in := range tests {
		if _, err := ParseMetadataName(in); !errors.Is(err, ErrBadMetadataName) {
			t.Errorf("%s: ParseMetadataName(%q) = %v, want ErrBadMetadataName", name, in, err)
		}
	}
}

func TestNodeHash(t *testing.T) {
	tests := map[string]string{
		"":                   "31",          // 31 + "".hashCode()
		"a":                  "128",         // 31 + 97
		"polygenelubricants": "-2147483617", // hashCode is Integer.MIN_VALUE
		"é":                  "264",         // one UTF-16 unit, 0xe9
		"😀":                  "1772930",     // a surrogate pair: 31*0xd83d + 0xde00 + 31
	}
	for in, want := range tests {
		if got := NodeHash(in); got != want {
			t.Errorf("NodeHash(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestNewestMetadata(t *testing.T) {
	mk := func(pt, gen, counter int64, node string) string {
		return FormatMetadataName(MetadataName{PrimaryTerm: pt, Generation: gen, TranslogGeneration: gen, UploadCounter: counter, NodeHash: node, CreatedMillis: 1, Version: 1})
	}
	old := "metadata__9223372036854775806__9223372036854775802__9223372036854775804__9223372036854775806__9223370336854775807__1"
	tests := []struct {
		name  string
		names []string
		want  string
		err   error
	}{
		{"one", []string{mk(1, 1, 1, "7")}, mk(1, 1, 1, "7"), nil},
		{"others ignored", []string{"lock", "metadata_x", mk(1, 1, 1, "7"), "x/" + mk(9, 9, 9, "7")}, mk(1, 1, 1, "7"), nil},
		{"newest term wins", []string{mk(1, 9, 1, "7"), mk(2, 1, 1, "8")}, mk(2, 1, 1, "8"), nil},
		{"same writer twice", []string{mk(1, 2, 1, "7"), mk(1, 2, 2, "7")}, mk(1, 2, 2, "7"), nil},
		{"old and new forms", []string{old, mk(1, 9, 1, "7")}, mk(1, 9, 1, "7"), nil},
		{"old form newest", []string{old, mk(1, 1, 1, "7")}, old, nil},
		{"none", []string{"a", "b"}, "", ErrNoMetadata},
		{"empty", nil, "", ErrNoMetadata},
		{"two writers", []string{mk(1, 2, 1, "7"), mk(1, 2, 2, "-8")}, "", ErrMultipleWriters},
		{"two writers, older refresh", []string{mk(1, 3, 1, "7"), mk(1, 2, 1, "7"), mk(1, 2, 2, "8")}, "", ErrMultipleWriters},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewestMetadata(tt.names)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Errorf("NewestMetadata = %q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}

	// Only the first 10 are checked for two writers, as OpenSearch does.
	var names []string
	for gen := int64(20); gen > 10; gen-- {
		names = append(names, mk(1, gen, 1, "7"))
	}
	names = append(names, mk(1, 2, 1, "7"), mk(1, 2, 2, "8"))
	if got, err := NewestMetadata(names); err != nil || got != mk(1, 20, 1, "7") {
		t.Errorf("two writers past the first 10: %q, %v", got, err)
	}
}
