package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sync/errgroup"

	"github.com/segfs/segfs/lucene"
)

// present checks each file an earlier run left under its final name, at
// most PresentCheckers at once: one of the right length and modification
// time (when the store gives one) that passes the check of --verify is
// skipped, and its stale temporary file, if any, removed; any other is
// to be replaced. It returns the files to fetch, and those of them whose
// present copy must go first. Only an interrupt or an error reading
// DEST_DIR is an error.
func (d *Dest) present(ctx context.Context, files []*File, level Level, sum *Summary) (todo, replace []*File, err error) {
	dd, log := d.dd, d.log
	type verdict struct {
		skip bool
		why  string // why a present copy is replaced; "" for none there
	}
	verdicts := make([]verdict, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(PresentCheckers)
	for i, f := range files {
		if f.refused != nil {
			continue
		}
		g.Go(func() error {
			skip, why, err := checkPresent(gctx, dd, f, level)
			verdicts[i] = verdict{skip, why}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	for i, f := range files {
		if f.refused != nil {
			continue // failed by the restorer, not fetched
		}
		switch v := verdicts[i]; {
		case v.skip:
			sum.Skipped++
			sum.SkippedBytes += f.size
			log.Info("present and verified; skipped", "file", f.entry.Name, "size", f.size)
			if err := dd.Remove(f.temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("remove the stale %s: %w", dd.display(f.temp), err)
			}
			continue
		case v.why != "":
			log.Info("present but not as the source has it; fetched again", "file", f.entry.Name, "why", v.why)
			replace = append(replace, f)
		}
		todo = append(todo, f)
	}
	return todo, replace, nil
}

// checkPresent reports whether f's final name holds it, complete and
// verified at the level of --verify; if not, why ("" when nothing is
// there).
func checkPresent(ctx context.Context, dd *destDir, f *File, level Level) (skip bool, why string, err error) {
	if err := ctx.Err(); err != nil {
		return false, "", err
	}
	fi, err := dd.Lstat(f.entry.Name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, "", nil
	case err != nil:
		return false, "", fmt.Errorf("DEST_DIR: %w", err)
	case !fi.Mode().IsRegular():
		return false, "", fmt.Errorf("DEST_DIR: %s is not a regular file", dd.display(f.entry.Name))
	case fi.Size() != f.size:
		return false, fmt.Sprintf("%d bytes, the source's are %d", fi.Size(), f.size), nil
	}
	if mt := f.entry.Obj.ModTime; !mt.IsZero() && fi.ModTime().Unix() != mt.Unix() {
		return false, fmt.Sprintf("modified %v, the source's %v", fi.ModTime().UTC(), mt.UTC()), nil
	}
	file, err := dd.OpenFile(f.entry.Name, os.O_RDONLY, 0)
	if err != nil {
		return false, "", fmt.Errorf("DEST_DIR: %w", err)
	}
	defer file.Close()
	var buf []byte
	if level == Deep {
		buf = make([]byte, lucene.CheckChunk)
	}
	if err := checkRestored(ctx, f, file, level, buf); err != nil {
		if ctx.Err() != nil {
			return false, "", ctx.Err()
		}
		return false, err.Error(), nil
	}
	return true, "", nil
}

// checkRestored checks the local copy of f in file, whose length is
// known to be f's, at level: nothing more for none; for footer an inline
// file's bytes against the layout's, and a Lucene file's footer (with
// the metadata's checksum when the layout has one); for deep also the
// CRC32 of every byte, read in len(buf) chunks. A file with no footer
// and no checksum from a layout is not a Lucene file: its length is all
// there is to check.
func checkRestored(ctx context.Context, f *File, file *os.File, level Level, buf []byte) error {
	if level == None {
		return nil
	}
	if f.entry.Inline != nil {
		got := make([]byte, len(f.entry.Inline))
		if _, err := file.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read back: %w", err)
		}
		if i := firstDifference(got, f.entry.Inline); i >= 0 {
			return fmt.Errorf("differs from the layout's bytes of it at offset %d", i)
		}
		return nil
	}
	read := func(ctx context.Context, p []byte, off int64) (int, error) {
		if err := ctx.Err(); err != nil {
			return 0, err // an interrupt stops a deep check at its next chunk
		}
		n, err := file.ReadAt(p, off)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return n, err
	}
	if level != Deep {
		buf = nil
	}
	footer, err := lucene.Check(ctx, read, f.size, f.expected, buf, nil)
	if err != nil && footer == nil && f.expected == nil && errors.Is(err, lucene.ErrCorrupt) {
		return nil // not a Lucene file
	}
	return err
}

// firstDifference returns the first offset at which a and b differ, -1
// if they are equal.
func firstDifference(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
