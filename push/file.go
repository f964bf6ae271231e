package push

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"syscall"

	"github.com/segfs/segfs/compress"
)

// ErrReplaced reports a local path that no longer names the file the
// walk listed: between the walk and the open it was replaced by a
// symbolic link, another file, a directory or a special file (or a
// directory on its path was). Nothing is read through the new name, so
// nothing of it is uploaded; push again to pick up what is there now.
var ErrReplaced = errors.New("file replaced since it was listed")

// pushFile opens f (the file the walk listed, see openListed), hashes it,
// skips it if the target is up to date, and otherwise uploads it raw or
// compressed from the same open file. The bytes uploaded (or compressed)
// are hashed again as they are read: if they are not the bytes hashed
// first, the upload fails with ErrChanged before anything is stored.
func pushFile(ctx context.Context, opt *Options, tgt target, f localFile) (FileResult, error) {
	r := FileResult{Key: f.key, Target: f.target(), Size: f.size, Action: Raw}
	if f.compressed {
		r.Action = Compressed
	}
	in, err := openListed(f)
	if err != nil {
		return r, err
	}
	defer in.Close()
	sha, n, err := hashReader(in, f.path)
	if err != nil {
		return r, err
	}
	if n != f.size {
		return r, fmt.Errorf("%s: %w: %d bytes when listed, %d when hashed", f.path, ErrChanged, f.size, n)
	}
	ok, err := tgt.upToDate(ctx, f.target(), f.size, sha, f.compressed)
	if err != nil {
		return r, fmt.Errorf("check %s: %w", f.target(), err)
	}
	if ok {
		r.Action = Skipped
		if opt.OnBytes != nil {
			opt.OnBytes(f.size)
		}
		return r, nil
	}
	if opt.DryRun {
		return r, nil
	}
	meta := map[string]string{MetaSHA256: sha, MetaSize: strconv.FormatInt(f.size, 10)}
	if _, err := in.Seek(0, io.SeekStart); err != nil {
		return r, fmt.Errorf("read %s: %w", f.path, err)
	}
	var body io.Reader = &verifyingReader{
		r: &countingReader{r: in, add: opt.OnBytes}, h: sha256.New(),
		path: f.path, size: f.size, sha: sha,
	}
	size := f.size
	if f.compressed {
		tmp, err := os.CreateTemp(opt.TmpDir, "segfs-push-*.zst")
		if err != nil {
			return r, fmt.Errorf("temporary file for %s: %w", f.key, err)
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		_, out, err := compress.Encode(ctx, tmp, body, opt.Encoder)
		if err != nil {
			return r, fmt.Errorf("compress %s: %w", f.path, err)
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return r, fmt.Errorf("compress %s: %w", f.path, err)
		}
		body, size = tmp, out
	}
	if err := tgt.put(ctx, f.target(), body, size, meta); err != nil {
		return r, fmt.Errorf("upload %s to %s: %w", f.path, f.target(), err)
	}
	r.StoredSize = size
	return r, nil
}

// openListed opens f.path for reading if it is still the regular file the
// walk listed: the same device and inode, reached without following a
// symbolic link in its last element (O_NOFOLLOW). A link or directory
// put on the path higher up leads to another inode, which the comparison
// catches too. Otherwise it fails with an error wrapping ErrReplaced that
// names the path. O_NONBLOCK keeps the open of a FIFO put in the file's
// place from waiting for a writer; it has no effect on a regular file.
func openListed(f localFile) (*os.File, error) {
	in, err := os.OpenFile(f.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s: %w: it is now a symbolic link, which push does not follow", f.path, ErrReplaced)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", f.path, err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(in.Fd()), &st); err != nil {
		in.Close()
		return nil, fmt.Errorf("stat %s: %w", f.path, err)
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		in.Close()
		return nil, fmt.Errorf("%s: %w: it is no longer a regular file", f.path, ErrReplaced)
	case uint64(st.Dev) != f.dev || st.Ino != f.ino:
		in.Close()
		return nil, fmt.Errorf("%s: %w: it is another file now (device and inode %d/%d, listed as %d/%d)",
			f.path, ErrReplaced, st.Dev, st.Ino, f.dev, f.ino)
	}
	return in, nil
}

// hashFile returns the hex SHA-256 of the file at p and its length.
func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return hashReader(f, p)
}

// hashReader returns the hex SHA-256 of what r holds and its length; name
// is for errors.
func hashReader(r io.Reader, name string) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return "", n, fmt.Errorf("read %s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// verifyingReader passes r through and, instead of io.EOF, returns an
// error wrapping ErrChanged if r delivered other than size bytes with
// SHA-256 sha. The error is sticky: every later Read returns it too, so
// a consumer that drops an error returned with data (io.ReadFull when
// its buffer fills) still sees it on its next Read.
type verifyingReader struct {
	r    io.Reader
	h    hash.Hash
	path string
	size int64
	sha  string

	n   int64
	err error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	switch {
	case v.n > v.size:
		v.err = fmt.Errorf("%s: %w: it grew past the %d bytes hashed", v.path, ErrChanged, v.size)
	case err == io.EOF && v.n < v.size:
		v.err = fmt.Errorf("%s: %w: %d bytes read for the upload, %d hashed", v.path, ErrChanged, v.n, v.size)
	case err == io.EOF && hex.EncodeToString(v.h.Sum(nil)) != v.sha:
		v.err = fmt.Errorf("%s: %w: its content differs from the content hashed (same size)", v.path, ErrChanged)
	case err != nil:
		v.err = err
	}
	return n, v.err
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r   io.Reader
	add func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 && c.add != nil {
		c.add(int64(n))
	}
	return n, err
}
