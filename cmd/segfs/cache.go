package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/segfs/segfs/cache"
	segfs "github.com/segfs/segfs/fs"
)

// openCache opens the part cache the mount flags name. Every source shares
// one directory: cache keys include the source.
func openCache(c *mountCmd, source string, log *slog.Logger) (*cache.Cache, error) {
	dir := c.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no --cache-dir and no user cache directory: %w", err)
		}
		// One directory per source, so that mounts of different sources
		// do not contend for one cache's lock.
		sum := sha256.Sum256([]byte(source))
		dir = filepath.Join(base, "segfs", hex.EncodeToString(sum[:8]))
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
	if errors.Is(err, cache.ErrInUse) {
		return nil, fmt.Errorf("--cache-dir %s is in use by another segfs mount; give each mount its own --cache-dir: %w", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("--cache-dir %s: %w", dir, err)
	}
	return pc, nil
}

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

// setMemoryLimit gives the Go runtime a soft memory limit derived from the
// flags (part buffers of the fetch pool and of the cache writers, the
// memory tier, and room for the rest), so that garbage does not grow the heap past what the
// configuration bounds. GOMEMLIMIT, when set, wins.
func setMemoryLimit(c *mountCmd, log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := int64(c.MaxFetches+segfs.DefaultWriters)*int64(c.PartSize) + int64(c.MemoryCache) + 16<<20
	debug.SetMemoryLimit(limit)
	log.Debug("memory limit", "bytes", limit)
}
