package reliability

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/tests/faults"
)

// randomBytes returns n reproducible random bytes.
func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	rand.NewChaCha8(key).Read(b)
	return b
}

// waitFor polls cond until it holds, failing the test after hangGuard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %v", what, hangGuard)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string, max int) string {
	if len(s) > max {
		return "…" + s[len(s)-max:]
	}
	return s
}

// errnoOf returns the errno inside err, or 0.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return 0
}

// outcome is how a read went: exact bytes, or a failure with an errno.
// Anything else (wrong, short or extra bytes, an error without an errno)
// is reported by readExact as an error.
type outcome struct {
	errno syscall.Errno // 0: the bytes were exact
}

// readExact reads n bytes at off from f and checks them against want (the
// whole file). A read that reaches EOF must return exactly the bytes
// before it. It returns the errno of a failed read, or an error if the
// read returned anything but the true bytes.
func readExact(f *os.File, want []byte, off int64, n int) (syscall.Errno, error) {
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	wantN := int(max(0, min(int64(n), int64(len(want))-off)))
	if err != nil && !(errors.Is(err, io.EOF) && got == wantN && wantN < n) {
		if errno := errnoOf(err); errno != 0 {
			return errno, nil
		}
		return 0, fmt.Errorf("pread(off=%d, n=%d): error without an errno after %d bytes: %w", off, n, got, err)
	}
	if got != wantN {
		return 0, fmt.Errorf("pread(off=%d, n=%d) returned %d bytes, want %d", off, n, got, wantN)
	}
	if !bytes.Equal(buf[:got], want[off:off+int64(got)]) {
		return 0, fmt.Errorf("pread(off=%d, n=%d) returned other bytes (first difference at +%d; injected error text: %v)",
			off, n, firstDiff(buf[:got], want[off:]), bytes.Contains(buf[:got], []byte(faults.Marker)))
	}
	return 0, nil
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// tally counts read outcomes by errno; it is safe for concurrent use.
type tally struct {
	mu     sync.Mutex
	ok     int
	failed map[syscall.Errno]int
}

func (c *tally) add(errno syscall.Errno) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if errno == 0 {
		c.ok++
		return
	}
	if c.failed == nil {
		c.failed = map[syscall.Errno]int{}
	}
	c.failed[errno]++
}

func (c *tally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := []string{fmt.Sprintf("%d exact", c.ok)}
	for errno, n := range c.failed {
		parts = append(parts, fmt.Sprintf("%d %s", n, errnoName(errno)))
	}
	return strings.Join(parts, ", ")
}

// only reports whether every failure had one of the errnos.
func (c *tally) only(errnos ...syscall.Errno) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for errno := range c.failed {
		if !slices.Contains(errnos, errno) {
			return false
		}
	}
	return true
}

func (c *tally) failures() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.failed {
		n += v
	}
	return n
}

// errnoName is the errno's symbolic name where known.
func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EIO:
		return "EIO"
	case syscall.ESTALE:
		return "ESTALE"
	case syscall.ENOENT:
		return "ENOENT"
	case syscall.EINTR:
		return "EINTR"
	case syscall.ENOTCONN:
		return "ENOTCONN"
	case syscall.ECONNABORTED:
		return "ECONNABORTED"
	}
	return fmt.Sprintf("errno %d (%v)", int(e), e)
}

// partFile is what a test reads from a part file's header (format in
// cache/format.go and cache/doc.go).
type partFile struct {
	path    string
	hdrLen  int64
	dataLen int64
	index   int64
	partSz  int64
	object  string
	etag    string
}

// readPartFile parses the fixed fields and the object name and ETag of a
// part file's header.
func readPartFile(path string) (partFile, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return partFile{}, nil, err
	}
	le := binary.LittleEndian
	if len(b) < 64 || string(b[:8]) != "segfsprt" {
		return partFile{}, nil, fmt.Errorf("%s: not a part file", path)
	}
	ns, no, ne := int(le.Uint16(b[56:])), int(le.Uint16(b[58:])), int(le.Uint16(b[60:]))
	if 64+ns+no+ne > len(b) {
		return partFile{}, nil, fmt.Errorf("%s: header overruns the file", path)
	}
	p := partFile{
		path:    path,
		hdrLen:  int64(le.Uint32(b[12:])),
		dataLen: int64(le.Uint64(b[24:])),
		partSz:  int64(le.Uint64(b[32:])),
		index:   int64(le.Uint64(b[40:])),
		object:  string(b[64+ns : 64+ns+no]),
		etag:    string(b[64+ns+no : 64+ns+no+ne]),
	}
	if p.hdrLen+p.dataLen != int64(len(b)) {
		return p, nil, fmt.Errorf("%s: header says %d+%d bytes, file has %d", path, p.hdrLen, p.dataLen, len(b))
	}
	return p, b[p.hdrLen:], nil
}

