package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// dirTarget writes below a local directory. It keeps no metadata: see the
// package documentation.
type dirTarget struct{ dir string }

func (t *dirTarget) String() string { return "file://" + t.dir }

func (t *dirTarget) path(key string) string { return filepath.Join(t.dir, filepath.FromSlash(key)) }

// list walks the directory for regular files; a missing directory (a dry
// run to a new destination) lists empty.
func (t *dirTarget) list(ctx context.Context) ([]string, error) {
	var keys []string
	err := filepath.WalkDir(t.dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == t.dir {
			return filepath.SkipAll
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(t.dir, p)
		if err != nil {
			return err
		}
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	})
	return keys, err
}

func (t *dirTarget) upToDate(ctx context.Context, key string, size int64, sha string, compressed bool) (bool, error) {
	if compressed {
		return false, nil // always rewritten
	}
	p := t.path(key)
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !fi.Mode().IsRegular() || fi.Size() != size:
		return false, nil
	}
	got, _, err := hashFile(p)
	if err != nil {
		return false, err
	}
	return got == sha, nil
}

// put writes a temporary file next to the target and renames it over the
// target; on any error, from r too, the temporary file is removed.
func (t *dirTarget) put(ctx context.Context, key string, r io.Reader, size int64, _ map[string]string) error {
	p := t.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".segfs-push-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	n, err := io.Copy(tmp, readerCtx{ctx, r})
	if err == nil && n != size {
		err = fmt.Errorf("wrote %d bytes, want %d", n, size)
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

func (t *dirTarget) remove(ctx context.Context, key string) error {
	err := os.Remove(t.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// readerCtx stops a copy once ctx is done.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
