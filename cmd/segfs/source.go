package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/layout"
)

// layoutFlags say how a source's objects become files: as they are
// (plain), or as one shard of an OpenSearch remote segment store. The
// mount, verify and later commands share them.
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

// opensearch returns the shard the flags name, or an error for flags
// that do not go together.
func (f layoutFlags) opensearch() (layout.OpenSearch, error) {
	o := layout.OpenSearch{IndexUUID: f.IndexUUID, Shard: f.Shard, Metadata: f.Metadata,
		PathType: layout.Fixed, HashAlgorithm: layout.FNV1aComposite1}
	switch {
	case f.IndexUUID == "":
		return o, fmt.Errorf("--layout opensearch needs --index-uuid")
	case f.Shard < 0:
		return o, fmt.Errorf("--layout opensearch needs --shard (0 or more)")
	}
	if f.PathType != "" {
		pt, err := layout.ParsePathType(f.PathType)
		if err != nil {
			return o, fmt.Errorf("--path-type: %w", err)
		}
		o.PathType, o.PathTypeSet = pt, true
	}
	if f.HashAlgorithm != "" {
		alg, err := layout.ParseHashAlgorithm(f.HashAlgorithm)
		if err != nil {
			return o, fmt.Errorf("--hash-algorithm: %w", err)
		}
		o.HashAlgorithm, o.HashSet = alg, true
	}
	return o, nil
}

// check refuses the opensearch flags with the plain layout: they would
// be silently ignored.
func (f layoutFlags) check() error {
	if f.Layout == "plain" && (f.IndexUUID != "" || f.Shard >= 0 || f.PathType != "" || f.HashAlgorithm != "" || f.Metadata != "newest") {
		return fmt.Errorf("--index-uuid, --shard, --path-type, --hash-algorithm and --metadata need --layout opensearch")
	}
	if f.Layout != "snapshot" && (f.Index != "" || f.Snapshot != "newest" && f.Snapshot != "") {
		return fmt.Errorf("--index and --snapshot need --layout snapshot")
	}
	if f.snapshotRepository() {
		if f.IndexUUID != "" || f.PathType != "" || f.HashAlgorithm != "" || f.Metadata != "newest" {
			return fmt.Errorf("--index-uuid, --path-type, --hash-algorithm and --metadata are --layout opensearch's")
		}
		return nil // a whole snapshot repository (a mount)
	}
	if f.Layout == "snapshot" {
		switch {
		case f.IndexUUID != "" || f.PathType != "" || f.HashAlgorithm != "" || f.Metadata != "newest":
			return fmt.Errorf("--index-uuid, --path-type, --hash-algorithm and --metadata are --layout opensearch's; --layout snapshot takes --snapshot, --index and --shard")
		case f.Index == "":
			return fmt.Errorf("--layout snapshot needs --index")
		case f.Shard < 0:
			return fmt.Errorf("--layout snapshot needs --shard (0 or more)")
		}
		return nil
	}
	if f.repository() {
		return f.checkRepository() // no --shard: a whole repository, or with --index-uuid one index
	}
	if f.Layout == "opensearch" {
		_, err := f.opensearch()
		return err
	}
	return nil
}

// source is what a command serves: the store its files' bytes are read
// from and the files, in listing order.
type source struct {
	store   fetcher.Store
	entries []entry.Entry
	keys    int               // keys listed, for the memory bound
	shard   *layout.Shard     // the resolved shard; nil for the plain layout
	sums    map[string]uint64 // a snapshot's recorded checksums, by file name
	// problems are the layout's files its store does not hold as its
	// metadata says (with tolerate; else openSource fails).
	problems []layout.Problem
	// relist lists the source again for a refresh of the view (the
	// entries and the keys listed); nil when the view is fixed (a
	// shard mounted at a named --metadata).
	relist func(ctx context.Context, prev []entry.Entry) ([]entry.Entry, int, error)
}

