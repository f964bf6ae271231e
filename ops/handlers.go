package ops

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segfs/segfs/entry"
	"github.com/segfs/segfs/reader"
)

// The control socket's handlers: GET /status and POST /warm.

// FileStatus is one file of a status report.
type FileStatus struct {
	Name     string  `json:"name"`
	Size     int64   `json:"size"`   // stored bytes (compressed for a seekable zstd object)
	Cached   int64   `json:"cached"` // of those, cached
	Fraction float64 `json:"fraction"`
}

// StatusReport is what GET /status answers and `segfs status --json`
// prints.
type StatusReport struct {
	Source        string       `json:"source"`
	Mountpoint    string       `json:"mountpoint"`
	PID           int          `json:"pid"`
	Version       string       `json:"version"`
	Started       time.Time    `json:"started"`
	UptimeSeconds float64      `json:"uptime_seconds"`
	CacheDir      string       `json:"cache_dir"`
	CacheBytes    int64        `json:"cache_bytes"`
	CacheMaxBytes int64        `json:"cache_max_bytes"`
	CacheParts    int64        `json:"cache_parts"`
	HitRatio      float64      `json:"hit_ratio"`  // part reads served without waiting for the store, of all part reads
	DiskHitRatio  float64      `json:"disk_ratio"` // of those, by the disk cache
	PartReads     int64        `json:"part_reads"` // the denominator of both
	Files         []FileStatus `json:"files"`      // largest first; all with ?all=1, else the largest 20
	// Dirs sums the files by their directory (a repository mount's
	// shards), when there is more than one: largest first, all with
	// ?all=1, else the largest 20.
	Dirs        []DirStatus      `json:"directories,omitempty"`
	FileCount   int              `json:"file_count"`   // files in the mount
	CachedBytes int64            `json:"cached_bytes"` // summed over every file
	TotalBytes  int64            `json:"total_bytes"`
	Counters    map[string]int64 `json:"counters"` // everything /stats serves
}

// warmWriteTimeout is how long a warm's client may leave a line of its
// answer unread before the warm is stopped.
const warmWriteTimeout = 30 * time.Second

// statusFiles is how many files a status lists without --all.
const statusFiles = 20

