package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// index-N as clusters write it, and what a hostile one is refused for.
func TestParseIndexN(t *testing.T) {
	good := `{"snapshots":[{"name":"s1","uuid":"U1","state":1,"version":"7.10.2"},{"name":"s2","uuid":"U2","state":2}],
		"indices":{"logs":{"id":"I1","snapshots":["U1","U2"],"shard_generations":["g0",null],"shard_path_type":1}},"min_version":"7.9.0"}`
	r, err := ParseIndexN([]byte(good), 7)
	if err != nil {
		t.Fatal(err)
	}
	ix := r.Indices["logs"]
	if r.Generation != 7 || len(r.Snapshots) != 2 || ix.ID != "I1" || len(ix.ShardGenerations) != 2 || ix.ShardPathType != 1 {
		t.Errorf("parsed %+v", r)
	}
	if s, _, err := r.Pick("newest", "logs"); err != nil || s.Name != "s1" {
		t.Errorf("newest successful snapshot of logs: %+v, %v; want s1 (s2 failed)", s, err)
	}
	many := `[` + strings.Repeat(`null,`, MaxIndexShards) + `null]`
	for name, raw := range map[string]string{
		"an index id with a slash": `{"indices":{"logs":{"id":"../x"}}}`,
		"a snapshot uuid dot-dot":  `{"snapshots":[{"name":"s","uuid":".."}]}`,
		"an unknown path type":     `{"indices":{"logs":{"id":"I1","shard_path_type":7}}}`,
		"too many shards":          fmt.Sprintf(`{"indices":{"logs":{"id":"I1","shard_generations":%s}}}`, many),
		"not JSON":                 `{"indices":`,
	} {
		if _, err := ParseIndexN([]byte(raw), 1); !errors.Is(err, ErrBlob) {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
	if State(3) != "PARTIAL" || State(9) != "STATE_9" {
		t.Errorf("State names: %s, %s", State(3), State(9))
	}
}

// A name is one snapshot's or none: two snapshots of one name (no
// cluster writes them) are refused by name, never one chosen; a
// snapshot named "newest" is found by Named as itself.
func TestNamedIsOneSnapshot(t *testing.T) {
	r := &Repository{Generation: 3,
		Snapshots: []SnapshotInfo{{Name: "twice", UUID: "u1", State: StateSuccess}, {Name: "twice", UUID: "u2", State: StateSuccess},
			{Name: "newest", UUID: "u3", State: StateSuccess}, {Name: "last", UUID: "u4", State: StateSuccess}},
		Indices: map[string]IndexInfo{"logs": {ID: "i", Snapshots: []string{"u1", "u2", "u3", "u4"}}}}
	if s, ok := r.Named("twice"); ok {
		t.Errorf("Named(twice) = %s, want none of the two", s.UUID)
	}
	if _, _, err := r.Pick("twice", "logs"); err == nil || !strings.Contains(err.Error(), "more than one") {
		t.Errorf("Pick(twice): %v, want an error naming the duplicate", err)
	}
	if s, ok := r.Named("newest"); !ok || s.UUID != "u3" {
		t.Errorf("Named(newest) = %s, %v; want the snapshot of that name", s.UUID, ok)
	}
	if s, _, err := r.Pick("newest", "logs"); err != nil || s.UUID != "u4" {
		t.Errorf("Pick(newest) = %s, %v; want the newest snapshot (--snapshot newest)", s.UUID, err)
	}
}
