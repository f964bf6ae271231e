package prefetch

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// Learned opens. LuceneOpen's built-in sizes (LuceneHead, LuceneTail)
// are the default profile. An open of an index may read more of a kind
// of file than that (a larger header, the kernel's readahead around the
// footer): the engine records, per file extension, how far into a file
// and back from its end the reads of the first ProfileWindow after an
// index's first sight reached, and keeps that profile with the cache, so
// that the next cold mount of the same source fetches by it. A profile
// only ever widens the built-in ranges, to at most ProfileMax.

// Extent is how much of a kind of file an open read: the first Head and
// the last Tail bytes.
type Extent struct {
	Head int64 `json:"head,omitempty"`
	Tail int64 `json:"tail,omitempty"`
}

// Profile is a learned open: the extents by file extension (".tim",
// ".fdt"), and the source it was learned from.
type Profile struct {
	Source  string            `json:"source"`
	Extents map[string]Extent `json:"extents"`
}

// ProfileMax bounds a learned extent.
const ProfileMax = 1 << 20

// Ext returns the extension a profile keys a file name by.
func Ext(name string) string { return path.Ext(path.Base(name)) }

// Record widens the extent of name's kind with a read of n bytes at off
// of a file of size bytes: a read in the first half counts toward the
// head, one in the second toward the tail. It reports whether the
// profile grew.
func (p *Profile) Record(name string, size, off, n int64) bool {
	ext := Ext(name)
	if ext == "" || size <= LuceneWhole || n <= 0 {
		return false
	}
	if p.Extents == nil {
		p.Extents = map[string]Extent{}
	}
	e := p.Extents[ext]
	grew := false
	if off < size/2 {
		if h := min(off+n, ProfileMax); h > e.Head {
			e.Head, grew = h, true
		}
	} else if tl := min(size-off, ProfileMax); tl > e.Tail {
		e.Tail, grew = tl, true
	}
	p.Extents[ext] = e
	return grew
}

// extent returns the head and tail LuceneOpen fetches of name: the
// built-in sizes, widened by the profile.
func (p *Profile) extent(name string) (head, tail int64) {
	head, tail = LuceneHead, LuceneTail
	if p == nil {
		return head, tail
	}
	e := p.Extents[Ext(name)]
	return max(head, min(e.Head, ProfileMax)), max(tail, min(e.Tail, ProfileMax))
}

// MarshalProfile encodes p for the cache.
func MarshalProfile(p *Profile) ([]byte, error) { return json.Marshal(p) }

// UnmarshalProfile decodes a profile stored for source; one from another
// source, or that does not parse, is an error (the caller ignores it).
func UnmarshalProfile(data []byte, source string) (*Profile, error) {
	var p Profile
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("open profile: %w", err)
	}
	if p.Source != source {
		return nil, fmt.Errorf("open profile of %q, not of this source", p.Source)
	}
	for ext, e := range p.Extents {
		if !strings.HasPrefix(ext, ".") || e.Head < 0 || e.Tail < 0 || e.Head > ProfileMax || e.Tail > ProfileMax {
			return nil, fmt.Errorf("open profile: extent %q %+v out of bounds", ext, e)
		}
	}
	return &p, nil
}
