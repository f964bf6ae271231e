// Package restore writes the files of a shard from the store straight to
// a local directory (DEST_DIR), through the engine a mount reads with
// (the fetch pool, retries, If-Match, the checks of every response,
// seekable zstd decoding, the part cache), without FUSE. It is the engine
// of `segfs restore`; the command line keeps the flags, the wiring of the
// engine and the output.
//
// Its steps: Plan lists the files; OpenDest prepares DEST_DIR; Dest.Run
// skips the files present and verified and writes the others.
//
// What it keeps true:
//   - A file is under its final name only once it is complete and has
//     passed the check of its Level: it is written to a temporary file in
//     the same directory (tempName), checked, synced and renamed into
//     place. A failure or an interrupt leaves finished files and, at
//     worst (a crash), temporary ones, which the next run replaces.
//   - DEST_DIR holds nothing but an earlier restore of the same source,
//     or nothing is written into it (OpenDest).
//   - Nothing is written, removed or renamed outside DEST_DIR, whoever
//     else can change what is below it: every name is reached from one
//     held descriptor without following a link (destDir).
//   - Memory is bounded by the configuration, whatever the shard's size:
//     at most Config.Workers pieces are fetched and written at once,
//     each into one buffer of the part size, and pieces are handed out
//     from a cursor, not a list.
//
// Names in its errors and log lines are the source's, unescaped: the
// command line escapes what it prints for people, and slog quotes them.
package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/segfs/segfs/fetcher"
	"github.com/segfs/segfs/reader"
)

// Level is what a file must pass before it gets its name, and to be
// skipped by a later run.
type Level string

// The levels.
const (
	// None checks the length alone.
	None Level = "none"
	// Footer also checks a Lucene file's footer, with the checksum the
	// layout's metadata records, and an inline file's bytes.
	Footer Level = "footer"
	// Deep also checks the CRC32 of every byte against the footer,
	// reading the file back.
	Deep Level = "deep"
)

// tempSuffix ends the name of a file being restored.
const tempSuffix = ".segfs-restore"

// maxNameLen is the longest file name element the kernel accepts.
const maxNameLen = 255

// PresentCheckers bounds the files of an earlier restore checked at once
// before the fetches start: local reads, each with a lucene.CheckChunk
// buffer at Deep.
const PresentCheckers = 4

// ErrRefused marks the errors of a DEST_DIR restore will not write
// into, or cannot prepare: nothing was written.
var ErrRefused = errors.New("DEST_DIR refused")

// refused wraps err in ErrRefused.
func refused(err error) error { return fmt.Errorf("%w: %w", ErrRefused, err) }

// DestConfig says what DEST_DIR is to hold.
type DestConfig struct {
	// Path is DEST_DIR; it is created if absent.
	Path string
	// Identity names the source (with its service) and, for a layout,
	// the shard: DEST_DIR is marked with it (destXattr).
	Identity string
	// KeepExtra keeps the files of an earlier restore of the source
	// that the source no longer has; by default they are removed.
	KeepExtra bool
	// CacheDir is the part cache's directory, "" for none; with
	// CacheMinFreeBytes and CacheMinFreeFraction (the cache's rule), it
	// says what free space the restore leaves on DEST_DIR's file system
	// when the cache shares it (spaceRule).
	CacheDir             string
	CacheMinFreeBytes    int64
	CacheMinFreeFraction float64
	Logger               *slog.Logger
}

// Dest is DEST_DIR, prepared for a restore: created, held open, locked
// against a second restore, checked and marked. Close releases it.
type Dest struct {
	dd    *destDir
	log   *slog.Logger
	space spaceRule
	// above are the directories above DEST_DIR holding one that
	// OpenDest created: their entries are synced with the rest.
	above []string
}

// OpenDest prepares DEST_DIR for files: it creates it if absent,
// resolves its symlinks once, holds it open and locks it, refuses it
// unless it is empty or holds an earlier restore of cfg.Identity (or
// nothing but files of the source, on a file system without extended
// attributes), marks it, and removes what an earlier restore of the
// source left that the source no longer has (unless cfg.KeepExtra).
// A refusal wraps ErrRefused.
func OpenDest(cfg DestConfig, files []*File) (*Dest, error) {
	log := cfg.Logger
	dest, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, refused(fmt.Errorf("DEST_DIR %s: %w", cfg.Path, err))
	}
	// How many directories MkdirAll creates, DEST_DIR and those above
	// it: the entry of each is synced with the rest, so a crash cannot
	// take the tree away. The directories above DEST_DIR are the
	// operator's: they are named by path, and only synced.
	created := 0
	for d := dest; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created++
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, refused(fmt.Errorf("DEST_DIR %s: %w", dest, err))
	}
	// A DEST_DIR that is a symlink (or under one) is checked, locked
	// and written where it leads, once: from here on every name below
	// it is reached from the descriptor opened on it (destDir).
	real, err := filepath.EvalSymlinks(dest)
	if err != nil {
		return nil, refused(fmt.Errorf("DEST_DIR %s: %w", dest, err))
	}
	if err := checkCacheOutside(real, cfg.CacheDir); err != nil {
		return nil, refused(err)
	}
	dd, err := openDestDir(real)
	if err != nil {
		return nil, refused(fmt.Errorf("DEST_DIR: %w", err))
	}
	d := &Dest{dd: dd, log: log, space: newSpaceRule(dd, cfg, log)}
	for i, p := 0, dest; i < created && p != filepath.Dir(p); i, p = i+1, filepath.Dir(p) {
		d.above = append(d.above, filepath.Dir(p))
	}
	if err := lockDest(dd); err != nil {
		dd.Close()
		return nil, err
	}
	extra, err := examineDest(dd, files, cfg.Identity, log)
	if err != nil {
		dd.Close()
		return nil, refused(err)
	}
	if err := removeExtra(dd, extra, cfg.KeepExtra, log); err != nil {
		dd.Close()
		return nil, err
	}
	return d, nil
}