func (c *Control) status(w http.ResponseWriter, req *http.Request) {
	rep := StatusReport{
		Source: c.src, Mountpoint: c.mnt, PID: os.Getpid(), Version: c.d.Version,
		Started: c.started, UptimeSeconds: time.Since(c.started).Seconds(),
		Counters: c.d.stats(),
	}
	if c.d.Disk != nil {
		cs := c.d.Disk.Stats()
		rep.CacheDir, rep.CacheBytes, rep.CacheMaxBytes, rep.CacheParts = c.d.Disk.Dir(), cs.Bytes, cs.MaxBytes, cs.Parts
	}
	// The part reads by where they were served from: without waiting for
	// the store (the tiers in memory, the disk, the range tier), or not
	// (a fetch started or joined for it, a GET of its own range).
	st := c.d.Reader.Stats()
	disk := st.DiskHits.Load()
	hits := st.MemoryHits.Load() + st.HeldHits.Load() + disk + st.RangeTierHits.Load()
	rep.PartReads = hits + st.StartedDemand.Load() + st.Joins.Load() + st.RangeReads.Load()
	if rep.PartReads > 0 {
		rep.HitRatio = float64(hits) / float64(rep.PartReads)
		rep.DiskHitRatio = float64(disk) / float64(rep.PartReads)
	}
	entries := c.d.entries()
	rep.FileCount = len(entries)
	files := make([]FileStatus, 0, len(entries))
	for _, e := range entries {
		cached, total := c.d.Reader.Cached(e)
		fs := FileStatus{Name: e.Name, Size: total, Cached: cached, Fraction: 1}
		if total > 0 {
			fs.Fraction = float64(cached) / float64(total)
		}
		rep.CachedBytes += cached
		rep.TotalBytes += total
		files = append(files, fs)
	}
	rep.Dirs = byDirectory(files)
	slices.SortStableFunc(files, func(a, b FileStatus) int {
		if c := cmp.Compare(b.Size, a.Size); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if req.URL.Query().Get("all") == "" {
		if len(files) > statusFiles {
			files = files[:statusFiles]
		}
		if len(rep.Dirs) > statusFiles {
			rep.Dirs = rep.Dirs[:statusFiles]
		}
	}
	rep.Files = files
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rep)
}

// DirStatus is one directory's files in a status report.
type DirStatus struct {
	Name     string  `json:"name"` // "" for the mount's root
	Files    int     `json:"files"`
	Size     int64   `json:"size"`
	Cached   int64   `json:"cached"`
	Fraction float64 `json:"fraction"`
}

// byDirectory sums files by directory, largest first; none when they
// are all in one.
func byDirectory(files []FileStatus) []DirStatus {
	at := map[string]*DirStatus{}
	for _, f := range files {
		dir := path.Dir(f.Name)
		if dir == "." {
			dir = ""
		}
		d := at[dir]
		if d == nil {
			d = &DirStatus{Name: dir}
			at[dir] = d
		}
		d.Files++
		d.Size += f.Size
		d.Cached += f.Cached
	}
	if len(at) < 2 {
		return nil
	}
	out := make([]DirStatus, 0, len(at))
	for _, d := range at {
		d.Fraction = 1
		if d.Size > 0 {
			d.Fraction = float64(d.Cached) / float64(d.Size)
		}
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b DirStatus) int {
		if c := cmp.Compare(b.Size, a.Size); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// WarmRequest is the body of POST /warm: paths relative to the
// mountpoint, each a file or a directory; none, or ".", is every file.
type WarmRequest struct {
	Paths []string `json:"paths"`
}

// WarmEvent is one line of a warm's answer. The first names the files
// and bytes to warm; then Bytes grows (cached bytes of all the files,
// those cached before the warm included) and each file that is cached
// or fails has a line; the last has Done.
type WarmEvent struct {
	Files      int    `json:"files,omitempty"`       // files to warm (first line)
	TotalBytes int64  `json:"total_bytes,omitempty"` // their stored bytes (first line)
	Bytes      int64  `json:"bytes"`                 // cached so far
	File       string `json:"file,omitempty"`        // a file that is now cached, or failed
	Error      string `json:"error,omitempty"`       // why File failed
	Done       bool   `json:"done,omitempty"`        // the warm is over
	Failed     int    `json:"failed,omitempty"`      // files that failed (last line)
}

// selectEntries returns the entries under paths, or an error naming a
// path that is no file or directory of the mount.
func selectEntries(entries []entry.Entry, paths []string) ([]entry.Entry, error) {
	if len(paths) == 0 {
		return entries, nil
	}
	seen := make(map[string]bool)
	var out []entry.Entry
	for _, p := range paths {
		p = filepath.ToSlash(filepath.Clean(p))
		if p == "." {
			p = ""
		}
		if strings.HasPrefix(p, "../") || p == ".." || strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("%s is outside the mount", p)
		}
		found := false
		for _, e := range entries {
			if p == "" || e.Name == p || strings.HasPrefix(e.Name, p+"/") {
				found = true
				if !seen[e.Name] {
					seen[e.Name] = true
					out = append(out, e)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("%s: no such file or directory in the mount", p)
		}
	}
	return out, nil
}

func (c *Control) warm(w http.ResponseWriter, req *http.Request) {
	var wr WarmRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&wr); err != nil {
		http.Error(w, "bad warm request: "+err.Error(), http.StatusBadRequest)
		return
	}
	entries, err := selectEntries(c.d.entries(), wr.Paths)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	rc := http.NewResponseController(w)
	// The warm ends with its client: gone, or not reading for
	// warmWriteTimeout (its writes would hold the warm's workers). Each
	// line sets its own write deadline, which replaces the server's
	// WriteTimeout: that bounds an answer, and a warm's lines go on.
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	var mu sync.Mutex // the writer, and the counts below
	enc := json.NewEncoder(w)
	emit := func(ev WarmEvent) {
		_ = rc.SetWriteDeadline(time.Now().Add(warmWriteTimeout))
		if enc.Encode(ev) != nil || rc.Flush() != nil {
			cancel()
		}
	}
	var total, cached int64
	parts := make(map[string]int64, len(entries)) // parts of each file not yet reported
	for _, e := range entries {
		got, size := c.d.Reader.Cached(e)
		total += size
		cached += got
		parts[e.Name] = c.d.Reader.Parts(e)
	}
	failed := 0
	emit(WarmEvent{Files: len(entries), TotalBytes: total, Bytes: cached})
	start := time.Now()
	c.log.Info("warm started", "files", len(entries), "bytes", total, "cached", cached)
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	ticker.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				emit(WarmEvent{Bytes: cached})
				mu.Unlock()
			}
		}
	})
	err = c.d.Reader.Warm(ctx, entries, func(p reader.WarmProgress) {
		mu.Lock()
		defer mu.Unlock()
		if p.Err != nil {
			failed++
			emit(WarmEvent{Bytes: cached, File: p.File, Error: p.Err.Error()})
			return
		}
		if !p.WasCached {
			cached += p.Bytes // a part found cached was counted above
		}
		if parts[p.File]--; parts[p.File] == 0 {
			emit(WarmEvent{Bytes: cached, File: p.File})
		}
	})
	close(stop)
	ticker.Wait()
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		c.log.Info("warm stopped", "err", err, "cached", cached, "took", time.Since(start).Round(time.Millisecond))
		return // the client is gone, or the mount is closing
	}
	// The running sum misses parts other readers cached meanwhile and
	// counts twice a part evicted and fetched again: the last word is
	// the cache's.
	cached = 0
	for _, e := range entries {
		got, _ := c.d.Reader.Cached(e)
		cached += got
	}
	c.log.Info("warm done", "files", len(entries), "failed", failed, "cached", cached, "took", time.Since(start).Round(time.Millisecond))
	emit(WarmEvent{Bytes: cached, Done: true, Failed: failed})
}
