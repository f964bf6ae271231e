package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/segfs/segfs/cache"
	"github.com/segfs/segfs/fetcher"
	segfs "github.com/segfs/segfs/fs"
	"github.com/segfs/segfs/lucene"
	"github.com/segfs/segfs/prefetch"
	"github.com/segfs/segfs/reader"
)

// restoreCmd is `segfs restore`: a shard written from the store straight
// to a local directory, through the engine a mount reads with (the fetch
// pool, retries, If-Match, the checks of every response, seekable zstd
// decoding, the part cache), without FUSE.
//
// What it keeps true:
//   - A file is under its final name only once it is complete and has
//     passed the check of --verify: it is written to a temporary file in
//     the same directory (tempName), checked, synced and renamed into
//     place. A failure or an interrupt leaves finished files and, at
//     worst (a crash), temporary ones, which the next run replaces.
//   - DEST_DIR holds nothing but an earlier restore of the same source,
//     or restore writes nothing into it (checkDest).
//   - Memory is bounded by the flags, whatever the shard's size: at most
//     restoreWorkers(--max-fetches) pieces are fetched and written at
//     once, each into one buffer of --part-size, and pieces are handed
//     out from a cursor, not a list (restoreMemoryBound).
type restoreCmd struct {
	Source string `arg:"" name:"SOURCE" help:"The store: s3://bucket[/prefix] or file:///dir (with --layout opensearch, the repository of a remote segment store)."`
	Dest   string `arg:"" name:"DEST_DIR" help:"Local directory to write the files into: empty or absent (it is created), or holding an earlier restore of the same source, which is completed."`

	storeFlags  `embed:""`
	layoutFlags `embed:""`
	cacheFlags  `embed:""`

	NoCache     bool     `name:"no-cache" help:"Keep no part cache: fetched bytes go to DEST_DIR only. By default the parts also go to the part cache a mount of SOURCE with the same --cache-dir and --part-size reads, so that it starts warm (with the default --cache-size a shard larger than 10GiB keeps only its last parts)."`
	MaxFetches  int      `name:"max-fetches" default:"16" help:"Most remote reads in flight at once (the fetch pool); a quarter more pieces (at least 2 more) are fetched and written at once, so the pool has the next while some are written."`
	PartSize    byteSize `name:"part-size" default:"8MiB" help:"Size of the aligned pieces fetched, written and cached (a mount reads the cache only with the same --part-size)."`
	MetricsAddr string   `name:"metrics-addr" help:"Serve the restore's counters as JSON at http://ADDR/stats and in the Prometheus text format at http://ADDR/metrics while it runs, as segfs mount does. Off by default."`
	Verify      string   `name:"verify" default:"footer" enum:"none,footer,deep" help:"What a file must pass before it gets its name, and to be skipped by a later run: none (its length), footer (its length; for a Lucene file a valid footer, with the checksum the layout's metadata records), deep (also the CRC32 of every byte against the footer, reading the file back)."`
}

// Verification levels of --verify.
const (
	verifyNone   = "none"
	verifyFooter = "footer"
	verifyDeep   = "deep"
)

// tempSuffix ends the name of a file being restored.
const tempSuffix = ".segfs-restore"

// maxNameLen is the longest file name element the kernel accepts.
const maxNameLen = 255

// presentCheckers bounds the files of an earlier restore checked at once
// before the fetches start: local reads, each with a verifyChunk buffer.
const presentCheckers = 4

func (c *restoreCmd) validate() error {
	if err := checkFetchFlags(c.PartSize, c.MaxFetches); err != nil {
		return err
	}
	switch {
	case c.NoCache && c.CacheDir != "":
		return errors.New("--no-cache and --cache-dir do not go together")
	case c.Dest == "":
		return errors.New("DEST_DIR must not be empty")
	}
	if err := c.layoutFlags.check(); err != nil {
		return err
	}
	if _, err := fetcher.ParseSource(c.Source); err != nil {
		return err
	}
	if fi, err := os.Stat(c.Dest); err == nil && !fi.IsDir() {
		return fmt.Errorf("DEST_DIR %s is not a directory", c.Dest)
	}
	return c.checkCacheOutside(c.Dest)
}

// checkCacheOutside refuses a --cache-dir inside dest: it would be
// foreign to the next run's check of DEST_DIR. Both are compared where
// their symlinks lead (as far as they exist).
func (c *restoreCmd) checkCacheOutside(dest string) error {
	if c.CacheDir == "" {
		return nil
	}
	d, err1 := resolveExisting(dest)
	dir, err2 := resolveExisting(c.CacheDir)
	if rel, err := filepath.Rel(d, dir); err1 == nil && err2 == nil && err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return fmt.Errorf("--cache-dir %s is inside DEST_DIR %s; give it a directory of its own", c.CacheDir, c.Dest)
	}
	return nil
}

