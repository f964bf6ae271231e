package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segfs/segfs/tests/harness"
)

// Helpers shared by the cache and prefetch tests: objects uploaded from
// memory, polling the mount's counters, and looking at the cache directory
// from outside (its layout is documented in cache/doc.go).

// hangGuard bounds every wait on a condition segfs should reach by itself.
const hangGuard = harness.HangGuard

// putObjects uploads objs (key to content) into bucket, a few at a time.
func putObjects(t *testing.T, srv *harness.Server, bucket string, objs map[string][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.PutObjects(ctx, bucket, objs); err != nil {
		t.Fatal(err)
	}
}

// mountCached mounts s3://bucket with --cache-dir cacheDir and args. The
// cache tests count part files and GETs per read exactly, so the
// segment-aware prefetch, which fetches heads and tails into the range
// tier when a Lucene file is opened (segment_prefetch_test.go), is off.
func mountCached(t *testing.T, srv *harness.Server, bucket, cacheDir string, args ...string) *harness.Mount {
	t.Helper()
	return mountS3(t, srv, "s3://"+bucket, append([]string{"--cache-dir", cacheDir, "--no-segment-prefetch"}, args...)...)
}

// waitCached waits until no fetch is queued or running and the cache has
// indexed exactly parts parts.
func waitCached(t *testing.T, m *harness.Mount, parts int64) map[string]int64 {
	t.Helper()
	return harness.WaitStats(t, m, fmt.Sprintf("%d cached parts and no fetch in flight", parts), func(s map[string]int64) bool {
		return harness.Idle(s) && s["cache_index_loaded"] == 1 && s["cache_parts"] == parts
	})
}

// partCount is the number of parts of partSize the objects are cut into.
func partCount(objs map[string][]byte, partSize int64) int64 {
	var n int64
	for _, b := range objs {
		n += (int64(len(b)) + partSize - 1) / partSize
	}
	return n
}

// checkObjects reads every object whole through the mount at dir, in key
// order, and compares it with its content.
func checkObjects(t *testing.T, dir string, objs map[string][]byte) {
	t.Helper()
	for _, key := range slices.Sorted(maps.Keys(objs)) {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(key)))
		want := objs[key]
		switch {
		case err != nil:
			t.Errorf("%s: %v", key, err)
		case len(got) != len(want):
			t.Errorf("%s: read %d bytes, want %d", key, len(got), len(want))
		case !bytes.Equal(got, want):
			t.Errorf("%s: content differs (first difference at %d)", key, firstDiff(got, want))
		}
	}
}

// cacheFile is a file found under a cache directory.
type cacheFile struct {
	path string
	size int64
}

// scanCache lists the part files (*.part) and temporary files (anything
// in tmp/, and any *.tmp elsewhere) under dir. Files that vanish during
// the walk (evicted, renamed into place) are skipped, so it may run while
// segfs writes.
func scanCache(dir string) (parts, temps []cacheFile, err error) {
	tmpDir := filepath.Join(dir, "tmp")
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != dir {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		f := cacheFile{path: p, size: info.Size()}
		switch {
		case strings.HasPrefix(p, tmpDir+string(filepath.Separator)) || strings.HasSuffix(p, ".tmp"):
			temps = append(temps, f)
		case strings.HasSuffix(p, ".part"):
			parts = append(parts, f)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("scan cache %s: %w", dir, err)
	}
	return parts, temps, nil
}

// mustScanCache is scanCache that ends the test on error.
func mustScanCache(t *testing.T, dir string) (parts, temps []cacheFile) {
	t.Helper()
	parts, temps, err := scanCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	return parts, temps
}

// totalSize sums the files' sizes.
func totalSize(files []cacheFile) int64 {
	var n int64
	for _, f := range files {
		n += f.size
	}
	return n
}

// paths lists the files' paths, for messages.
func paths(files []cacheFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.path
	}
	return out
}

// partInfo is what the tests read from a part file's header (format in
// cache/format.go): enough to damage it on purpose and to say which part
// it was.
type partInfo struct {
	path    string
	hdrLen  int64 // H: the data starts here
	dataLen int64 // L
	index   int64
	object  string
}

// readPartInfo parses the fixed fields and the object name of a part
// file's header. It checks the magic number only.
func readPartInfo(path string) (partInfo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return partInfo{}, err
	}
	le := binary.LittleEndian
	if len(b) < 64 || string(b[:8]) != "segfsprt" {
		return partInfo{}, fmt.Errorf("%s: not a part file", path)
	}
	ns, no := int(le.Uint16(b[56:])), int(le.Uint16(b[58:]))
	if 64+ns+no > len(b) {
		return partInfo{}, fmt.Errorf("%s: header overruns the file", path)
	}
	return partInfo{
		path:    path,
		hdrLen:  int64(le.Uint32(b[12:])),
		dataLen: int64(le.Uint64(b[24:])),
		index:   int64(le.Uint64(b[40:])),
		object:  string(b[64+ns : 64+ns+no]),
	}, nil
}

func (p partInfo) String() string { return fmt.Sprintf("%s part %d", p.object, p.index) }

// writeTestFile writes content to path (0600), making its directories.
func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// wantLine fails the test unless out holds line as a whole line.
func wantLine(t *testing.T, out, line string) {
	t.Helper()
	if !slices.Contains(strings.Split(out, "\n"), line) {
		t.Errorf("output has no line %q:\n%s", line, out)
	}
}
