package main

import (
	"log/slog"
	"time"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/view"
)

// layoutFlags say how a source's objects become files (view.Spec): as
// they are (plain), or as the shards of an OpenSearch remote segment
// store or of a snapshot repository. mount, restore and verify share
// them.
type layoutFlags struct {
	Layout        string `name:"layout" default:"plain" enum:"plain,opensearch,snapshot" help:"How SOURCE holds the files: plain (every object is a file under its key; what segfs push writes), opensearch (one shard of an OpenSearch remote segment store: s3://bucket[/base_path] is the repository, and --index-uuid and --shard pick the shard) or snapshot (one shard of an Elasticsearch or OpenSearch snapshot repository: --snapshot, --index and --shard pick it)."`
	Snapshot      string `name:"snapshot" default:"newest" placeholder:"NAME" help:"With --layout snapshot: the snapshot's name, or newest (the newest successful snapshot that holds --index)."`
	Index         string `name:"index" placeholder:"NAME" help:"With --layout snapshot: the index's name."`
	IndexUUID     string `name:"index-uuid" placeholder:"UUID" help:"With --layout opensearch: the index's UUID."`
	Shard         int    `name:"shard" default:"-1" placeholder:"N" help:"With --layout opensearch: the shard number."`
	PathType      string `name:"path-type" placeholder:"TYPE" help:"With --layout opensearch: fixed, hashed_prefix or hashed_infix. Default: what the index's remote-index-path file says, else fixed."`
	HashAlgorithm string `name:"hash-algorithm" placeholder:"ALG" help:"With --layout opensearch and a hashed path type: fnv_1a_composite_1 or fnv_1a_base64. Default: what the index's remote-index-path file says, else fnv_1a_composite_1."`
	Metadata      string `name:"metadata" default:"newest" placeholder:"NAME" help:"With --layout opensearch: newest (the shard's current state), or the name of one metadata file under segments/metadata/ to show that earlier refresh or commit."`
}

// spec is the view the flags name of SOURCE src.
func (f layoutFlags) spec(src string) view.Spec {
	return view.Spec{Source: src, Layout: f.Layout, Snapshot: f.Snapshot, Index: f.Index, IndexUUID: f.IndexUUID,
		Shard: f.Shard, PathType: f.PathType, HashAlgorithm: f.HashAlgorithm, Metadata: f.Metadata}
}

// storeFlags reach an S3-compatible service; every command that opens a
// store takes them.
type storeFlags struct {
	Endpoint      string `help:"Base URL of an S3-compatible service (e.g. http://127.0.0.1:7070). Default: AWS S3."`
	Region        string `help:"S3 region. Default: from the AWS config chain (AWS_REGION, ~/.aws/config), else asked of the service (an S3-compatible service that names none is taken to be in us-east-1)."`
	PathStyle     bool   `name:"path-style" help:"Use path-style S3 addressing (bucket in the path), as most S3-compatible services need."`
	Profile       string `name:"profile" placeholder:"NAME" help:"AWS shared config profile (of ~/.aws/config and ~/.aws/credentials) whose credentials and region to use; it must exist. Default: AWS_PROFILE, else the default profile."`
	NoSignRequest bool   `name:"no-sign-request" help:"Send unsigned requests, for a public bucket: no AWS credentials are looked for."`
}

// config is the fetcher configuration the flags give, with a command's
// own idle timeout (0: the fetcher's default), connection bound and
// logger. Every command builds its stores' Config here, so that a new
// flag reaches them all.
func (f storeFlags) config(idle time.Duration, maxConns int, log *slog.Logger) fetcher.Config {
	return fetcher.Config{
		Region:      f.Region,
		Endpoint:    f.Endpoint,
		PathStyle:   f.PathStyle,
		Profile:     f.Profile,
		Anonymous:   f.NoSignRequest,
		IdleTimeout: idle,
		MaxConns:    maxConns,
		Logger:      log,
	}
}
