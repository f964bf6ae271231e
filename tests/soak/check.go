package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/segfs/segfs/reader"
	"github.com/segfs/segfs/tests/harness"
)

// sampleLoop samples the current segfs process every interval until ctx
// ends: threads and resident memory from /proc, goroutines and heap from
// its counters.
func (s *soak) sampleLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m := s.currentMount()
		if m == nil {
			continue
		}
		st, err := harness.ReadProcStatus(m.Pid())
		if err != nil {
			continue // between mounts, or unreadable
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		stats, err := m.Stats(cctx)
		cancel()
		if err != nil {
			continue
		}
		s.res.sample(stats["goroutines"], st.Threads, max(st.VmRSS, st.VmHWM), stats["heap_bytes"])
	}
}

// checkCache compares every part file and every whole-object file (of
// --passthrough) in the cache directory with the object it names (the
// bytes as stored), and reports temporary files, and whole-object files
// or seals without the other, as leaks. The header layout is in
// cache/doc.go, the seal's in cache/object.go.
func (s *soak) checkCache() {
	err := filepath.WalkDir(s.cacheDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.cacheDir, p)
		switch {
		case d.IsDir() || rel == "lock":
			return nil
		case strings.HasPrefix(rel, "tmp"+string(filepath.Separator)) || strings.HasSuffix(p, ".tmp"):
			s.res.leak("temporary file left in the cache: " + rel)
			return nil
		case strings.HasSuffix(p, ".seal"):
			if _, err := os.Lstat(strings.TrimSuffix(p, ".seal") + ".obj"); err != nil {
				s.res.leak("seal without its whole-object file left in the cache: " + rel)
			}
			return nil
		case strings.HasSuffix(p, ".obj"):
			msg, sealed := s.checkWhole(p)
			if !sealed {
				s.res.leak("whole-object file without its seal left in the cache: " + rel)
				msg = ""
			}
			s.res.cacheChecked(rel, msg, &s.res.cacheWhole)
			return nil
		case !strings.HasSuffix(p, ".part"):
			s.res.leak("unexpected file in the cache: " + rel)
			return nil
		}
		s.res.cacheChecked(rel, s.checkPart(p), &s.res.cacheParts)
		return nil
	})
	if err != nil {
		s.res.fatal(fmt.Errorf("checking the cache: %w", err))
	}
}

// checkPart returns why the part file at p does not hold its object's
// bytes, or "".
func (s *soak) checkPart(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	le := binary.LittleEndian
	if len(b) < 64 || string(b[:8]) != "segfsprt" {
		return "not a part file"
	}
	hdr, dataLen, partSize, index := int64(le.Uint32(b[12:])), int64(le.Uint64(b[24:])), int64(le.Uint64(b[32:])), int64(le.Uint64(b[40:]))
	ns, no := int(le.Uint16(b[56:])), int(le.Uint16(b[58:]))
	if 64+ns+no > len(b) || hdr+dataLen != int64(len(b)) {
		return "header does not match the file's length"
	}
	key := string(b[64+ns : 64+ns+no])
	if key == reader.ProfileObject {
		return "" // segfs's learned open profile, a record of its own (no object's bytes)
	}
	local, ok := s.rem.objects[key]
	if !ok {
		return fmt.Sprintf("holds a part of %q, which was not uploaded", key)
	}
	lf, err := os.Open(local)
	if err != nil {
		return err.Error()
	}
	defer lf.Close()
	want := make([]byte, dataLen)
	if _, err := lf.ReadAt(want, index*partSize); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("part %d of %s: %v", index, key, err)
	}
	if !bytes.Equal(b[hdr:], want) {
		return fmt.Sprintf("part %d of %s holds other bytes than the object's", index, key)
	}
	return ""
}

// checkWhole returns why the whole-object file at p does not hold the
// bytes of the object its seal names, or "", and whether it has a seal.
func (s *soak) checkWhole(p string) (msg string, sealed bool) {
	seal, err := os.ReadFile(strings.TrimSuffix(p, ".obj") + ".seal")
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		return err.Error(), true
	}
	// magic | version u16 | 0 u16 | len(source), len(object), len(etag)
	// u16 | 0 u16 | size, dev, ino, ctime, mtime u64 | fields | crc u32
	const fixed = 60
	le := binary.LittleEndian
	if len(seal) < fixed+4 || string(seal[:8]) != "segfsobj" {
		return "its seal is not a seal", true
	}
	ns, no := int(le.Uint16(seal[12:])), int(le.Uint16(seal[14:]))
	size := int64(le.Uint64(seal[20:]))
	if fixed+ns+no > len(seal)-4 {
		return "its seal's fields overrun it", true
	}
	key := string(seal[fixed+ns : fixed+ns+no])
	local, ok := s.rem.objects[key]
	if !ok {
		return fmt.Sprintf("holds %q, which was not uploaded", key), true
	}
	got, err := os.ReadFile(p)
	if err != nil {
		return err.Error(), true
	}
	want, err := os.ReadFile(local)
	if err != nil {
		return err.Error(), true
	}
	switch {
	case int64(len(want)) != size:
		return fmt.Sprintf("its seal says %s has %d bytes, it has %d", key, size, len(want)), true
	case !bytes.Equal(got, want):
		return fmt.Sprintf("holds %d bytes other than the %d of %s", len(got), len(want), key), true
	}
	return "", true
}

// checkMounts reports every segfs mount still present below dir.
func checkMounts(dir string, res *results) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		res.fatal(err)
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir) && strings.Contains(line, " - fuse") {
			res.leak("mount left: " + f[4])
		}
	}
}

// goroutines counts this process's goroutines, all of them: the shaping
// proxy's own included, which must end when it is closed.
func goroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if len(bytes.TrimSpace(g)) != 0 {
			all++
		}
	}
	return all
}

// checkGoroutines waits up to grace for this process's goroutines to come
// back to baseline, and reports the extra ones as a leak.
func checkGoroutines(baseline int, grace time.Duration, res *results) {
	deadline := time.Now().Add(grace)
	n := goroutines()
	for n > baseline && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n = goroutines()
	}
	if n > baseline {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		res.leak(fmt.Sprintf("%d goroutines of the soak process once everything was closed, %d before anything started:\n%s",
			n, baseline, buf.String()))
	}
	res.mu.Lock()
	res.goroutinesEnd, res.goroutinesStart = n, baseline
	res.mu.Unlock()
}

// readFailures returns the "read failed" lines of a segfs log, each cut
// to its errno and cause.
func readFailures(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="read failed"`) {
			continue
		}
		if i := strings.Index(line, "key="); i >= 0 {
			line = line[i:]
		}
		out = append(out, line)
	}
	return out
}