// resolveExisting returns p as an absolute path with the symlinks of its
// longest existing prefix resolved.
func resolveExisting(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for dir := abs; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if dir == filepath.Dir(dir) {
			return abs, nil
		}
		rest = append([]string{filepath.Base(dir)}, rest...)
	}
}

// Run restores SOURCE into DEST_DIR and prints a summary on stdout. Exit
// status: 0 when every file is restored and verified (or was already),
// 1 when any failed (each named on stderr), 2 on usage errors and a
// DEST_DIR that holds anything else, 130 when interrupted.
func (c *restoreCmd) Run(log *slog.Logger) error {
	if err := c.validate(); err != nil {
		return &exitError{2, err}
	}
	// SIGINT or SIGTERM cancels ctx: the fetches stop, the files being
	// written are removed, and every file under its final name is
	// complete and verified. A second signal kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)

	sum, err := c.restore(ctx, log, os.Stderr)
	if sum != nil {
		for _, f := range sum.failed {
			fmt.Fprintf(os.Stderr, "restore: %s: %v\n", f.name, f.err)
		}
		fmt.Println(sum)
	}
	switch {
	case ctx.Err() != nil:
		return &exitError{130, fmt.Errorf("interrupted: the files restored and verified stay under their names, the others are not there; a new restore fetches only those: %w", context.Cause(ctx))}
	case err != nil:
		return err
	case len(sum.failed) > 0:
		return &exitError{1, fmt.Errorf("%d of %d files failed; the others are restored and verified, and a new restore fetches only the failed ones", len(sum.failed), sum.files)}
	}
	return nil
}

// restoreFile is one file of the source and its restore.
type restoreFile struct {
	entry    reader.Entry
	size     int64
	expected *uint64 // the checksum the layout's metadata records, if any
	// path and temp are the local paths of the final name and of the
	// temporary file it is written to.
	path, temp string

	// Guarded by mu while the file is written.
	mu sync.Mutex
	f  *os.File // the temporary file, open from its first piece to its last
	// direct is the temporary file opened again with O_DIRECT, for the
	// whole 4096-byte blocks of aligned pieces; nil where the file
	// system refuses it.
	direct *os.File
	left   int   // pieces not yet done
	err    error // the first failure
	// interrupted: err was recorded once the restore's context had ended.
	interrupted bool
	refused     error // set by planRestore: the file fails without a fetch
	done        bool  // renamed into place, or given up and its temporary file removed
	start       time.Time
}

// piece is one unit of work: bytes [off, off+n) of a file, fetched and
// written at their offset. A plain object's pieces are its aligned parts;
// a seekable zstd file is one piece read in order through one handle (its
// logical ranges do not follow its compressed parts, and a sequential
// read lets the engine fetch each compressed part once, ahead of the
// decodes, as it does for a copy out of a mount); an inline file is one
// piece written from memory.
type piece struct {
	f      *restoreFile
	off, n int64
}

// restoreSummary is what a restore did.
type restoreSummary struct {
	files         int // files of the source
	restored      int
	restoredBytes int64
	skipped       int
	skippedBytes  int64
	failed        []failedFile
	took          time.Duration
	gets          int64
	getBytes      int64
	retries       int64
}

type failedFile struct {
	name string
	err  error
}

func (s *restoreSummary) String() string {
	rate := 0.0
	if secs := s.took.Seconds(); secs > 0 {
		rate = float64(s.restoredBytes) / secs / 1e6
	}
	return fmt.Sprintf("restore: %d of %d files restored (%d bytes, %s), %d already present and verified (%d bytes), %d failed; took %v, %.1f MB/s; GETs %d (%d bytes), retries %d",
		s.restored, s.files, s.restoredBytes, humanBytes(s.restoredBytes), s.skipped, s.skippedBytes, len(s.failed),
		s.took.Round(time.Millisecond), rate, s.gets, s.getBytes, s.retries)
}

