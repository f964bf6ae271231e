package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/segfs/segfs/internal/testmem"
	"runtime"
	"strings"
	"testing"
)

// repeated returns open, then elem n times joined by commas, then close.
func repeated(open, elem, close string, n int) []byte {
	return []byte(open + strings.Repeat(elem+",", n-1) + elem + close)
}

// Issue 42: index-N files of 60 MB whose elements cost far more than
// their bytes (a 60 MB file of `{}` snapshots took 4 GB) are refused
// before json.Unmarshal allocates anything for them; so are documents
// that list more than the counts segfs takes.
func TestParseIndexNBudget(t *testing.T) {
	const size = 60 << 20
	many := func(open, elem, close string) []byte {
		return repeated(open, elem, close, (size-len(open)-len(close))/(len(elem)+1))
	}
	budget := fmt.Sprintf("more than %d bytes, the most segfs builds of an index-N", MaxIndexNBuilt)
	for _, c := range []struct {
		name, want string
		raw        []byte
	}{
		{"empty snapshots", budget, many(`{"snapshots":[`, `{}`, `]}`)},
		{"null snapshots", budget, many(`{"snapshots":[`, `null`, `]}`)},
		{"a name of another case", budget, many(`{"SnapShots":[`, `{}`, `]}`)},
		{"empty indices", budget, many(`{"indices":{`, `"a":{}`, `}}`)}, // one name, which json would keep once: estimated before
		{"empty uuids", budget, many(`{"indices":{"x":{"id":"I","snapshots":[`, `""`, `]}}}`)},
		{"null shard generations", budget, many(`{"indices":{"x":{"id":"I","shard_generations":[`, `null`, `]}}}`)},
		{"a long string not UTF-8", "longer than 65536 bytes", []byte(`{"snapshots":[{"name":"` + strings.Repeat("\xff", size) + `"}]}`)},
		{"too many snapshots", fmt.Sprintf("lists %d snapshots and 0 indices, more than the %d", MaxSnapshots+1, MaxSnapshots),
			repeated(`{"snapshots":[`, `{"uuid":"u"}`, `]}`, MaxSnapshots+1)},
		{"an index in too many snapshots", fmt.Sprintf("index x is in %d snapshots, more than the %d", MaxSnapshots+1, MaxSnapshots),
			repeated(`{"indices":{"x":{"id":"I","snapshots":[`, `"u"`, `]}}}`, MaxSnapshots+1)},
		{"too many indices", fmt.Sprintf("more than the %d and %d segfs takes", MaxSnapshots, MaxIndices),
			[]byte(`{"indices":{` + strings.TrimPrefix(string(repeatedIndices(MaxIndices+1)), ",") + `}}`)},
		{"nesting too deep", "nesting deeper than 10000", []byte(strings.Repeat("[", 10001))},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			n := testmem.Allocated(func() { _, err = ParseIndexN(c.raw, 3) })
			t.Logf("%d bytes: %d MiB allocated: %v", len(c.raw), n>>20, err)
			if !errors.Is(err, ErrBlob) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want an error saying %q", err, c.want)
			}
			if n > MaxIndexNBuilt {
				t.Errorf("%d bytes allocated, more than MaxIndexNBuilt (%d)", n, MaxIndexNBuilt)
			}
		})
	}
}

// repeatedIndices returns n members `,"<i>":{"id":"I"}`.
func repeatedIndices(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `,"%x":{"id":"I"}`, i)
	}
	return []byte(b.String())
}

