package main

import (
	"strings"
	"testing"

	"github.com/segfs/segfs/layout"
)

// The layout flags go together or fail with a line saying why.
func TestLayoutFlags(t *testing.T) {
	plain := layoutFlags{Layout: "plain", Shard: -1, Metadata: "newest"}
	os := layoutFlags{Layout: "opensearch", IndexUUID: "u", Shard: 0, Metadata: "newest"}
	for _, tc := range []struct {
		name string
		f    layoutFlags
		err  string // "" for none
	}{
		{"plain", plain, ""},
		{"plain with a shard", func() layoutFlags { f := plain; f.Shard = 2; return f }(), "need --layout opensearch"},
		{"plain with a path type", func() layoutFlags { f := plain; f.PathType = "fixed"; return f }(), "need --layout opensearch"},
		{"opensearch", os, ""},
		{"opensearch without a uuid", func() layoutFlags { f := os; f.IndexUUID = ""; return f }(), "--index-uuid"},
		{"opensearch without a shard", func() layoutFlags { f := os; f.Shard = -1; return f }(), "--shard"},
		{"bad path type", func() layoutFlags { f := os; f.PathType = "hashed"; return f }(), "--path-type"},
		{"bad hash", func() layoutFlags { f := os; f.HashAlgorithm = "md5"; return f }(), "--hash-algorithm"},
	} {
		err := tc.f.check()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error about %s", tc.name, err, tc.err)
		}
	}
	o, err := layoutFlags{Layout: "opensearch", IndexUUID: "u", Shard: 1, PathType: "HASHED_INFIX", HashAlgorithm: "fnv_1a_base64"}.opensearch()
	if err != nil || o.PathType != layout.HashedInfix || !o.PathTypeSet || o.HashAlgorithm != layout.FNV1aBase64 || !o.HashSet {
		t.Errorf("opensearch() = %+v, %v", o, err)
	}
	if o, _ := os.opensearch(); o.PathTypeSet || o.HashSet || o.PathType != layout.Fixed || o.HashAlgorithm != layout.FNV1aComposite1 {
		t.Errorf("defaults: %+v", o)
	}
}