// restore does the work of Run; progress goes to errOut (a bar on a
// terminal, else log lines). The summary is nil when nothing was
// attempted; an error is returned only for what stops the whole
// restore before or around the fetches, a file's failure is in the
// summary.
func (c *restoreCmd) restore(ctx context.Context, log *slog.Logger, errOut *os.File) (*restoreSummary, error) {
	start := time.Now()
	src, err := openSource(ctx, c.Source, c.layoutFlags, c.storeFlags.config(0, c.MaxFetches*2, log), c.MaxFetches, false, log)
	if err != nil {
		return nil, err
	}
	dest, err := filepath.Abs(c.Dest)
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("DEST_DIR %s: %w", c.Dest, err)}
	}
	files, err := planRestore(src, dest, log)
	if err != nil {
		return nil, err
	}

	// DEST_DIR: created if absent, locked against a second restore, and
	// checked before anything is written into it.
	// How many directories MkdirAll creates, DEST_DIR and those above
	// it: the entry of each is synced with the rest, so a crash cannot
	// take the tree away. Counted, not named: DEST_DIR is named where
	// its symlinks lead below.
	created := 0
	for d := dest; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created++
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, &exitError{2, fmt.Errorf("DEST_DIR %s: %w", dest, err)}
	}
	// A DEST_DIR that is a symlink (or under one) is checked, locked
	// and written where it leads: the walk of checkDest does not follow
	// a link at its root, and would pass any directory behind one.
	if real, err := filepath.EvalSymlinks(dest); err != nil {
		return nil, &exitError{2, fmt.Errorf("DEST_DIR %s: %w", dest, err)}
	} else if real != dest {
		dest = real
		if files, err = planRestore(src, dest, log); err != nil {
			return nil, err
		}
	}
	if err := c.checkCacheOutside(dest); err != nil {
		return nil, &exitError{2, err}
	}
	lock, err := lockDest(dest)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := checkDest(dest, files); err != nil {
		return nil, &exitError{2, err}
	}
	if err := claimDest(dest, c.identity(src), log); err != nil {
		return nil, &exitError{2, err}
	}

	sum := &restoreSummary{files: len(files)}
	todo, replace, err := c.present(ctx, files, sum, log)
	if err != nil {
		return nil, err
	}

	setMemoryLimit(restoreMemoryBound(c, src.keys), log)
	var pc reader.Cache = discardCache{}
	cacheDir := "none (--no-cache)"
	if !c.NoCache {
		dc, err := openCache(c.cacheFlags, fetcher.CacheSource(src.store), log)
		if err != nil {
			return nil, err
		}
		defer dc.Close()
		pc, cacheDir = dc, dc.Dir()
	}
	sched := prefetch.New(prefetch.Config{Workers: c.MaxFetches})
	defer sched.Close()
	rd, err := reader.New(src.store, pc, sched, reader.Config{
		Source:   fetcher.CacheSource(src.store),
		PartSize: int64(c.PartSize),
		// The smallest bound: no part fits, so a part the disk cache
		// refuses is dropped, not kept in memory (0 means the default).
		// A restore reads each part once.
		MemoryLimit: 1,
		Prefetch:    prefetch.None,
		// The pieces already keep the pool busy: a part is one GET.
		SplitSize: 0,
		// A frame is decoded for the piece that reads it; none is kept
		// for later reads.
		Frames: reader.FrameConfig{CacheBytes: 0},
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	// Closed before the scheduler and the cache (deferred above): the
	// parts handed to its writers are stored first.
	defer rd.Close()
	if c.MetricsAddr != "" {
		dc, _ := pc.(*cache.Cache) // nil with --no-cache
		m, err := startMetrics(c.MetricsAddr, "", src.store, rd, nil, sched, dc, log)
		if err != nil {
			return nil, err
		}
		defer m.Close()
	}

	// Files that failed the check of an earlier run's copy go before
	// their fetch: a file under its final name is always verified.
	for _, f := range replace {
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove %s, which failed its check: %w", f.path, err)
		}
	}
	var total int64
	for _, f := range todo {
		total += f.size
	}
	log.Info("restoring", "source", src.store.String(), "dest", dest, "files", len(todo), "bytes", total,
		"present", sum.skipped, "verify", c.Verify, "cache", cacheDir, "max_fetches", c.MaxFetches, "part_size", int64(c.PartSize))

	r := &restorer{rd: rd, partSize: int64(c.PartSize), level: c.Verify, dest: dest, log: log, files: len(todo),
		dirs: map[string]bool{}, sum: sum}
	// The directories holding those MkdirAll made.
	for i, d := 0, dest; i < created && d != filepath.Dir(d); i, d = i+1, filepath.Dir(d) {
		r.dirs[filepath.Dir(d)] = true
	}
	// A file skipped as present may have been renamed by a run that was
	// killed before it synced the directory: its directories are synced
	// again, as if it were restored now.
	inTodo := make(map[*restoreFile]bool, len(todo))
	for _, f := range todo {
		inTodo[f] = true
	}
	for _, f := range files {
		if !inTodo[f] {
			r.markDirs(f)
		}
	}
	if len(todo) > 0 && term.IsTerminal(int(errOut.Fd())) {
		r.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(errOut),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetDescription(fmt.Sprintf("0/%d files", len(todo))),
			progressbar.OptionClearOnFinish(),
		)
	}
	for _, f := range files {
		if f.refused != nil {
			f.err = f.refused
			r.failed(f)
		}
	}
	r.run(ctx, todo, restoreWorkers(c.MaxFetches))
	if r.bar != nil {
		r.bar.Finish()
	}
	syncErr := r.syncDirs()
	counters := src.store.Counters()
	sum.gets, sum.getBytes, sum.retries = counters.Gets.Load(), counters.GetBytes.Load(), counters.Retries.Load()
	sum.took = time.Since(start)
	slices.SortFunc(sum.failed, func(a, b failedFile) int { return cmp.Compare(a.name, b.name) })
	return sum, syncErr
}

