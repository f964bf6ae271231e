package layout

import (
	"context"
	"fmt"
	"path"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/snapshot"
)

// ReadSnapshotRootNewer reads the root of the snapshot repository below
// base in top if it is newer than generation gen: index.latest (8
// bytes) first, and the index-N it names only when that is above gen;
// nil when it is not. A repository mount's relisting pays one small GET
// while the repository does not change.
func ReadSnapshotRootNewer(ctx context.Context, top fetcher.Store, base string, gen int64) (*snapshot.Repository, error) {
	latest, err := readSmall(ctx, top, path.Join(base, "index.latest"))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	next, err := snapshot.ParseLatest(latest)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	if next <= gen {
		return nil, nil
	}
	raw, err := readSmall(ctx, top, path.Join(base, snapshot.IndexN(next)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	repo, err := snapshot.ParseIndexN(raw, next)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLayout, top, err)
	}
	return repo, nil
}
