package fetcher

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Sub returns the store rooted at sub, a key prefix below st's root,
// sharing st's client, connections and counters: a repository mount
// opens one store for each shard it resolves, and none of them may cost
// a client (its connection pool, its goroutines) of its own. An empty
// sub is st itself. sub must be a clean relative path.
func Sub(st Store, sub string) (Store, error) {
	if sub == "" {
		return st, nil
	}
	if err := checkKey(sub); err != nil {
		return nil, fmt.Errorf("%s: sub-store %q: %w", st, sub, err)
	}
	switch s := st.(type) {
	case *S3Store:
		c := *s
		c.prefix = s.prefix + sub + "/"
		c.src.Prefix = strings.TrimSuffix(c.prefix, "/")
		return &c, nil
	case *DirStore:
		root, err := s.root.OpenRoot(sub)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", s.src, sub, fileError(err))
		}
		c := *s
		c.root = root
		c.src.Dir = path.Join(s.src.Dir, sub)
		return &c, nil
	}
	return nil, fmt.Errorf("%s: no sub-stores of a %T", st, st)
}

// MaxDirs bounds ListDirs: a repository's base path holds one directory
// per index, and a listing longer than this fails instead of growing
// without end.
const MaxDirs = 100_000

// ListDirs returns the names of the directories right below sub in st
// (for S3, the common prefixes of a listing with the delimiter "/"),
// sorted; a listing of more than MaxDirs names or empty pages fails. A sub that holds nothing
// gives none, not an error.
func ListDirs(ctx context.Context, st Store, sub string) ([]string, error) {
	if sub != "" {
		if err := checkKey(sub); err != nil {
			return nil, fmt.Errorf("%s: list %q: %w", st, sub, err)
		}
	}
	switch s := st.(type) {
	case *S3Store:
		return s.listDirs(ctx, sub)
	case *DirStore:
		s.counters.Lists.Add(1)
		dir := sub
		if dir == "" {
			dir = "."
		}
		ents, err := fs.ReadDir(s.root.FS(), dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: list %s: %w", s.src, dir, err)
		}
		var out []string
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, e.Name())
				if len(out) > MaxDirs {
					return nil, fmt.Errorf("%s: list %s: %w: more than %d directories", s.src, dir, ErrListTooLong, MaxDirs)
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: no directory listing of a %T", st, st)
}

// listDirs is ListDirs for S3: ListObjectsV2 with a delimiter, its pages
// guarded as List's are (no repeated token, at most MaxDirs entries).
func (s *S3Store) listDirs(ctx context.Context, sub string) ([]string, error) {
	prefix := s.prefix
	if sub != "" {
		prefix += sub + "/"
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Delimiter: aws.String("/"), EncodingType: types.EncodingTypeUrl}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	seen := map[[sha256.Size]byte]bool{} // digests of the tokens sent
	var out []string
	listed := 0 // names, and pages without any
	for page := 1; ; page++ {
		s.counters.Lists.Add(1)
		res, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("%s: list %s: %w", s.src, sub, classify(err))
		}
		for _, p := range res.CommonPrefixes {
			full := aws.ToString(p.Prefix)
			if res.EncodingType == types.EncodingTypeUrl {
				if full, err = url.QueryUnescape(full); err != nil {
					return nil, fmt.Errorf("%s: list %s: page %d: prefix %q: %w", s.src, sub, page, aws.ToString(p.Prefix), err)
				}
			}
			name, ok := strings.CutPrefix(full, prefix)
			name = strings.TrimSuffix(name, "/")
			if !ok || name == "" || strings.Contains(name, "/") {
				continue
			}
			out = append(out, name)
		}
		if listed += max(1, len(res.CommonPrefixes)); listed > MaxDirs {
			return nil, fmt.Errorf("%s: list %s: %w: more than %d directories (after %d pages)", s.src, sub, ErrListTooLong, MaxDirs, page)
		}
		if !aws.ToBool(res.IsTruncated) {
			break
		}
		next := aws.ToString(res.NextContinuationToken)
		sum := sha256.Sum256([]byte(next))
		if next == "" || seen[sum] {
			return nil, fmt.Errorf("%s: list %s: %w at page %d", s.src, sub, ErrListCycle, page)
		}
		seen[sum] = true
		in.ContinuationToken = aws.String(next)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