// openSource opens SOURCE with the layout flags: lists it and returns the
// files it shows. parallel bounds the seek-table reads of a plain
// layout's seekable zstd objects. With tolerate, a shard whose store
// lacks files of its metadata is returned with its problems (verify);
// else it is an error (a mount never shows a partial shard).
func openSource(ctx context.Context, src string, f layoutFlags, cfg fetcher.Config, parallel int, tolerate bool, log *slog.Logger) (*source, error) {
	switch {
	case f.repository():
		return openRepositoryAll(ctx, src, f, cfg, tolerate, log)
	case f.Layout == "opensearch":
		return openShard(ctx, src, f, cfg, parallel, tolerate, log)
	case f.snapshotRepository():
		return nil, fmt.Errorf("--layout snapshot without --index and --shard mounts a whole repository; restore and verify take one shard (--index, --shard)")
	case f.Layout == "snapshot":
		return openSnapshot(ctx, src, f, cfg, tolerate, log)
	}
	store, err := fetcher.Open(ctx, src, cfg)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	objects, err := store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", store, err)
	}
	var total int64
	for _, o := range objects {
		total += o.Size
	}
	log.Info("listed", "source", store.String(), "objects", len(objects), "bytes", total, "took", time.Since(start).Round(time.Millisecond))
	entries, err := entry.FromObjects(ctx, store, objects, parallel, log)
	if err != nil {
		return nil, err
	}
	return &source{store: store, entries: entries, keys: len(objects), relist: plainLister(store, parallel, log)}, nil
}

// repository returns the opener of a repository's paths from SOURCE: for
// S3 the bucket is its root and the prefix its base path, a local
// directory is the root itself with no base path.
func repository(src string, cfg fetcher.Config) (open layout.Opener, root, base string, err error) {
	s, err := fetcher.ParseSource(src)
	if err != nil {
		return nil, "", "", err
	}
	root = "file://" + s.Dir
	if s.Scheme == "s3" {
		root, base = "s3://"+s.Bucket, s.Prefix
	}
	open = func(ctx context.Context, sub string) (fetcher.Store, error) {
		if sub == "" {
			return fetcher.Open(ctx, root, cfg)
		}
		return fetcher.Open(ctx, root+"/"+sub, cfg)
	}
	return open, root, base, nil
}

// repositoryRoot opens the store of a repository's root from SOURCE
// (the bucket, or the directory) and returns it with the base path.
func repositoryRoot(ctx context.Context, src string, cfg fetcher.Config) (top fetcher.Store, base string, err error) {
	_, root, base, err := repository(src, cfg)
	if err != nil {
		return nil, "", err
	}
	top, err = fetcher.Open(ctx, root, cfg)
	return top, base, err
}

// openShard resolves an OpenSearch shard. SOURCE names the repository:
// for S3 the bucket is its root and the prefix its base path (a hashed
// prefix comes before the base path, so the root is the bucket); a
// local directory is the root itself, with no base path.
func openShard(ctx context.Context, src string, f layoutFlags, cfg fetcher.Config, parallel int, tolerate bool, log *slog.Logger) (*source, error) {
	o, err := f.opensearch()
	if err != nil {
		return nil, err
	}
	open, root, base, err := repository(src, cfg)
	if err != nil {
		return nil, err
	}
	shard, err := o.Resolve(ctx, open, base, log)
	if err != nil {
		return nil, err
	}
	if err := shard.Err(); err != nil && !tolerate {
		return nil, err
	}
	out := &source{store: shard.Data, entries: shard.Entries, keys: len(shard.Entries), shard: shard, problems: shard.Problems}
	if o.Metadata == "" || o.Metadata == "newest" {
		// The metadata prefix's requests count with the data's: one
		// source in /stats.
		mdCfg := cfg
		mdCfg.Counters = shard.Data.Counters()
		out.relist = shardLister(shard, func(ctx context.Context) (fetcher.Store, error) {
			return fetcher.Open(ctx, root+"/"+shard.MetadataPath, mdCfg)
		}, parallel, log)
	}
	return out, nil
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

// checksums are the footer checksums the layout's metadata records for
// its files, by name; none for a plain source.
func (s *source) checksums() map[string]uint64 {
	m := map[string]uint64{}
	if s.shard != nil {
		for _, f := range s.shard.Metadata.Files {
			m[f.Name] = f.Checksum
		}
	}
	for name, sum := range s.sums {
		m[name] = sum
	}
	return m
}

// openSnapshot resolves one shard of a snapshot repository. SOURCE is the
// repository's root: for S3 the bucket and its base path, or a local
// directory. A snapshot never changes: the view has no refresh.
func openSnapshot(ctx context.Context, src string, f layoutFlags, cfg fetcher.Config, tolerate bool, log *slog.Logger) (*source, error) {
	open, _, base, err := repository(src, cfg)
	if err != nil {
		return nil, err
	}
	shard, err := layout.Snapshot{Name: f.Snapshot, Index: f.Index, Shard: f.Shard}.Resolve(ctx, open, base, log)
	if err != nil {
		return nil, err
	}
	if err := shard.Err(); err != nil && !tolerate {
		return nil, err
	}
	return &source{store: shard.Data, entries: shard.Entries, keys: len(shard.Entries), sums: shard.Checksums, problems: shard.Problems}, nil
}
