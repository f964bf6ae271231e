package layout

import (
	"reflect"
	"strings"
	"testing"
)

// sampleIndexPath is a file as RemoteIndexPath.toXContent and
// ConfigBlobStoreFormat write it for a 2-shard HASHED_PREFIX index whose
// segments and translog share a repository: the version as a string,
// enum names in upper case, every path with a trailing "/", the
// categories in HashMap order. (The hashes were computed with PathHash,
// whose own vectors come from OpenSearch's tests.)
const sampleIndexPath = `{
  "version": "1",
  "index_uuid": "k2ijhe877d7yuhx7",
  "shard_count": 2,
  "path_type": "HASHED_PREFIX",
  "path_hash_algorithm": "FNV_1A_COMPOSITE_1",
  "path_creation_map": {
    "translog": ["data", "metadata"],
    "segments": ["data", "metadata", "lock_files"]
  },
  "paths": [
    "d01100001001000/xjsdhj/ddjsha/k2ijhe877d7yuhx7/0/translog/data/",
    "401110010010010/xjsdhj/ddjsha/k2ijhe877d7yuhx7/1/translog/data/",
    "f11111000101000/xjsdhj/ddjsha/k2ijhe877d7yuhx7/0/translog/metadata/",
    "801110101011011/xjsdhj/ddjsha/k2ijhe877d7yuhx7/1/translog/metadata/",
    "U01011111001001/xjsdhj/ddjsha/k2ijhe877d7yuhx7/0/segments/data/",
    "n11101010000011/xjsdhj/ddjsha/k2ijhe877d7yuhx7/1/segments/data/",
    "n10000011101111/xjsdhj/ddjsha/k2ijhe877d7yuhx7/0/segments/metadata/",
    "111010010011001/xjsdhj/ddjsha/k2ijhe877d7yuhx7/1/segments/metadata/",
    "c00100010101010/xjsdhj/ddjsha/k2ijhe877d7yuhx7/0/segments/lock_files/",
    "H00010100000101/xjsdhj/ddjsha/k2ijhe877d7yuhx7/1/segments/lock_files/"
  ]
}`

func TestParseIndexPath(t *testing.T) {
	ip, err := ParseIndexPath([]byte(sampleIndexPath))
	if err != nil {
		t.Fatal(err)
	}
	want := &IndexPath{
		Version: 1, IndexUUID: "k2ijhe877d7yuhx7", ShardCount: 2,
		PathType: HashedPrefix, HashAlgorithm: FNV1aComposite1, HasHashAlgorithm: true,
		Categories: map[string][]string{"translog": {"data", "metadata"}, "segments": {"data", "metadata", "lock_files"}},
		Paths:      ip.Paths,
	}
	if !reflect.DeepEqual(ip, want) || len(ip.Paths) != 10 {
		t.Fatalf("ParseIndexPath = %+v\nwant %+v", ip, want)
	}
	base, err := ip.Base()
	if err != nil || base != "xjsdhj/ddjsha" {
		t.Fatalf("Base = %q, %v", base, err)
	}
	for shard := range 2 {
		p := ShardPath(ip.PathType, ip.HashAlgorithm, base, ip.IndexUUID, shard, "segments", "metadata")
		if !strings.Contains(sampleIndexPath, `"`+p+`/"`) {
			t.Errorf("shard %d's metadata path %s is not in the file", shard, p)
		}
	}
}

