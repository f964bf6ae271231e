package view

import (
	"fmt"
	"log/slog"
	"math"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
	"github.com/segfs/segfs/snapshot"
)

// Spec names what a command shows of SOURCE, as the layout flags of
// segfs mount, restore and verify say it: plain objects, one shard of an
// OpenSearch remote segment store, a whole remote-store repository (or
// one index of it), one shard of a snapshot, or a whole snapshot
// repository. The zero values of Shard, Snapshot and Metadata are not
// the flags' defaults: a Spec built by hand sets Shard -1 for "none".
type Spec struct {
	Source        string // s3://bucket[/prefix] or file:///dir
	Layout        string // plain, opensearch or snapshot
	Snapshot      string // --layout snapshot: a name, or newest
	Index         string // --layout snapshot: the index's name
	IndexUUID     string // --layout opensearch
	Shard         int    // -1 for none: a repository
	PathType      string // --layout opensearch, one shard: "" for the index path file's
	HashAlgorithm string
	Metadata      string // --layout opensearch, one shard: newest or a metadata file's name
}

// shape is which of the five forms a Spec names. Only this package
// tells them apart: the commands ask a Spec or a View what they need.
type shape int

const (
	plain         shape = iota
	shard               // one OpenSearch shard
	repository          // an OpenSearch repository, or one index of it
	snapshotShard       // one shard of a snapshot
	snapshotRepo        // a whole snapshot repository
)

func (s Spec) shape() shape {
	switch {
	case s.Layout == "opensearch" && s.Shard < 0:
		return repository
	case s.Layout == "opensearch":
		return shard
	case s.Layout == "snapshot" && s.Index == "" && s.Shard < 0:
		return snapshotRepo
	case s.Layout == "snapshot":
		return snapshotShard
	}
	return plain
}

func (s Spec) newest() bool { return s.Metadata == "" || s.Metadata == "newest" }

// Check refuses flags that do not go together: none is silently
// ignored. Metadata is "newest" unless --layout opensearch names a file
// (the flag's default; "" stands for newest in a shard's Spec only).
func (s Spec) Check() error {
	if s.Layout == "plain" && (s.IndexUUID != "" || s.Shard >= 0 || s.PathType != "" || s.HashAlgorithm != "" || s.Metadata != "newest") {
		return fmt.Errorf("--index-uuid, --shard, --path-type, --hash-algorithm and --metadata need --layout opensearch")
	}
	if s.Layout != "snapshot" && (s.Index != "" || s.Snapshot != "newest" && s.Snapshot != "") {
		return fmt.Errorf("--index and --snapshot need --layout snapshot")
	}
	switch s.shape() {
	case snapshotRepo:
		if s.IndexUUID != "" || s.PathType != "" || s.HashAlgorithm != "" || s.Metadata != "newest" {
			return fmt.Errorf("--index-uuid, --path-type, --hash-algorithm and --metadata are --layout opensearch's")
		}
	case snapshotShard:
		switch {
		case s.IndexUUID != "" || s.PathType != "" || s.HashAlgorithm != "" || s.Metadata != "newest":
			return fmt.Errorf("--index-uuid, --path-type, --hash-algorithm and --metadata are --layout opensearch's; --layout snapshot takes --snapshot, --index and --shard")
		case s.Index == "":
			return fmt.Errorf("--layout snapshot needs --index")
		case s.Shard < 0:
			return fmt.Errorf("--layout snapshot needs --shard (0 or more)")
		}
	case repository:
		switch {
		case s.PathType != "" || s.HashAlgorithm != "":
			return fmt.Errorf("--path-type and --hash-algorithm name one shard's paths; a repository mount takes each index's from its remote-index-path file (the fixed type without one)")
		case !s.newest():
			return fmt.Errorf("--metadata names one shard's metadata file; a repository mount shows each shard's newest")
		}
	case shard:
		_, err := s.opensearch()
		return err
	}
	return nil
}

