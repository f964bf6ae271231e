package hostile

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path"

	"github.com/segfs/segfs/snapshot"
)

// ManyPartsShard returns a shard's snap-<uuid>.dat, compressed as a
// repository with compress on writes it, of the snapshot name with
// files files of length bytes each in parts of one byte, blobs of none
// of which exist. Every file is valid alone (at most snapshot.MaxParts
// parts); 100,000 files of 1 MiB make about 500 KB that claim 10^11
// parts (issue 42).
func ManyPartsShard(name string, files int, length int64) []byte {
	s := &snapshot.ShardSnapshot{Name: name, IndexVersion: 1}
	for i := range files {
		s.Files = append(s.Files, snapshot.FileInfo{
			Blob: fmt.Sprintf("__p%07d", i), Name: fmt.Sprintf("_%d.fdt", i),
			Length: length, Checksum: "1", PartSize: 1, WrittenBy: "8.7.0",
		})
	}
	return snapshot.EncodeShardSnapshot(s, true)
}

// SnapshotRoot returns the objects of a repository's root below base:
// index.latest naming generation 1 and index-1 listing snapshots and
// indices (shard generations as given, null entries included).
func SnapshotRoot(base string, snapshots []snapshot.SnapshotInfo, indices map[string]snapshot.IndexInfo) map[string][]byte {
	raw, err := json.Marshal(map[string]any{"snapshots": snapshots, "indices": indices, "min_version": "7.9.0"})
	if err != nil {
		panic("hostile: " + err.Error()) // plain structs always marshal
	}
	return map[string][]byte{
		path.Join(base, "index.latest"):     binary.BigEndian.AppendUint64(nil, 1),
		path.Join(base, snapshot.IndexN(1)): raw,
	}
}

// ManyShardsRoot returns the root (SnapshotRoot) of snaps successful
// snapshots s0000, s0001, ... each holding index "big", whose index-1
// gives shards shard generations, every one null: the shard count
// costs 5 bytes a shard, so 2,000 snapshots of 65,536 shards are about
// 467 KB that claim 131 million shard snapshots (issue 42). No shard's
// metadata exists.
func ManyShardsRoot(base string, snaps, shards int) map[string][]byte {
	infos := make([]snapshot.SnapshotInfo, snaps)
	uuids := make([]string, snaps)
	for i := range infos {
		uuids[i] = fmt.Sprintf("uuid-%017d", i)
		infos[i] = snapshot.SnapshotInfo{Name: fmt.Sprintf("s%04d", i), UUID: uuids[i], State: snapshot.StateSuccess, Version: "7.10.2"}
	}
	return SnapshotRoot(base, infos, map[string]snapshot.IndexInfo{
		"big": {ID: "bigIndexId", Snapshots: uuids, ShardGenerations: make([]*string, shards)},
	})
}