func TestIndexPathBase(t *testing.T) {
	file := func(pt, alg string, base string, cats map[string][]string, shards int) string {
		ptype, _ := ParsePathType(pt)
		a, _ := ParseHashAlgorithm(alg)
		var paths []string
		for c, kinds := range cats {
			for _, k := range kinds {
				for s := range shards {
					paths = append(paths, `"`+ShardPath(ptype, a, base, "u1", s, c, k)+`/"`)
				}
			}
		}
		algField := ""
		if alg != "" {
			algField = `"path_hash_algorithm": "` + alg + `",`
		}
		return `{"version": 1, "index_uuid": "u1", "shard_count": 3, "path_type": "` + pt + `", ` + algField +
			`"path_creation_map": {"segments": ["data", "metadata", "lock_files"]}, "paths": [` + strings.Join(paths, ",") + `]}`
	}
	segs := map[string][]string{"segments": {"data", "metadata", "lock_files"}}
	for _, tt := range []struct{ pt, alg, base string }{
		{"FIXED", "", "repo/base"}, {"FIXED", "", ""},
		{"HASHED_PREFIX", "FNV_1A_BASE64", "repo/base"}, {"HASHED_PREFIX", "FNV_1A_COMPOSITE_1", ""},
		{"HASHED_INFIX", "FNV_1A_COMPOSITE_1", "repo/base"}, {"HASHED_INFIX", "FNV_1A_BASE64", ""},
	} {
		ip, err := ParseIndexPath([]byte(file(tt.pt, tt.alg, tt.base, segs, 3)))
		if err != nil {
			t.Fatalf("%s %q: %v", tt.pt, tt.base, err)
		}
		if base, err := ip.Base(); err != nil || base != tt.base {
			t.Errorf("%s %q: Base = %q, %v", tt.pt, tt.base, base, err)
		}
		short, err := ParseIndexPath([]byte(file(tt.pt, tt.alg, tt.base, segs, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := short.Base(); err == nil {
			t.Errorf("%s %q: a file missing shard 2's paths passed", tt.pt, tt.base)
		}
	}
}

func TestParseIndexPathBad(t *testing.T) {
	good := map[string]string{
		"version": `"1"`, "index_uuid": `"u1"`, "shard_count": `1`, "path_type": `"HASHED_INFIX"`,
		"path_hash_algorithm": `"FNV_1A_BASE64"`, "path_creation_map": `{"segments": ["data"]}`, "paths": `[]`,
	}
	build := func(edit map[string]string) string {
		var fields []string
		for k, v := range good {
			if e, ok := edit[k]; ok {
				v = e
			}
			if v != "" {
				fields = append(fields, `"`+k+`": `+v)
			}
		}
		return "{" + strings.Join(fields, ",") + "}"
	}
	if _, err := ParseIndexPath([]byte(build(map[string]string{"unknown_later_field": `{"a": 1}`}))); err != nil {
		t.Fatalf("the good file: %v", err)
	}
	tests := map[string]string{
		"not JSON":              `{"version": `,
		"two objects":           build(nil) + build(nil),
		"no version":            build(map[string]string{"version": ""}),
		"version not a number":  build(map[string]string{"version": `"one"`}),
		"no uuid":               build(map[string]string{"index_uuid": ""}),
		"uuid with a slash":     build(map[string]string{"index_uuid": `"a/b"`}),
		"no shards":             build(map[string]string{"shard_count": `0`}),
		"a trillion shards":     build(map[string]string{"shard_count": `1000000000000`}),
		"unknown path type":     build(map[string]string{"path_type": `"HASHED"`}),
		"hashed without hash":   build(map[string]string{"path_hash_algorithm": ""}),
		"fixed with hash":       build(map[string]string{"path_type": `"FIXED"`}),
		"unknown hash":          build(map[string]string{"path_hash_algorithm": `"SHA1"`}),
		"empty map":             build(map[string]string{"path_creation_map": `{}`}),
		"unknown category":      build(map[string]string{"path_creation_map": `{"snapshots": ["data"]}`}),
		"translog lock files":   build(map[string]string{"path_creation_map": `{"translog": ["lock_files"]}`}),
		"category without kind": build(map[string]string{"path_creation_map": `{"segments": []}`}),
	}
	for name, in := range tests {
		if _, err := ParseIndexPath([]byte(in)); err == nil {
			t.Errorf("%s: accepted %s", name, in)
		}
	}
}

// An index path file above MaxIndexPathSize is refused before it is
// decoded: a megabytes-long list of tiny strings would otherwise build
// many times its size (issue 42).
func TestParseIndexPathSizeBound(t *testing.T) {
	big := []byte(`{"index_uuid":"u","shard_count":1,"paths":[` + strings.Repeat(`"",`, MaxIndexPathSize/3) + `""]}`)
	if _, err := ParseIndexPath(big); err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Errorf("a %d-byte index path file: %v, want it refused by its size", len(big), err)
	}
}
