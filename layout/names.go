package layout

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Errors of the metadata-name functions.
var (
	// ErrBadMetadataName marks a name that is not a metadata file name of
	// a form this package knows.
	ErrBadMetadataName = errors.New("layout: bad metadata file name")
	// ErrNoMetadata marks a listing that holds no metadata file.
	ErrNoMetadata = errors.New("layout: no metadata file")
	// ErrMultipleWriters marks a listing whose newest files show two
	// nodes writing the same shard: OpenSearch refuses it, so does segfs.
	ErrMultipleWriters = errors.New("layout: metadata files of two writers")
)

const (
	// metadataPrefix starts every metadata file name; the separator is
	// part of it, so "metadata_x" is not a metadata file.
	metadataPrefix = "metadata__"
	nameSeparator  = "__"
	// invertedDigits is the width of an inverted number: the digits of
	// math.MaxInt64, so that every inverted value sorts as a string the
	// way it sorts as a number.
	invertedDigits = 19
	// metadataFilesToFetch is how many of the first names OpenSearch reads
	// (RemoteSegmentStoreDirectory.METADATA_FILES_TO_FETCH) and checks for
	// two writers.
	metadataFilesToFetch = 10
)

// MetadataName is what a metadata file's name says. OpenSearch 2.11 and
// later write 8 tokens:
//
//	metadata__<inv(PrimaryTerm)>__<inv(Generation)>__<inv(TranslogGeneration)>__<inv(UploadCounter)>__<NodeHash>__<inv(CreatedMillis)>__<Version>
//
// where inv(x) is math.MaxInt64-x written as 19 zero-padded digits, so
// that ascending names are descending numbers: the newest file lists
// first. Before 2.11 the name had 7 tokens, without NodeHash.
type MetadataName struct {
	PrimaryTerm        int64
	Generation         int64 // the segments_N generation of the refresh
	TranslogGeneration int64
	// UploadCounter counts uploads of one directory instance from 1; it
	// restarts after a node restart or relocation, so it orders files only
	// within one primary term and generation.
	UploadCounter int64
	// NodeHash is Java's Objects.hash(nodeId) in decimal (see NodeHash):
	// a 32-bit signed value, so it may be negative. "" in the 7-token form.
	NodeHash      string
	CreatedMillis int64 // epoch milliseconds of the upload
	Version       int   // the RemoteSegmentMetadata version of the body
	Tokens        int   // how many "__"-separated tokens the name has: 7 or 8
}

// ParseMetadataName parses a metadata file name of the 8-token form or
// the older 7-token one. The oldest form (metadata__<pt>__<gen in base
// 36>__<uuid>, before inverted numbers) is refused: it does not sort
// newest first, and segfs does not mount stores that old.
func ParseMetadataName(name string) (MetadataName, error) {
	bad := func(format string, args ...any) (MetadataName, error) {
		return MetadataName{}, fmt.Errorf("%w: %q: %s", ErrBadMetadataName, name, fmt.Sprintf(format, args...))
	}
	if !strings.HasPrefix(name, metadataPrefix) {
		return bad("does not start with %q", metadataPrefix)
	}
	tokens := strings.Split(name, nameSeparator)
	var m MetadataName
	m.Tokens = len(tokens)
	var inverted []*int64
	switch len(tokens) {
	case 8:
		inverted = []*int64{&m.PrimaryTerm, &m.Generation, &m.TranslogGeneration, &m.UploadCounter, nil, &m.CreatedMillis}
	case 7:
		inverted = []*int64{&m.PrimaryTerm, &m.Generation, &m.TranslogGeneration, &m.UploadCounter, &m.CreatedMillis}
	case 4:
		return bad("the pre-2.8 form metadata__<term>__<gen>__<uuid> is not supported")
	default:
		return bad("%d tokens, want 8 (or 7 before OpenSearch 2.11)", len(tokens))
	}
	for i, dst := range inverted {
		tok := tokens[1+i]
		if dst == nil {
			if _, err := strconv.ParseInt(tok, 10, 32); err != nil || !isDecimal(strings.TrimPrefix(tok, "-")) {
				return bad("node hash %q is not a 32-bit decimal", tok)
			}
			m.NodeHash = tok
			continue
		}
		v, err := parseInverted(tok)
		if err != nil {
			return bad("token %d: %v", 1+i, err)
		}
		*dst = v
	}
	last := tokens[len(tokens)-1]
	v, err := strconv.Atoi(last)
	if err != nil || !isDecimal(last) {
		return bad("version %q is not a decimal", last)
	}
	m.Version = v
	return m, nil
}

// FormatMetadataName returns the 8-token name of m, as OpenSearch 2.11
// and later write it; m.Tokens is ignored. The numbers must not be
// negative and NodeHash must be a 32-bit decimal, as OpenSearch's
// writer guarantees; otherwise it panics.
func FormatMetadataName(m MetadataName) string {
	if _, err := strconv.ParseInt(m.NodeHash, 10, 32); err != nil {
		panic(fmt.Sprintf("layout: FormatMetadataName: node hash %q is not a 32-bit decimal", m.NodeHash))
	}
	if m.Version < 0 {
		panic(fmt.Sprintf("layout: FormatMetadataName: negative version %d", m.Version))
	}
	return strings.Join([]string{
		"metadata",
		invert(m.PrimaryTerm),
		invert(m.Generation),
		invert(m.TranslogGeneration),
		invert(m.UploadCounter),
		m.NodeHash,
		invert(m.CreatedMillis),
		strconv.Itoa(m.Version),
	}, nameSeparator)
}