// Path is DEST_DIR where its symlinks lead.
func (d *Dest) Path() string { return d.dd.path }

// Close releases DEST_DIR and its lock.
func (d *Dest) Close() error { return d.dd.Close() }

// Config is how a Dest is restored.
type Config struct {
	// PartSize is the size of the aligned pieces fetched and written,
	// the engine's part size; Workers how many are fetched and written
	// at once, each with a buffer of PartSize.
	PartSize int64
	Workers  int
	Level    Level
	// Progress draws a bar on it when it is a terminal; otherwise each
	// file is a log line.
	Progress *os.File
}

// Present checks each file an earlier run left under its final name
// (see present) and returns the files to fetch; the summary counts the
// others as skipped. A file that failed its check is removed first, so
// that a file under its final name is always verified. Only an
// interrupt or an error reading DEST_DIR is an error.
func (d *Dest) Present(ctx context.Context, files []*File, level Level, sum *Summary) ([]*File, error) {
	todo, replace, err := d.present(ctx, files, level, sum)
	if err != nil {
		return nil, err
	}
	for _, f := range replace {
		if err := d.dd.Remove(f.entry.Name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove %s, which failed its check: %w", d.dd.display(f.entry.Name), err)
		}
	}
	return todo, nil
}

// Run writes todo (of files, as Present returned them) through rd,
// counting into sum; it returns once every piece is done or ctx has
// ended, with the files it could not finish gone. A file's failure is
// in sum; the error is that of the final directory syncs.
func (d *Dest) Run(ctx context.Context, rd *reader.Reader, files, todo []*File, cfg Config, sum *Summary) error {
	var total int64
	for _, f := range todo {
		total += f.size
	}
	r := &restorer{rd: rd, partSize: cfg.PartSize, level: cfg.Level, dd: d.dd, log: d.log, files: len(todo),
		dirs: map[string]bool{}, sum: sum, space: d.space, above: d.above}
	// A file skipped as present may have been renamed by a run that was
	// killed before it synced the directory: its directories are synced
	// again, as if it were restored now.
	inTodo := make(map[*File]bool, len(todo))
	for _, f := range todo {
		inTodo[f] = true
	}
	for _, f := range files {
		if !inTodo[f] {
			r.markDirs(f)
		}
	}
	if len(todo) > 0 && cfg.Progress != nil && term.IsTerminal(int(cfg.Progress.Fd())) {
		r.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(cfg.Progress),
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
	r.run(ctx, todo, cfg.Workers)
	if r.bar != nil {
		r.bar.Finish()
	}
	err := r.syncDirs()
	slices.SortFunc(sum.Failed, func(a, b Failed) int { return cmp.Compare(a.Name, b.Name) })
	return err
}

// CheckPaths refuses a DEST_DIR inside a file:// source (each run would
// restore the last one's copy into itself, a level deeper) and a cache
// directory inside DEST_DIR (it would be foreign to the next run's
// check). Paths are compared where their symlinks lead, as far as they
// exist; cacheDir "" is none.
func CheckPaths(dest, source, cacheDir string) error {
	if s, err := fetcher.ParseSource(source); err == nil && s.Scheme == "file" {
		if inside(dest, s.Dir) {
			return fmt.Errorf("DEST_DIR %s is inside the source %s: restore into a directory outside it", dest, source)
		}
	}
	return checkCacheOutside(dest, cacheDir)
}

// checkCacheOutside refuses a cacheDir inside dest.
func checkCacheOutside(dest, cacheDir string) error {
	if cacheDir != "" && inside(cacheDir, dest) {
		return fmt.Errorf("--cache-dir %s is inside DEST_DIR %s; give it a directory of its own", cacheDir, dest)
	}
	return nil
}

// inside reports whether p is dir or below it, both resolved as far as
// they exist.
func inside(p, dir string) bool {
	rp, err1 := resolveExisting(p)
	rd, err2 := resolveExisting(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(rd, rp)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
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