// planRestore returns the files the restore writes: those a mount of the
// source shows (segfs.Shown), smallest first, then by name, each with its
// local paths below dest. A source whose names would collide with the
// temporary files is refused.
func planRestore(src *source, dest string, log *slog.Logger) ([]*restoreFile, error) {
	expected := map[string]uint64{}
	if src.shard != nil {
		for _, f := range src.shard.Metadata.Files {
			expected[f.Name] = f.Checksum
		}
	}
	entries := segfs.Shown(src.entries, log)
	files := make([]*restoreFile, 0, len(entries))
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		f := &restoreFile{entry: e, size: e.Size(),
			path: filepath.Join(dest, filepath.FromSlash(e.Name)),
			temp: filepath.Join(dest, filepath.FromSlash(tempName(e.Name)))}
		// A size no object can have (a listing's lie) fails its file
		// alone, before its piece count could overflow; it is neither
		// checked nor fetched.
		if n := f.size; n < 0 || n > fetcher.MaxObjectSize {
			f.refused = fmt.Errorf("the source lists it with %d bytes, more than an object holds (%d) or less than none", n, int64(fetcher.MaxObjectSize))
			f.size = 0
		}
		// segments_N of a layout is its metadata's bytes, not the blob
		// the metadata's checksum is of.
		if sum, ok := expected[e.Name]; ok && e.Inline == nil {
			f.expected = &sum
		}
		files = append(files, f)
		names[e.Name] = true
	}
	dirs := dirsOf(files)
	for _, f := range files {
		if t := tempName(f.entry.Name); names[t] || dirs[t] {
			return nil, fmt.Errorf("the source has %s, the name segfs restore writes %s to before renaming it: it cannot be restored", t, f.entry.Name)
		}
	}
	sort.SliceStable(files, func(i, j int) bool {
		if files[i].size != files[j].size {
			return files[i].size < files[j].size
		}
		return files[i].entry.Name < files[j].entry.Name
	})
	return files, nil
}

// tempName returns the name, relative to DEST_DIR and '/'-separated, of
// the temporary file name is written to before it is renamed into place:
// in name's own directory, so that the rename never crosses a file
// system, and hidden: ".BASE.segfs-restore", or for a base too long for
// that, a hash of it in its place.
func tempName(name string) string {
	dir, base := path.Split(name)
	t := "." + base + tempSuffix
	if len(t) > maxNameLen {
		sum := sha256.Sum256([]byte(base))
		t = "." + hex.EncodeToString(sum[:16]) + tempSuffix
	}
	return dir + t
}

// dirsOf returns every directory the files' names imply, '/'-separated
// and relative to DEST_DIR, DEST_DIR itself not included.
func dirsOf(files []*restoreFile) map[string]bool {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.entry.Name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return dirs
}

// flock applies how (unix.LOCK_*) to f's flock, again when a signal
// interrupts it.
func flock(f *os.File, how int) error {
	for {
		if err := unix.Flock(int(f.Fd()), how); err != unix.EINTR {
			return err
		}
	}
}

// lockDest takes an exclusive lock of DEST_DIR for the restore's time,
// so that two restores never write into one directory at once.
func lockDest(dest string) (*os.File, error) {
	d, err := os.Open(dest)
	if err != nil {
		return nil, fmt.Errorf("DEST_DIR %s: %w", dest, err)
	}
	err = flock(d, unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == unix.EWOULDBLOCK:
		d.Close()
		return nil, fmt.Errorf("DEST_DIR %s: another segfs restore is writing into it", dest)
	case err != nil:
		d.Close()
		return nil, fmt.Errorf("DEST_DIR %s: lock: %w", dest, err)
	}
	return d, nil
}

// destXattr names the source a DEST_DIR holds a restore of, on the
// directory itself: no file in it, which an index would hold as its own.
const destXattr = "user.segfs.restore"

// identity names what a restore restores, for destXattr: the source
// (without credentials) and, for a layout, the shard.
func (c *restoreCmd) identity(src *source) string {
	id := src.store.String()
	if c.Layout != "plain" {
		id += fmt.Sprintf(" layout=%s index-uuid=%s shard=%d", c.Layout, c.IndexUUID, c.Shard)
	}
	return id
}