// NodeHash returns the NodeHash token OpenSearch writes for nodeID:
// Java's Objects.hash(nodeId), 31 + nodeId.hashCode() over its UTF-16
// code units, in 32-bit arithmetic.
func NodeHash(nodeID string) string {
	var h int32
	for _, c := range utf16.Encode([]rune(nodeID)) {
		h = 31*h + int32(c)
	}
	return strconv.Itoa(int(31 + h))
}

// NewestMetadata returns the newest metadata file of a listing of a
// shard's metadata prefix (base names; entries not starting "metadata__"
// are ignored), as OpenSearch's readLatestMetadataFile picks it: the
// first in ascending byte order. Like OpenSearch it first checks the
// first 10 for two writers: files of the 8-token form with the same
// primary term, generation and translog generation but different node
// hashes are an error wrapping ErrMultipleWriters. A listing without a
// metadata file is an error wrapping ErrNoMetadata.
func NewestMetadata(names []string) (string, error) {
	var md []string
	for _, n := range names {
		if strings.HasPrefix(n, metadataPrefix) {
			md = append(md, n)
		}
	}
	if len(md) == 0 {
		return "", fmt.Errorf("%w among %d names", ErrNoMetadata, len(names))
	}
	sort.Strings(md)
	first := md[:min(len(md), metadataFilesToFetch)]
	writers := make(map[string]string, len(first))
	for _, n := range first {
		key, node, ok := writerOf(n)
		if !ok {
			continue // before 2.11: no node hash to compare
		}
		if prev, seen := writers[key]; seen && prev != node {
			return "", fmt.Errorf("%w: node hashes %s and %s both wrote primary term, generation and translog generation %s",
				ErrMultipleWriters, prev, node, key)
		}
		writers[key] = node
	}
	return md[0], nil
}

// writerOf returns what OpenSearch's getNodeIdByPrimaryTermAndGen does:
// tokens 1 to 3 joined, and token 5, for a name of at least 8 tokens as
// Java's String.split counts them (trailing empty tokens dropped).
func writerOf(name string) (key, node string, ok bool) {
	tokens := strings.Split(name, nameSeparator)
	for len(tokens) > 0 && tokens[len(tokens)-1] == "" {
		tokens = tokens[:len(tokens)-1]
	}
	if len(tokens) < 8 {
		return "", "", false
	}
	return strings.Join(tokens[1:4], nameSeparator), tokens[5], true
}

// invert writes math.MaxInt64-x in invertedDigits zero-padded digits.
func invert(x int64) string {
	if x < 0 {
		panic(fmt.Sprintf("layout: FormatMetadataName: negative value %d", x))
	}
	s := strconv.FormatInt(math.MaxInt64-x, 10)
	return strings.Repeat("0", invertedDigits-len(s)) + s
}

// parseInverted is the inverse of invert. It takes exactly
// invertedDigits digits, as invert writes, since only that width sorts.
func parseInverted(tok string) (int64, error) {
	if len(tok) != invertedDigits || !isDecimal(tok) {
		return 0, fmt.Errorf("%q is not %d decimal digits", tok, invertedDigits)
	}
	v, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is more than the largest long", tok)
	}
	return math.MaxInt64 - v, nil
}

// isDecimal reports whether s is one or more ASCII digits and nothing
// else: strconv alone would take a sign.
func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// CheckBlobName returns nil if name, the uploaded name a metadata file
// gives one of its files, is a plain blob name: one key element right
// below the shard's data path. It must not be empty, "." or "..", nor
// hold a "/", a "\" or a NUL. Every name OpenSearch uploads is one
// (<file>__<URL-safe base64 UUID>). Any other would not name the key it
// is fetched as: a server resolves dot elements and separators in the
// request's path, and path.Join cleans them, so that another shard's or
// another index's blob would be read as this shard's file (issue 42).
// ParseMetadata refuses a file naming one; view's resolvers check
// again before a name is matched to a listing or asked for.
func CheckBlobName(name string) error {
	switch {
	case name == "":
		return errors.New("empty blob name")
	case name == "." || name == "..":
		return fmt.Errorf("blob name %q is a dot name", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("blob name %q holds a separator or a NUL, so it is not one key element", name)
	}
	return nil
}

// MetadataNewer reports whether the metadata file name records a later
// state of the shard than the file than, in the order OpenSearch reads
// the newest by (NewestMetadata): a higher primary term; at the same
// one a higher generation; at the same commit (a refresh keeps the
// generation of the commit it follows) a higher translog generation,
// then a higher upload counter. A name that does not parse is compared
// by its bytes, as NewestMetadata sorts them. The same state under two
// names is not newer.
func MetadataNewer(name, than string) bool {
	a, errA := ParseMetadataName(name)
	b, errB := ParseMetadataName(than)
	if errA != nil || errB != nil {
		return name < than // ascending names are descending numbers
	}
	for _, c := range [][2]int64{
		{a.PrimaryTerm, b.PrimaryTerm},
		{a.Generation, b.Generation},
		{a.TranslogGeneration, b.TranslogGeneration},
		{a.UploadCounter, b.UploadCounter},
	} {
		if c[0] != c[1] {
			return c[0] > c[1]
		}
	}
	return false
}
