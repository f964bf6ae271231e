package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/segfs/segfs/cache"
)

// cacheFlags name a disk part cache: the mount's, and that of the
// commands that read through one (verify --deep).
type cacheFlags struct {
	CacheDir     string   `name:"cache-dir" help:"Directory of the persistent part cache (0700; kept across mounts). Default: segfs/<hash of SOURCE and its S3 service> under the user's cache directory ($XDG_CACHE_HOME or ~/.cache)."`
	CacheSize    byteSize `name:"cache-size" default:"10GiB" help:"Most bytes the part cache may hold on disk; least recently used parts are evicted."`
	CacheMinFree string   `name:"cache-min-free" default:"5%" help:"Free space to leave on the cache's file system, as a size or a percentage of the file system."`
	CacheIO      string   `name:"cache-io" default:"direct" enum:"direct,buffered" help:"How part data moves to and from the cache disk: direct (O_DIRECT for writes and for reads of 128KiB or more, so the page cache holds no second copy of bytes the mounted files' own page cache has; small reads stay buffered; falls back to buffered where the file system refuses it) or buffered."`
}

// openCache opens the part cache the flags name. source is the
// store's cache name (fetcher.CacheSource: endpoint, bucket and prefix),
// which the cache keys include, so sources may share a directory; by
// default each has its own. A directory the cache refuses fails the mount
// with one line naming it and the reason, and nothing in it is touched.
func openCache(c cacheFlags, source string, log *slog.Logger) (*cache.Cache, error) {
	dir, err := c.dir(source)
	if err != nil {
		return nil, err
	}
	minFree, fraction, err := parseMinFree(c.CacheMinFree)
	if err != nil {
		return nil, err
	}
	pc, err := cache.Open(cache.Config{
		Dir:             dir,
		MaxBytes:        int64(c.CacheSize),
		MinFree:         minFree,
		MinFreeFraction: fraction,
		IO:              c.CacheIO,
		Logger:          log,
	})
	var de *cache.DirError
	switch {
	case errors.Is(err, cache.ErrInUse):
		return nil, &lineError{fmt.Sprintf("--cache-dir %s is in use by another segfs mount; give each mount its own --cache-dir", dir), err}
	case errors.As(err, &de):
		return nil, &lineError{fmt.Sprintf("--cache-dir %s: %s", dir, de.Reason), err}
	case err != nil:
		return nil, fmt.Errorf("--cache-dir %s: %w", dir, err)
	}
	return pc, nil
}

// dir is the cache directory of source the flags name: --cache-dir, or
// one of source's own under the user's cache directory, so that mounts
// of different sources do not contend for one cache's lock.
func (c cacheFlags) dir(source string) (string, error) {
	if c.CacheDir != "" {
		return c.CacheDir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no --cache-dir and no user cache directory: %w", err)
	}
	sum := sha256.Sum256([]byte(source))
	return filepath.Join(base, "segfs", hex.EncodeToString(sum[:8])), nil
}

// lineError is an error whose message is written for the user in full,
// without the text of the error it wraps (which would repeat it).
type lineError struct {
	msg string
	err error
}

func (e *lineError) Error() string { return e.msg }
func (e *lineError) Unwrap() error { return e.err }

// parseMinFree parses --cache-min-free: "5%" (a fraction of the file
// system), "0" (no floor) or a size such as "2GiB".
func parseMinFree(s string) (bytes int64, fraction float64, err error) {
	if pct, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		v, err := strconv.ParseFloat(pct, 64)
		if err != nil || v < 0 || v >= 100 {
			return 0, 0, fmt.Errorf("--cache-min-free %q: want a percentage below 100%% or a size", s)
		}
		if v == 0 {
			return -1, 0, nil
		}
		return 0, v / 100, nil
	}
	n, err := parseByteSize(s)
	if err != nil {
		return 0, 0, fmt.Errorf("--cache-min-free: %w", err)
	}
	if n == 0 {
		return -1, 0, nil
	}
	return n, 0, nil
}