// The estimate is no less than what json.Unmarshal keeps, and about
// twice the bytes of an index-N of a real repository's shape: the lists
// of snapshot uuids of many indices.
func TestIndexNCost(t *testing.T) {
	type doc struct {
		Snapshots []SnapshotInfo       `json:"snapshots"`
		Indices   map[string]IndexInfo `json:"indices"`
	}
	d := doc{Indices: map[string]IndexInfo{}}
	var uuids []string
	for i := range 1000 {
		u := fmt.Sprintf("%022d", i)
		uuids = append(uuids, u)
		d.Snapshots = append(d.Snapshots, SnapshotInfo{Name: fmt.Sprintf("daily-%d", i), UUID: u, State: StateSuccess, Version: "8.11.0"})
	}
	for i := range 400 {
		g := "abcdefghijklmnopqrstuv"
		d.Indices[fmt.Sprintf("logs-%06d", i)] = IndexInfo{ID: fmt.Sprintf("I%021d", i), Snapshots: uuids[i:], ShardGenerations: []*string{&g, nil, &g}}
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	cost, err := indexNCost(raw, MaxIndexNBuilt)
	if err != nil {
		t.Fatal(err)
	}
	var r *Repository
	n := testmem.Allocated(func() { r, err = ParseIndexN(raw, 1) })
	if err != nil || len(r.Snapshots) != 1000 || len(r.Indices) != 400 {
		t.Fatalf("%v", err)
	}
	t.Logf("%d bytes: estimated %d, %.2f a byte; %d allocated in all", len(raw), cost, float64(cost)/float64(len(raw)), n)
	if cost > 3*int64(len(raw)) {
		t.Errorf("estimated %d for %d bytes of a real shape: more than three times its size", cost, len(raw))
	}
	for name, raw := range map[string]string{
		"not JSON":          `{"snapshots":[{`,
		"a quote escaped":   `{"snapshots":[{"name":"a\"],[[[["}]}`,
		"literals":          `[true,false,null,-1.5e3]`,
		"closing too early": `]]]}}`,
	} {
		if _, err := indexNCost([]byte(raw), MaxIndexNBuilt); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The estimate is no less than the heap the parsed index-N keeps, for
// each kind of value it charges.
func TestIndexNCostKept(t *testing.T) {
	const n = 100_000
	uuid := `"abcdefghijklmnopqrstuv"`
	for name, raw := range map[string][]byte{
		"snapshots":         repeated(`{"snapshots":[`, `{"name":"daily","uuid":"u","state":1,"version":"8.11.0"}`, `]}`, n),
		"empty indices":     []byte(`{"indices":{` + strings.TrimPrefix(string(repeatedIndices(n)), ",") + `}}`),
		"uuid lists":        repeated(`{"indices":{"x":{"id":"I","snapshots":[`, uuid, `]}}}`, n),
		"empty uuids":       repeated(`{"indices":{"x":{"id":"I","snapshots":[`, `""`, `]}}}`, n),
		"shard generations": repeated(`{"indices":{"x":{"id":"I","shard_generations":[`, uuid, `]}}}`, n),
		"non-ASCII names":   []byte(`{"indices":{` + strings.ReplaceAll(strings.TrimPrefix(string(repeatedIndices(n)), ","), `":{`, "é\xff\":{") + `}}`),
	} {
		cost, err := indexNCost(raw, MaxIndexNBuilt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r, err := parseIndexNUnbounded(raw)
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		runtime.KeepAlive(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: %d bytes, estimated %d, kept %d", name, len(raw), cost, kept)
		if kept > cost {
			t.Errorf("%s: %d bytes kept, more than the %d estimated", name, kept, cost)
		}
	}
}

// parseIndexNUnbounded is json.Unmarshal into ParseIndexN's types.
func parseIndexNUnbounded(raw []byte) (any, error) {
	var doc struct {
		Snapshots []SnapshotInfo       `json:"snapshots"`
		Indices   map[string]IndexInfo `json:"indices"`
	}
	err := json.Unmarshal(raw, &doc)
	return &doc, err
}

// indexNCost takes any bytes without a panic, and ParseIndexN of them
// fails or keeps to its bounds.
func FuzzIndexNCost(f *testing.F) {
	f.Add([]byte(`{"snapshots":[{"name":"s","uuid":"U"}],"indices":{"logs":{"id":"I","snapshots":["U"],"shard_generations":[null,"g"]}}}`))
	f.Add([]byte(`{"a\"]":[[["\u00e9\`))
	f.Add([]byte(`]]}}[[{{`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if _, err := indexNCost(raw, MaxIndexNBuilt); err != nil {
			return
		}
		r, err := ParseIndexN(raw, 1)
		if err == nil && (len(r.Snapshots) > MaxSnapshots || len(r.Indices) > MaxIndices) {
			t.Fatalf("%d snapshots and %d indices", len(r.Snapshots), len(r.Indices))
		}
	})
}
