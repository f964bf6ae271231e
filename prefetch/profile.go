package prefetch

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
)

// Learned opens. LuceneOpen's ranges follow the kernel's reads (Kernel)
// and the built-in minimums. An open may read more of a kind of file
// than that (a codec that reads a larger header, an index block near
// the footer): the engine records, per kind of file, how far into a
// file and back from its end the reads of the first ProfileWindow after
// its directory's first sight reached, and keeps that profile with the
// cache, one per cache directory, so that every later open of an index
// by that node fetches by it: the next shard in the same mount, and the
// next mount of any source with that cache. A profile only ever widens
// the ranges, to at most ProfileMax.

// Extent is how much of a kind of file an open read: the first Head and
// the last Tail bytes.
type Extent struct {
	Head int64 `json:"head,omitempty"`
	Tail int64 `json:"tail,omitempty"`
}

// Profile is a learned open: the extents by kind of file (Kind). Its
// methods may be called concurrently; the policy reads it while the
// engine records into it.
type Profile struct {
	mu      sync.Mutex
	extents map[string]Extent
}

// ProfileMax bounds a learned extent.
const ProfileMax = 1 << 20

// Kind returns the kind of file a profile keys a file name by: its
// name without the segment, which leaves the codec's suffix and the
// extension ("_Lucene84_0.doc" of "_7_Lucene84_0.doc", ".fdt" of
// "_7.fdt"), so that every segment of every shard shares it. A name
// that is not a segment's file keys by its extension alone.
func Kind(name string) string {
	base := path.Base(name)
	if strings.HasPrefix(base, "_") && len(base) > 1 {
		if i := strings.IndexAny(base[1:], "._"); i >= 0 {
			return base[i+1:]
		}
	}
	return path.Ext(base)
}

// Record widens the extent of name's kind with a read of n bytes at off
// of a file of size bytes: a read in the first half counts toward the
// head, one in the second toward the tail. It reports whether the
// profile grew.
func (p *Profile) Record(name string, size, off, n int64) bool {
	kind := Kind(name)
	if kind == "" || !strings.Contains(kind, ".") || size <= LuceneWhole || n <= 0 || off < 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.extents == nil {
		p.extents = map[string]Extent{}
	}
	e := p.extents[kind]
	grew := false
	if off < size/2 {
		if h := min(off+n, ProfileMax); h > e.Head {
			e.Head, grew = h, true
		}
	} else if tl := min(size-off, ProfileMax); tl > e.Tail {
		e.Tail, grew = tl, true
	}
	p.extents[kind] = e
	return grew
}

// Merge widens p by every extent of q, and reports whether p grew.
func (p *Profile) Merge(q *Profile) bool {
	if q == nil || p == q {
		return false
	}
	grew := false
	for kind, e := range q.Extents() {
		p.mu.Lock()
		if p.extents == nil {
			p.extents = map[string]Extent{}
		}
		old := p.extents[kind]
		w := Extent{Head: max(old.Head, e.Head), Tail: max(old.Tail, e.Tail)}
		if w != old {
			p.extents[kind], grew = w, true
		}
		p.mu.Unlock()
	}
	return grew
}

// Extents returns a copy of p's extents by kind.
func (p *Profile) Extents() map[string]Extent {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]Extent, len(p.extents))
	for k, e := range p.extents {
		out[k] = e
	}
	return out
}

// extent returns what p learned of name's kind, capped at ProfileMax;
// zero for a nil profile.
func (p *Profile) extent(name string) Extent {
	if p == nil {
		return Extent{}
	}
	p.mu.Lock()
	e := p.extents[Kind(name)]
	p.mu.Unlock()
	return Extent{Head: min(e.Head, ProfileMax), Tail: min(e.Tail, ProfileMax)}
}

// profileFile is a profile as stored: a version and the extents.
type profileFile struct {
	Version int               `json:"version"`
	Extents map[string]Extent `json:"extents"`
}

// profileVersion is the version of the stored form: the extents by
// Kind, one profile per cache directory. A profile of another version
// (by extension, per source) is ignored.
const profileVersion = 2

// MarshalProfile encodes p for the cache.
func MarshalProfile(p *Profile) ([]byte, error) {
	return json.Marshal(profileFile{Version: profileVersion, Extents: p.Extents()})
}

// UnmarshalProfile decodes a stored profile; one of another version, or
// that does not parse or holds an extent out of bounds, is an error
// (the caller ignores it).
func UnmarshalProfile(data []byte) (*Profile, error) {
	var f profileFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("open profile: %w", err)
	}
	if f.Version != profileVersion {
		return nil, fmt.Errorf("open profile of version %d, not %d", f.Version, profileVersion)
	}
	for kind, e := range f.Extents {
		if !strings.Contains(kind, ".") || e.Head < 0 || e.Tail < 0 || e.Head > ProfileMax || e.Tail > ProfileMax {
			return nil, fmt.Errorf("open profile: extent %q %+v out of bounds", kind, e)
		}
	}
	return &Profile{extents: f.Extents}, nil
}
