package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/segfs/segfs/internal/testmem"
	"slices"
	"strings"
	"testing"

	"github.com/segfs/segfs/smile"
)

// shardBody returns the Smile body of a shard snapshot whose files are
// files, with shared values on (Elasticsearch's writer leaves them off;
// a hostile one need not).
func shardBody(files []any) []byte {
	root := &smile.Object{Members: []smile.Member{{Name: "name", Value: "s"}, {Name: "index_version", Value: int64(1)}, {Name: "files", Value: files}}}
	return smile.Encode(root, smile.EncodeOptions{SharedNames: true, SharedValues: true, RawBinary: true})
}

// Issue 42: snap-*.dat blobs small on the wire that decode to what
// would take gigabytes are refused, naming the budget, and allocate no
// more than MaxDecoded on the way (what the daemon counts for them).
func TestShardSnapshotBudget(t *testing.T) {
	// One-byte shared value references: 60 MB of body, 270 KB compressed
	// (60 KB at DEFLATE's best ratio).
	refs := shardBody([]any{"v"})
	refs = append(append(refs[:len(refs)-3:len(refs)-3], bytes.Repeat([]byte{0x01}, 60<<20)...), 0xF9, 0xFB)
	// 400,000 small files, each valid: the second file's bytes (its
	// names back-references to the first's) repeated.
	file := &smile.Object{Members: []smile.Member{{Name: "name", Value: "__a"}, {Name: "physical_name", Value: "f"}, {Name: "length", Value: int64(0)}}}
	one, two := shardBody([]any{file}), shardBody([]any{file, file})
	second := two[len(one)-2 : len(two)-2] // both end with the array's and the object's ends
	many := slices.Concat(one[:len(one)-2], bytes.Repeat(second, 400_000), one[len(one)-2:])
	// Nulls: every slot of the files array charged, nothing else.
	nulls := shardBody([]any{nil})
	nulls = append(append(nulls[:len(nulls)-3:len(nulls)-3], bytes.Repeat([]byte{0x21}, 4<<20-1000)...), 0xF9, 0xFB)
	for _, c := range []struct {
		name, want string
		body       []byte
	}{
		{"60 MB of shared value references", fmt.Sprintf("more than %d bytes, the most a decode may build", MaxBuilt), refs},
		{"400,000 small files", fmt.Sprintf("more than %d bytes, the most a decode may build", MaxBuilt), many},
		// 4 million nulls (18 KB compressed): a set of names sized by the
		// files array would allocate 280 MB.
		{"4 million nulls", "file 0 is <nil>, not an object", nulls},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := EncodeBlob(ShardSnapshotCodec, c.body, true)
			var err error
			n := testmem.Allocated(func() { _, err = ParseShardSnapshot(raw) })
			t.Logf("%d bytes compressed, %d of body: %d MiB allocated: %v", len(raw), len(c.body), n>>20, err)
			if !errors.Is(err, ErrBlob) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want an error saying %q", err, c.want)
			}
			if n > MaxDecoded {
				t.Errorf("%d bytes allocated, more than MaxDecoded (%d)", n, MaxDecoded)
			}
		})
	}
}

// A shard snapshot of 20,000 files, more than a real shard has, decodes
// within the budget.
func TestShardSnapshotBudgetRealistic(t *testing.T) {
	s := &ShardSnapshot{Name: "snap-1", IndexVersion: 7}
	for i := range 20_000 {
		s.Files = append(s.Files, FileInfo{Blob: fmt.Sprintf("__%022d", i), Name: fmt.Sprintf("_%x.%s", i/10, []string{"cfs", "cfe", "fdt", "fdx", "tim", "tip", "doc", "pos", "dvd", "dvm"}[i%10]),
			Length: int64(i) << 20, Checksum: "1x2y3z", PartSize: 1 << 30, WrittenBy: "9.10.0"})
	}
	raw := EncodeShardSnapshot(s, true)
	var err error
	n := testmem.Allocated(func() { _, err = ParseShardSnapshot(raw) })
	t.Logf("%d bytes compressed: %d MiB allocated", len(raw), n>>20)
	if err != nil {
		t.Fatal(err)
	}
}
