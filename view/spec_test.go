package view

import (
	"strings"
	"testing"

	"github.com/segfs/segfs/layout"
)

// The layout flags (a Spec) go together or fail with a line saying why.
func TestSpecCheck(t *testing.T) {
	plain := Spec{Layout: "plain", Shard: -1, Metadata: "newest"}
	os := Spec{Layout: "opensearch", IndexUUID: "u", Shard: 0, Metadata: "newest"}
	for _, tc := range []struct {
		name string
		f    Spec
		err  string // "" for none
	}{
		{"plain", plain, ""},
		{"plain with a shard", func() Spec { f := plain; f.Shard = 2; return f }(), "need --layout opensearch"},
		{"plain with a path type", func() Spec { f := plain; f.PathType = "fixed"; return f }(), "need --layout opensearch"},
		{"opensearch", os, ""},
		{"opensearch without a uuid", func() Spec { f := os; f.IndexUUID = ""; return f }(), "--index-uuid"},
		{"one index of a repository", func() Spec { f := os; f.Shard = -1; return f }(), ""},
		{"a whole repository", func() Spec { f := os; f.Shard, f.IndexUUID = -1, ""; return f }(), ""},
		{"a repository with a path type", func() Spec { f := os; f.Shard, f.PathType = -1, "fixed"; return f }(), "--path-type"},
		{"a repository at a named metadata file", func() Spec { f := os; f.Shard, f.Metadata = -1, "metadata__x"; return f }(), "--metadata"},
		{"bad path type", func() Spec { f := os; f.PathType = "hashed"; return f }(), "--path-type"},
		{"bad hash", func() Spec { f := os; f.HashAlgorithm = "md5"; return f }(), "--hash-algorithm"},
		{"snapshot", Spec{Layout: "snapshot", Index: "logs", Shard: 0, Metadata: "newest", Snapshot: "newest"}, ""},
		{"snapshot without an index", Spec{Layout: "snapshot", Shard: 0, Metadata: "newest"}, "needs --index"},
		{"snapshot without a shard", Spec{Layout: "snapshot", Index: "logs", Shard: -1, Metadata: "newest"}, "--shard"},
		{"snapshot with an index uuid", Spec{Layout: "snapshot", Index: "logs", Shard: 0, IndexUUID: "u", Metadata: "newest"}, "--layout opensearch's"},
		{"plain with an index", func() Spec { f := plain; f.Index = "logs"; return f }(), "need --layout snapshot"},
		{"opensearch with a snapshot", func() Spec { f := os; f.Snapshot = "s1"; return f }(), "need --layout snapshot"},
	} {
		err := tc.f.Check()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error about %s", tc.name, err, tc.err)
		}
	}
	o, err := Spec{Layout: "opensearch", IndexUUID: "u", Shard: 1, PathType: "HASHED_INFIX", HashAlgorithm: "fnv_1a_base64"}.opensearch()
	if err != nil || o.PathType != layout.HashedInfix || !o.PathTypeSet || o.HashAlgorithm != layout.FNV1aBase64 || !o.HashSet {
		t.Errorf("opensearch() = %+v, %v", o, err)
	}
	if o, _ := os.opensearch(); o.PathTypeSet || o.HashSet || o.PathType != layout.Fixed || o.HashAlgorithm != layout.FNV1aComposite1 {
		t.Errorf("defaults: %+v", o)
	}
}
