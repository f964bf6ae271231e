package view

import (
	"context"
	"fmt"
	"path"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/snapshot"
)

// ReadSnapshotRootNewer reads the root of the snapshot repository below
// base in top if it is newer than generation gen: index.latest (8
// bytes) first, and the index-N it names only when that is above gen and
// is not skip (a generation found bad before: an index-N never changes
// once written, so it is not fetched again); nil when it is not newer.
// It returns the generation index.latest names. A repository mount's
// relisting pays one small GET while the repository does not change.
func ReadSnapshotRootNewer(ctx context.Context, top fetcher.Store, base string, gen, skip int64) (*snapshot.Repository, int64, error) {
	latest, err := readSmall(ctx, top, path.Join(base, "index.latest"))
	if err != nil {
		return nil, -1, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	next, err := snapshot.ParseLatest(latest)
	if err != nil {
		return nil, -1, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	if next <= gen || next == skip {
		return nil, next, nil
	}
	raw, err := readSmall(ctx, top, path.Join(base, snapshot.IndexN(next)))
	if err != nil {
		return nil, next, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	repo, err := snapshot.ParseIndexN(raw, next)
	if err != nil {
		return nil, next, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	return repo, next, nil
}
