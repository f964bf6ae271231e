package layout

import (
	"strings"
	"testing"
)

// The vectors of OpenSearch's RemoteStoreEnumsTests (reference notes
// §1.2): this base, index UUID and shard.
const (
	vecBase  = "xjsdhj/ddjsha/yudy7sd/32hdhua7/89jdij"
	vecUUID  = "k2ijhe877d7yuhx7"
	vecShard = 10
)

func TestPathHash(t *testing.T) {
	tests := []struct {
		kind      string
		base64    string
		composite string
	}{
		{"data", "AUBRfCIuWdk", "A01010000000101"},
		{"metadata", "erwR-G735Uw", "e10101111000001"},
		{"lock_files", "KeYDIk0mJXI", "K01111001100000"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			if got := PathHash(FNV1aBase64, vecUUID, vecShard, "segments", tt.kind); got != tt.base64 {
				t.Errorf("base64 = %q, want %q", got, tt.base64)
			}
			if got := PathHash(FNV1aComposite1, vecUUID, vecShard, "segments", tt.kind); got != tt.composite {
				t.Errorf("composite = %q, want %q", got, tt.composite)
			}
		})
	}
}

func TestShardPath(t *testing.T) {
	const tail = vecUUID + "/10/segments/data"
	tests := []struct {
		name string
		pt   PathType
		alg  HashAlgorithm
		base string
		want string
	}{
		{"fixed", Fixed, FNV1aComposite1, vecBase, vecBase + "/" + tail},
		{"fixed, hash ignored", Fixed, FNV1aBase64, vecBase, vecBase + "/" + tail},
		{"fixed, no base", Fixed, FNV1aComposite1, "", tail},
		{"fixed, slashes around the base", Fixed, FNV1aComposite1, "/" + vecBase + "/", vecBase + "/" + tail},
		{"hashed prefix", HashedPrefix, FNV1aComposite1, vecBase, "A01010000000101/" + vecBase + "/" + tail},
		{"hashed prefix base64", HashedPrefix, FNV1aBase64, vecBase, "AUBRfCIuWdk/" + vecBase + "/" + tail},
		{"hashed prefix, no base", HashedPrefix, FNV1aComposite1, "", "A01010000000101/" + tail},
		{"hashed infix", HashedInfix, FNV1aComposite1, vecBase, vecBase + "/A01010000000101/" + tail},
		{"hashed infix base64", HashedInfix, FNV1aBase64, vecBase, vecBase + "/AUBRfCIuWdk/" + tail},
		{"hashed infix, no base", HashedInfix, FNV1aComposite1, "", "A01010000000101/" + tail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShardPath(tt.pt, tt.alg, tt.base, vecUUID, vecShard, "segments", "data"); got != tt.want {
				t.Errorf("ShardPath = %q, want %q", got, tt.want)
			}
		})
	}
	// Each kind has its own hash, lock files and translog included.
	for _, ck := range [][2]string{{"segments", "metadata"}, {"segments", "lock_files"}, {"translog", "data"}, {"translog", "metadata"}} {
		got := ShardPath(HashedPrefix, FNV1aComposite1, vecBase, vecUUID, vecShard, ck[0], ck[1])
		want := PathHash(FNV1aComposite1, vecUUID, vecShard, ck[0], ck[1]) + "/" + vecBase + "/" + vecUUID + "/10/" + ck[0] + "/" + ck[1]
		if got != want {
			t.Errorf("%s/%s: %q, want %q", ck[0], ck[1], got, want)
		}
	}
}

// A snapshot shard's directory: the hash is FNV1aComposite1 of the
// decimal shard number then the index id (BlobStoreRepository.shardPath
// builds SnapshotShardPathInput.hashPath as shardId, indexUUID). No test
// of OpenSearch's states a vector; these are computed from that
// definition; the hash is hashString, which PathHash uses and
// TestPathHash checks against OpenSearch's vectors.
func TestSnapshotShardPath(t *testing.T) {
	const id = "k2ijhe877d7yuhx7"
	for _, c := range []struct {
		pt    PathType
		base  string
		shard int
		want  string
	}{
		{Fixed, "xjsdhj/ddjsha", 10, "xjsdhj/ddjsha/indices/" + id + "/10"},
		{Fixed, "", 0, "indices/" + id + "/0"},
		{HashedPrefix, "xjsdhj/ddjsha", 10, "F11001011111111/xjsdhj/ddjsha/indices/" + id + "/10"},
		{HashedPrefix, "xjsdhj/ddjsha", 0, "-10100010111110/xjsdhj/ddjsha/indices/" + id + "/0"},
		{HashedPrefix, "", 10, "F11001011111111/indices/" + id + "/10"},
		{HashedInfix, "/xjsdhj/ddjsha/", 10, "xjsdhj/ddjsha/F11001011111111/indices/" + id + "/10"},
	} {
		if got := SnapshotShardPath(c.pt, c.base, id, c.shard); got != c.want {
			t.Errorf("SnapshotShardPath(%v, %q, %d) = %q, want %q", c.pt, c.base, c.shard, got, c.want)
		}
	}
}

func TestParsePathType(t *testing.T) {
	tests := []struct {
		in   string
		want PathType
		ok   bool
	}{
		{"fixed", Fixed, true},
		{"FIXED", Fixed, true},
		{"hashed_prefix", HashedPrefix, true},
		{"HASHED_PREFIX", HashedPrefix, true},
		{"Hashed_Infix", HashedInfix, true},
		{"hashed-prefix", 0, false},
		{"", 0, false},
		{"fıxed", 0, false}, // dotless i: Java's toUpperCase folds it, no writer writes it
	}
	for _, tt := range tests {
		got, err := ParsePathType(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParsePathType(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if tt.ok && got.String() != strings.ToLower(tt.in) {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), strings.ToLower(tt.in))
		}
	}
	if s := PathType(7).String(); s != "PathType(7)" {
		t.Errorf("PathType(7).String() = %q", s)
	}
}

func TestParseHashAlgorithm(t *testing.T) {
	tests := []struct {
		in   string
		want HashAlgorithm
		ok   bool
	}{
		{"fnv_1a_base64", FNV1aBase64, true},
		{"FNV_1A_BASE64", FNV1aBase64, true},
		{"fnv_1a_composite_1", FNV1aComposite1, true},
		{"FNV_1A_COMPOSITE_1", FNV1aComposite1, true},
		{"fnv1a", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseHashAlgorithm(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseHashAlgorithm(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if tt.ok && got.String() != strings.ToLower(tt.in) {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}
