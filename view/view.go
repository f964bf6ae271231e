package view

import (
	"context"
	"errors"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/fetcher"
)

// A View is what a mount shows of its store, and how that changes.
// Every shape implements it; the commands consume it without knowing
// the shape.
//
// The tree has Depth levels of directories (fs.Lazy): a directory above
// that level holds directories only (Dirs), one at it holds files
// (Files). A flat view (Depth 0) is one directory whose files were
// listed at Open: Files("") returns them. All methods may be called
// concurrently, for different directories.
type View interface {
	// Store is what every file's bytes are read through.
	Store() fetcher.Store
	Depth() int
	// Dirs returns the names of the directories in dir ("" for the
	// root, else "a/" or "a/b/"), a directory above Depth.
	Dirs(ctx context.Context, dir string) ([]string, error)
	// Has reports whether dir holds the directory name, which its Dirs
	// did not list (a name a listing knows of but does not show), from
	// what the last Dirs of dir found: it makes no remote call.
	Has(dir, name string) bool
	// Files returns the files of dir, a directory at Depth, each named
	// dir + its name.
	Files(ctx context.Context, dir string) ([]entry.Entry, error)
	// Keys is how many keys the view's listing at Open found (the
	// memory bound's start; a tree's grows as its shards resolve).
	Keys() int
	// Follows says how the view changes (Next).
	Follows() Follow
	// Next looks for the next view: shown are the files the mount shows
	// now. An error changes nothing: the view stays as it was.
	Next(ctx context.Context, shown []entry.Entry) (*Update, error)
	// All resolves every file the view can show, for restore and
	// verify.
	All(ctx context.Context) (*Resolved, error)
}

// Follow says how a view follows its store.
type Follow struct {
	// Refresh is set when Next can find a change: --refresh and SIGHUP
	// ask it.
	Refresh bool
	// Commits is set when a change is a new commit of an index: what
	// opening it reads is fetched before it shows, and the names it
	// drops stay for --keep-removed, for the readers of the commit
	// before.
	Commits bool
}

// Update is the next view Next found.
type Update struct {
	// Entries, for a flat view, are all of its files now.
	Entries []entry.Entry
	// Dirs, for a tree, are the files of each shard shown that has a
	// newer commit, by directory; a tree lists its directories again at
	// their next use, so that new indices and shards show.
	Dirs map[string][]entry.Entry
	// Keys is how many keys the view now names, for the memory bound.
	Keys int
	// Commit, for a tree, makes the shards whose files the mount applied
	// show their new commit from then on; nil for a flat view.
	Commit func(applied map[string]bool)
}

// Resolved is every file a view shows, resolved: what restore and
// verify read.
type Resolved struct {
	Store   fetcher.Store
	Entries []entry.Entry
	Keys    int // keys listed, for the memory bound
	// Problems are the files the layout's metadata names that its store
	// does not hold as it says (Options.Tolerate; else All fails).
	Problems []Problem
	// Sums are the footer checksums the layout's metadata records, by
	// file name; none for plain objects.
	Sums map[string]uint64
}

// ErrOneShard is All's error for a view that restore and verify do not
// take whole: a snapshot repository.
var ErrOneShard = errors.New("--layout snapshot without --index and --shard mounts a whole repository; restore and verify take one shard (--index, --shard)")

// Open opens the view spec names. A flat view lists its store (and
// resolves its shard) here; a tree opens its root and resolves the rest
// as it is used.
func Open(ctx context.Context, spec Spec, o Options) (View, error) {
	if err := spec.Check(); err != nil {
		return nil, err
	}
	switch spec.shape() {
	case repository:
		return openRepository(ctx, spec, o)
	case snapshotRepo:
		return openSnapshotRepository(ctx, spec, o)
	case shard:
		return openShard(ctx, spec, o)
	case snapshotShard:
		return openSnapshot(ctx, spec, o)
	}
	return openPlain(ctx, spec, o)
}

// Resolve opens the view spec names and resolves every file it shows
// (All), for restore and verify.
func Resolve(ctx context.Context, spec Spec, o Options) (*Resolved, error) {
	if spec.shape() == snapshotRepo {
		return nil, ErrOneShard
	}
	v, err := Open(ctx, spec, o)
	if err != nil {
		return nil, err
	}
	return v.All(ctx)
}

// RepositoryOpener returns the opener of a repository's paths from
// source: for S3 the bucket is the repository's root and the prefix
// its base path (a hashed prefix comes before the base path, so the
// root is the bucket); a local directory is the root itself, with no
// base path.
func RepositoryOpener(source string, cfg fetcher.Config) (open Opener, root, base string, err error) {
	s, err := fetcher.ParseSource(source)
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

// repositoryRoot opens the store of a repository's root from source
// (the bucket, or the directory) and returns it with the base path.
func repositoryRoot(ctx context.Context, source string, cfg fetcher.Config) (top fetcher.Store, base string, err error) {
	open, _, base, err := RepositoryOpener(source, cfg)
	if err != nil {
		return nil, "", err
	}
	top, err = open(ctx, "")
	return top, base, err
}