// cacheReport is what checkCache found.
type cacheReport struct {
	parts   int
	byKey   map[string]int // part files by object key
	bytes   int64
	badPart []string // part files whose bytes are not the object's
}

// contentFunc returns the true content of an object version, or false if
// the test knows no such version.
type contentFunc func(key, etag string) ([]byte, bool)

// anyVersion looks objects up by key alone.
func anyVersion(objs map[string][]byte) contentFunc {
	return func(key, _ string) ([]byte, bool) {
		b, ok := objs[key]
		return b, ok
	}
}

// checkCache walks a cache directory and fails the test unless it holds
// only the documented layout (lock, tmp/, ab/<64 hex>.part; files 0600,
// directories 0700, nothing reached through a symlink), no temporary
// files, no injected error text anywhere, and part files whose data are
// exactly the bytes of the object version they name, as objs holds them
// (a map of key to content, or a contentFunc).
func checkCache(t *testing.T, dir string, objs any) cacheReport {
	t.Helper()
	rep := cacheReport{byKey: map[string]int{}}
	var content contentFunc
	switch o := objs.(type) {
	case map[string][]byte:
		content = anyVersion(o)
	case contentFunc:
		content = o
	default:
		panic("reliability: checkCache wants a map[string][]byte or a contentFunc")
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatalf("cache dir: %v", err)
	}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("cache: symlink %s", rel)
			return nil
		}
		if d.IsDir() {
			if perm := info.Mode().Perm(); perm&0o077 != 0 {
				t.Errorf("cache: directory %s has mode %v, want no group or other access", rel, perm)
			}
			if rel != "." && rel != "tmp" && !isHexName(rel, 2) {
				t.Errorf("cache: unexpected directory %s", rel)
			}
			return nil
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("cache: file %s has mode %v, want 0600", rel, perm)
		}
		dirName, base := filepath.Split(rel)
		switch {
		case rel == "lock":
			return nil
		case dirName == "tmp/":
			t.Errorf("cache: temporary file %s left with nothing in flight", rel)
			return nil
		case len(dirName) == 3 && isHexName(base[:len(base)-len(".part")], 64) && strings.HasSuffix(base, ".part") && strings.HasPrefix(base, dirName[:2]):
		default:
			t.Errorf("cache: unexpected file %s", rel)
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(raw, []byte(faults.Marker)) || bytes.Contains(raw, []byte("<Error>")) {
			t.Errorf("cache: %s holds injected error text", rel)
		}
		pf, data, err := readPartFile(p)
		if err != nil {
			t.Errorf("cache: %v", err)
			return nil
		}
		if pf.object == reader.ProfileObject {
			return nil // segfs's learned open profile, not an object's part
		}
		rep.parts++
		rep.bytes += int64(len(raw))
		rep.byKey[pf.object]++
		want, ok := content(pf.object, pf.etag)
		off := pf.index * pf.partSz
		switch {
		case !ok:
			t.Errorf("cache: %s holds a part of %q ETag %s, which the test did not upload", rel, pf.object, pf.etag)
		case off+int64(len(data)) > int64(len(want)) || !bytes.Equal(data, want[off:off+int64(len(data))]):
			rep.badPart = append(rep.badPart, rel)
			t.Errorf("cache: %s, part %d of %q, holds other bytes than the object's", rel, pf.index, pf.object)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk cache %s: %v", dir, err)
	}
	return rep
}

// isHexName reports whether s is n lower-case hex digits.
func isHexName(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// openAll opens every object of objs under dir with flag, closing them at
// the end of the test.
func openAll(t *testing.T, dir string, objs map[string][]byte, flag int) map[string]*os.File {
	t.Helper()
	files := map[string]*os.File{}
	for key := range objs {
		f, err := os.OpenFile(filepath.Join(dir, filepath.FromSlash(key)), os.O_RDONLY|flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		files[key] = f
	}
	return files
}

// sortedKeys returns the keys of objs in order.
func sortedKeys(objs map[string][]byte) []string {
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