// opensearch returns the one shard the Spec names, or an error for flags
// that do not go together.
func (s Spec) opensearch() (OpenSearch, error) {
	o := OpenSearch{IndexUUID: s.IndexUUID, Shard: s.Shard, Metadata: s.Metadata,
		PathType: layout.Fixed, HashAlgorithm: layout.FNV1aComposite1}
	switch {
	case s.IndexUUID == "":
		return o, fmt.Errorf("--layout opensearch needs --index-uuid")
	case s.Shard < 0:
		return o, fmt.Errorf("--layout opensearch needs --shard (0 or more)")
	}
	if s.PathType != "" {
		pt, err := layout.ParsePathType(s.PathType)
		if err != nil {
			return o, fmt.Errorf("--path-type: %w", err)
		}
		o.PathType, o.PathTypeSet = pt, true
	}
	if s.HashAlgorithm != "" {
		alg, err := layout.ParseHashAlgorithm(s.HashAlgorithm)
		if err != nil {
			return o, fmt.Errorf("--hash-algorithm: %w", err)
		}
		o.HashAlgorithm, o.HashSet = alg, true
	}
	return o, nil
}

// Tree reports whether the view is a tree of directories resolved as
// they are used (a repository's: View.Depth above 0) rather than one
// directory of files listed at Open.
func (s Spec) Tree() bool { return s.shape() == repository || s.shape() == snapshotRepo }

// Fixed returns why a view never changes, or nil when it follows its
// store (--refresh and SIGHUP list it again). A snapshot shard is fixed
// too, but says so only at a SIGHUP: --refresh is taken and does
// nothing, as it always has.
func (s Spec) Fixed() error {
	switch {
	case s.shape() == snapshotRepo:
		return fmt.Errorf("a snapshot never changes; a snapshot repository mount finds a snapshot taken after it at its lookup")
	case s.shape() == shard && !s.newest():
		return fmt.Errorf("a mount of a named metadata file (--metadata %s) shows that commit for good; --metadata newest follows the shard", s.Metadata)
	}
	return nil
}

// ResolveMemory is what reading and decoding metadata may hold while a
// mount serves: for a remote-store repository ResolveSlots shard
// resolutions (or refreshes of a shard), each a metadata file at its
// worst; for a snapshot repository as many shard resolutions, its root
// index-N as held and one reading of a newer one; for one OpenSearch
// shard the one newer metadata file a refresh reads; 0 for another
// view, whose metadata is read at Open and never again.
func (s Spec) ResolveMemory() int64 {
	switch s.shape() {
	case snapshotRepo:
		return ResolveSlots*snapshot.MaxDecoded + snapshot.MaxIndexNBuilt + snapshot.MaxIndexNDecoded
	case repository:
		return ResolveSlots * layout.MaxMetadataDecoded
	case shard:
		return layout.MaxMetadataDecoded
	}
	return 0
}

// Identity names the files the Spec picks beyond its source, for a
// restore's mark: "" for plain objects.
func (s Spec) Identity() string {
	switch s.Layout {
	case "opensearch":
		return fmt.Sprintf(" layout=%s index-uuid=%s shard=%d", s.Layout, s.IndexUUID, s.Shard)
	case "snapshot":
		return fmt.Sprintf(" layout=%s snapshot=%s index=%s shard=%d", s.Layout, s.Snapshot, s.Index, s.Shard)
	}
	return ""
}

// Options say how a view reaches its store and what it may hold.
type Options struct {
	Store fetcher.Config
	// Parallel bounds the requests one listing or resolution makes at
	// once (the seek-table reads of plain seekable-zstd objects, the
	// HEADs of a refresh).
	Parallel int
	// MaxShards bounds the shards a tree shows at once; 0 is no bound.
	MaxShards int
	// Tolerate returns a shard whose store lacks files its metadata
	// names with them as Problems (verify); else such a shard is an
	// error (a mount never shows a partial shard).
	Tolerate bool
	Log      *slog.Logger
}

func (o Options) maxShards() int {
	if o.MaxShards <= 0 {
		return math.MaxInt
	}
	return o.MaxShards
}