// claimDest refuses a DEST_DIR that holds a restore of another source,
// or that is not empty and no restore made, then marks it as holding a
// restore of id, before anything is written. checkDest has passed: only
// names of the source's files are there, but those can be another
// shard's, whose files a restore would replace. On a file system
// without user extended attributes, checkDest's is the only check.
func claimDest(dest, id string, log *slog.Logger) error {
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(dest, destXattr, buf)
	switch {
	case err == nil && string(buf[:n]) == id:
		return nil
	case errors.Is(err, unix.ENOTSUP):
		log.Debug("DEST_DIR's file system keeps no extended attributes: it is checked by its files' names alone", "dest", dest)
		return nil
	case err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ERANGE):
		return fmt.Errorf("DEST_DIR %s: %w", dest, err)
	}
	// Another source's mark, or none: only an empty DEST_DIR is taken.
	ents, rerr := os.ReadDir(dest)
	switch {
	case rerr != nil:
		return fmt.Errorf("DEST_DIR %s: %w", dest, rerr)
	case len(ents) > 0 && err == nil:
		return fmt.Errorf("DEST_DIR %s holds a restore of %s, not of %s: nothing was written", dest, buf[:n], id)
	case len(ents) > 0:
		return fmt.Errorf("DEST_DIR %s is not empty and no segfs restore wrote it (it has no %s attribute): restore into an empty directory, or, if it holds files of this source, mark it with `setfattr -n %s -v %q %s`; nothing was written", dest, destXattr, destXattr, id, dest)
	}
	if err := unix.Setxattr(dest, destXattr, []byte(id), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
		return fmt.Errorf("DEST_DIR %s: mark it as a restore of %s: %w", dest, id, err)
	}
	return nil
}

// checkDest refuses a DEST_DIR that holds anything but an earlier
// restore of files: every entry below it must be a regular file under
// the final or the temporary name of one of them, or a directory one of
// them is in. It only reads, and names the first other entry in lexical
// order.
func checkDest(dest string, files []*restoreFile) error {
	ok := make(map[string]bool, 2*len(files))
	for _, f := range files {
		ok[f.entry.Name] = true
		ok[tempName(f.entry.Name)] = true
	}
	dirs := dirsOf(files)
	var refused error // the first other entry, stopping the walk
	foreign := func(rel, what string) error {
		refused = fmt.Errorf("DEST_DIR %s holds %s, %s: segfs restore writes only into an empty directory or one holding an earlier restore of the same source; nothing was written", dest, rel, what)
		return refused
	}
	err := filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dest {
			return nil
		}
		rel, err := filepath.Rel(dest, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && dirs[rel]:
			return nil
		case d.IsDir():
			return foreign(rel+"/", "a directory no file of the source is in")
		case d.Type().IsRegular() && ok[rel]:
			return nil
		case d.Type().IsRegular():
			return foreign(rel, "a file the source does not have")
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return foreign(rel, "a symbolic link, not a regular file")
		}
		return foreign(rel, "a special file, not a regular file")
	})
	switch {
	case err == nil, err == refused:
		return err
	}
	return fmt.Errorf("DEST_DIR %s: %w", dest, err)
}

