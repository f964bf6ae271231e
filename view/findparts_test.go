package view

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/snapshot"
)

// A walk of one file's parts looks at its context every ctxEvery parts:
// cancelled, a file of 3 x ctxEvery parts, every one listed, stops at the first
// look with the context's error; a file of fewer parts than that is
// walked whole (the resolve looks between files).
func TestFindPartsContext(t *testing.T) {
	const n = 3 * ctxEvery
	f := snapshot.FileInfo{Blob: "__b", Name: "_0.fdt", Length: n, PartSize: 1}
	listed := make(map[string]fetcher.Object, n)
	for i := range int64(n) {
		k := "__b.part" + strconv.FormatInt(i, 10)
		listed[k] = fetcher.Object{Key: k, Size: 1}
	}
	objs, pr, err := findParts(context.Background(), f, 0, listed)
	if err != nil || pr != nil || len(objs) != n {
		t.Fatalf("every part listed: %d objects, %v, %v", len(objs), pr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := findParts(ctx, f, 0, listed); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	small := snapshot.FileInfo{Blob: "__b", Name: "_0.fdt", Length: ctxEvery - 1, PartSize: 1}
	if objs, _, err := findParts(ctx, small, 0, listed); err != nil || len(objs) != ctxEvery-1 {
		t.Errorf("cancelled, %d parts: %d objects, %v", ctxEvery-1, len(objs), err)
	}
}