// present checks each file an earlier run left under its final name, at
// most presentCheckers at once: one of the right length and modification
// time (when the store gives one) that passes the check of --verify is
// skipped, and its stale temporary file, if any, removed; any other is
// to be replaced. It returns the files to fetch, and those of them whose
// present copy must go first. Only an interrupt or an error reading
// DEST_DIR is an error.
func (c *restoreCmd) present(ctx context.Context, files []*restoreFile, sum *restoreSummary, log *slog.Logger) (todo, replace []*restoreFile, err error) {
	type verdict struct {
		skip bool
		why  string // why a present copy is replaced; "" for none there
	}
	verdicts := make([]verdict, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(presentCheckers)
	for i, f := range files {
		if f.refused != nil {
			continue
		}
		g.Go(func() error {
			skip, why, err := c.checkPresent(gctx, f)
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
			sum.skipped++
			sum.skippedBytes += f.size
			log.Info("present and verified; skipped", "file", f.entry.Name, "size", f.size)
			if err := os.Remove(f.temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("remove the stale %s: %w", f.temp, err)
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
func (c *restoreCmd) checkPresent(ctx context.Context, f *restoreFile) (skip bool, why string, err error) {
	if err := ctx.Err(); err != nil {
		return false, "", err
	}
	fi, err := os.Lstat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, "", nil
	case err != nil:
		return false, "", fmt.Errorf("DEST_DIR: %w", err)
	case !fi.Mode().IsRegular():
		return false, "", fmt.Errorf("DEST_DIR: %s is not a regular file", f.path)
	case fi.Size() != f.size:
		return false, fmt.Sprintf("%d bytes, the source's are %d", fi.Size(), f.size), nil
	}
	if mt := f.entry.Obj.ModTime; !mt.IsZero() && fi.ModTime().Unix() != mt.Unix() {
		return false, fmt.Sprintf("modified %v, the source's %v", fi.ModTime().UTC(), mt.UTC()), nil
	}
	file, err := os.OpenFile(f.path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, "", fmt.Errorf("DEST_DIR: %w", err)
	}
	defer file.Close()
	var buf []byte
	if c.Verify == verifyDeep {
		buf = make([]byte, verifyChunk)
	}
	if err := checkRestored(ctx, f, file, c.Verify, buf); err != nil {
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
func checkRestored(ctx context.Context, f *restoreFile, file *os.File, level string, buf []byte) error {
	if level == verifyNone {
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
	if level != verifyDeep {
		buf = nil
	}
	footer, err := checkLucene(ctx, read, f.size, f.expected, buf, nil)
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

// restorer runs the pieces of a restore. Its counters and sum are
// guarded by mu; each file's state by the file's own lock.
type restorer struct {
	rd       *reader.Reader
	partSize int64
	level    string
	dest     string
	log      *slog.Logger
	bar      *progressbar.ProgressBar // nil off a terminal
	files    int                      // files to restore, for the bar

	directBytes atomic.Int64 // bytes written with O_DIRECT

	mu       sync.Mutex
	finished int             // files renamed into place or failed
	dirs     map[string]bool // directories a file was renamed into, and those above them
	sum      *restoreSummary
}

// run fetches and writes the files' pieces, smallest files first, with at
// most workers goroutines, each holding one buffer of the part size, and
// returns once all of them have returned. Files it could not finish,
// because ctx ended, have their temporary files removed.
func (r *restorer) run(ctx context.Context, files []*restoreFile, workers int) {
	whole := func(f *restoreFile) bool { return f.entry.Inline != nil || f.entry.Table != nil || f.size == 0 }
	npieces := 0
	for _, f := range files {
		f.left = 1
		if !whole(f) {
			f.left = int((f.size + r.partSize - 1) / r.partSize) // f.size <= fetcher.MaxObjectSize (planRestore)
		}
		npieces += f.left
	}
	// The pieces are handed out from a cursor (a file and an offset), in
	// order: a list of them would grow with the shard, not the flags.
	var mu sync.Mutex
	fi, off := 0, int64(0)
	nextPiece := func() (piece, bool) {
		mu.Lock()
		defer mu.Unlock()
		if fi >= len(files) {
			return piece{}, false
		}
		f := files[fi]
		p := piece{f, off, f.size - off}
		if !whole(f) {
			p.n = min(r.partSize, f.size-off)
		}
		if off += p.n; off >= f.size {
			fi, off = fi+1, 0
		}
		return p, true
	}
	var wg sync.WaitGroup
	for range min(workers, npieces) {
		wg.Go(func() {
			buf := make([]byte, r.partSize)
			for ctx.Err() == nil {
				p, ok := nextPiece()
				if !ok {
					return
				}
				r.pieceDone(ctx, p, r.write(ctx, p, buf), buf)
			}
		})
	}
	wg.Wait()
	for _, f := range files {
		f.mu.Lock()
		if f.f != nil && !f.done {
			r.discard(f)
		}
		f.mu.Unlock()
	}
}

// write fetches piece p through buf and writes it at its offset into the
// file's temporary file, which the file's first piece creates.
func (r *restorer) write(ctx context.Context, p piece, buf []byte) error {
	f := p.f
	out, err := r.tempFile(f)
	if err != nil {
		return err
	}
	if f.entry.Inline != nil {
		if _, err := out.WriteAt(f.entry.Inline, 0); err != nil {
			return fmt.Errorf("write %s: %w", f.temp, err)
		}
		r.progress(len(f.entry.Inline))
		return nil
	}
	h := r.rd.Open(f.entry, nil, 0, true)
	defer h.Close()
	for off, end := p.off, p.off+p.n; off < end; {
		data, release, err := h.Read(ctx, buf[:min(int64(len(buf)), end-off)], off)
		if err == nil && len(data) == 0 {
			err = fmt.Errorf("the source's file ends at %d of %d bytes", off, f.size)
		}
		if err != nil {
			if release != nil {
				release()
			}
			return fmt.Errorf("fetch: %w", err)
		}
		err = r.writeAt(f, out, data, off)
		if release != nil {
			release()
		}
		if err != nil {
			return fmt.Errorf("write %s at %d: %w", f.temp, off, err)
		}
		r.progress(len(data))
		off += int64(len(data))
	}
	return nil
}

// tempFile returns f's temporary file, creating it (and the directories
// above it) for the first piece: an earlier run's is replaced. A file
// that failed already gives its error, and its later pieces do nothing.
func (r *restorer) tempFile(f *restoreFile) (*os.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if f.f != nil {
		return f.f, nil
	}
	f.start = time.Now()
	if err := os.MkdirAll(filepath.Dir(f.temp), 0o755); err != nil {
		return nil, err
	}
	// O_NOFOLLOW: whatever appeared there since checkDest, nothing is
	// written through a link.
	// An earlier run's temporary file is unlinked, not truncated: a
	// file linked there from elsewhere is left as it is, and the new one
	// is restore's own (O_EXCL).
	if err := os.Remove(f.temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	out, err := os.OpenFile(f.temp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	f.f = out
	// Whole parts go to the disk with O_DIRECT: from the part's own
	// buffer, with no copy into the page cache and no writeback of it
	// at the fsync, which on this path is what bounds a restore
	// (docs/BENCH.md). A file system that refuses it is written through
	// the page cache.
	// Opened through the descriptor, not the name: the same inode,
	// whatever happens to the name meanwhile.
	if d, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", out.Fd()), os.O_WRONLY|syscall.O_DIRECT, 0); err == nil {
		f.direct = d
	}
	return out, nil
}

// directAlign is the alignment O_DIRECT needs of a write's offset,
// length and buffer address.
const directAlign = 4096

// writeAt writes data at off into f's temporary file: the whole
// aligned blocks through the O_DIRECT descriptor when offset and
// buffer allow it, the rest (a file's tail) through the page cache.
func (r *restorer) writeAt(f *restoreFile, out *os.File, data []byte, off int64) error {
	if n := len(data) &^ (directAlign - 1); f.direct != nil && n > 0 && off%directAlign == 0 &&
		uintptr(unsafe.Pointer(&data[0]))%directAlign == 0 {
		w, err := f.direct.WriteAt(data[:n], off)
		if err != nil && !errors.Is(err, syscall.EINVAL) {
			return err
		}
		r.directBytes.Add(int64(w))
		data, off = data[w:], off+int64(w)
	}
	if len(data) == 0 {
		return nil
	}
	_, err := out.WriteAt(data, off)
	return err
}

// pieceDone records a piece's outcome; the file's last one seals it (or
// gives it up) on this goroutine, with buf for a deep check.
func (r *restorer) pieceDone(ctx context.Context, p piece, err error, buf []byte) {
	f := p.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil && f.err == nil {
		f.err, f.interrupted = err, ctx.Err() != nil
	}
	if f.left--; f.left > 0 {
		return
	}
	if f.err == nil {
		f.err = r.seal(ctx, f, buf)
		f.interrupted = f.err != nil && ctx.Err() != nil
	}
	if f.err != nil {
		r.giveUp(f)
		return
	}
	f.done = true
	r.restored(f)
}

// giveUp removes the temporary file of f, which failed, and counts it
// failed unless an interrupt is what failed it: those are not restored,
// not failed. A failure first recorded after the interrupt is taken as
// its casualty, whatever the error says (not every path keeps the
// context's error). f.mu is held.
func (r *restorer) giveUp(f *restoreFile) {
	r.discard(f)
	if !f.interrupted && !errors.Is(f.err, context.Canceled) {
		r.failed(f)
	}
}

// seal checks f's complete temporary file at the verify level, gives it
// the object's modification time, syncs it and renames it into place.
// f.mu is held.
func (r *restorer) seal(ctx context.Context, f *restoreFile, buf []byte) error {
	fi, err := f.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != f.size {
		return fmt.Errorf("wrote %d bytes, the file has %d", fi.Size(), f.size)
	}
	if err := checkRestored(ctx, f, f.f, r.level, buf); err != nil {
		return err
	}
	if mt := f.entry.Obj.ModTime; !mt.IsZero() {
		if err := os.Chtimes(f.temp, mt, mt); err != nil {
			return err
		}
	}
	if f.direct != nil {
		if err := f.direct.Close(); err != nil {
			return fmt.Errorf("close %s: %w", f.temp, err)
		}
		f.direct = nil
	}
	if err := f.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", f.temp, err)
	}
	err = f.f.Close()
	f.f = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", f.temp, err)
	}
	if err := os.Rename(f.temp, f.path); err != nil {
		return err
	}
	return nil
}

// discard closes and removes f's temporary file, if it has one: it is
// not complete, or failed its check. f.mu is held.
func (r *restorer) discard(f *restoreFile) {
	f.done = true
	if f.direct != nil {
		f.direct.Close()
		f.direct = nil
	}
	if f.f != nil {
		f.f.Close()
		f.f = nil
	}
	if err := os.Remove(f.temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Warn("could not remove a temporary file; the next restore replaces it", "file", f.temp, "err", err)
	}
}

// progress counts n bytes written.
func (r *restorer) progress(n int) {
	if r.bar != nil {
		r.bar.Add(n)
	}
}

// restored counts f as renamed into place, and its directories as to
// be synced.
func (r *restorer) restored(f *restoreFile) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum.restored++
	r.sum.restoredBytes += f.size
	r.markDirs(f)

	r.fileEnded()
	if r.bar == nil {
		r.log.Info("restored", "file", f.entry.Name, "size", f.size, "took", time.Since(f.start).Round(time.Millisecond))
	}
}

// failed counts f as failed.
func (r *restorer) failed(f *restoreFile) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sum.failed = append(r.sum.failed, failedFile{f.entry.Name, f.err})
	r.fileEnded()
	if r.bar == nil {
		r.log.Warn("restore failed", "file", f.entry.Name, "err", f.err)
	}
}

// fileEnded moves the bar's count of files on. r.mu is held.
func (r *restorer) fileEnded() {
	r.finished++
	if r.bar != nil {
		r.bar.Describe(fmt.Sprintf("%d/%d files", r.finished, r.files))
	}
}

// syncDirs syncs every directory a file was renamed into, and those
// above it up to DEST_DIR (which hold the entries of the directories
// created), so the renames outlast a crash.
func (r *restorer) syncDirs() error {
	r.mu.Lock()
	dirs := make([]string, 0, len(r.dirs))
	for d := range r.dirs {
		dirs = append(dirs, d)
	}
	r.mu.Unlock()
	sort.Strings(dirs)
	var errs []error
	for _, d := range dirs {
		if err := syncDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// discardCache is the part cache of --no-cache: it stores every part into
// nothing. PutSummed succeeds, so that the engine treats a fetched part as
// it treats one the disk took: a sequential reader's stream holds it
// while within reach (a seekable zstd file's compressed parts fetched
// ahead), and otherwise it is let go once read. Refusing it
// (cache.ErrNoSpace) would hand it to the memory tier instead, which
// restore bounds to nothing, and a part fetched ahead would be fetched
// again. Nothing is ever found in it.
type discardCache struct{}

var _ reader.Cache = discardCache{}

func (discardCache) ReadAt(context.Context, cache.Key, []byte, int64) (int, bool, error) {
	return 0, false, nil
}
func (discardCache) NewSums([]byte) *cache.Sums { return nil }
func (discardCache) PutSummed(context.Context, cache.Key, []byte, *cache.Sums) error {
	return nil
}
func (discardCache) Contains(cache.Key) bool { return false }
func (discardCache) WillNeed(cache.Key)      {}
func (discardCache) Pin(string, string)      {}
func (discardCache) Unpin(string, string)    {}
func (discardCache) Promote(context.Context, cache.ObjectKey, int64) error {
	return cache.ErrIncomplete
}
func (discardCache) OpenObject(cache.ObjectKey) (*os.File, bool) { return nil, false }

// restoreWorkers is how many pieces are fetched and written at once
// for a pool of fetches: a quarter more than the pool (at least 2), so
// that while some write a part they received the pool has the next
// parts to fetch, and no connection waits on the disk.
func restoreWorkers(fetches int) int { return fetches + max(2, fetches/4) }

// restoreMemoryBound is what bounds a restore's memory, by the same
// terms as a mount's (memoryBoundOf): the engine's part buffers as a
// mount's, and restore's own buffer of a part per worker; cold small
// reads' GETs; no memory tier (restore's is bounded to nothing) and no
// range tier (no segment prefetch); seekable zstd decodes, with no frame
// kept; the listing; the part cache's index, if any; the checks of
// an earlier run's files; and --metrics-addr's connections, if served.
func restoreMemoryBound(c *restoreCmd, keys int) memoryBound {
	ps, w := int64(c.PartSize), int64(c.MaxFetches)
	b := memoryBound{
		// The engine's 3w+writers+1 and restore's own buffer per
		// worker (restoreWorkers).
		Parts:  (3*w+int64(restoreWorkers(c.MaxFetches))+reader.DefaultWriters+1)*ps + presentCheckers*verifyChunk,
		Ranges: w * (ps / 8),
		Frames: reader.DefaultDecodeMemory,
		Tree:   int64(keys) * segfs.TreeBytesPerKey,
		Base:   baseBytes,
	}
	if !c.NoCache {
		b.Index = (int64(c.CacheSize)/ps + int64(keys)) * indexBytesPerPart
	}
	if c.MetricsAddr != "" {
		b.Listeners = metricsLimits().memory()
	}
	return b
}

// markDirs records the directories from f's up to DEST_DIR for the
// final sync. r.mu is held, or r is not yet shared.
func (r *restorer) markDirs(f *restoreFile) {
	for d := filepath.Dir(f.path); !r.dirs[d]; d = filepath.Dir(d) {
		r.dirs[d] = true
		if d == r.dest || len(d) <= len(r.dest) {
			break
		}
	}
}
