package fetcher

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestS3ListEndless checks that a listing the server never ends fails
// with a clear error after a bounded number of pages: tokens that cycle
// (of any length) or repeat, a truncated page without a token, and more
// keys, or pages, than maxListKeys allows.
func TestS3ListEndless(t *testing.T) {
	// chain serves the pages of a listing whose continuation tokens
	// follow next (from the first page's ""), every page truncated.
	chain := func(next map[string]string) func(string, *listResult) {
		return func(token string, res *listResult) {
			res.IsTruncated = true
			res.NextContinuationToken = next[token]
		}
	}
	tests := []struct {
		name        string
		keys        int // objects in the bucket
		pageSize    int
		maxListKeys int // 0: the default
		rewrite     func(string, *listResult)
		wantIs      error  // nil: the listing succeeds
		wantText    string // in the error
		pages       int64  // list requests made by List
	}{
		{name: "cycle A, B, A", keys: 3, pageSize: 1,
			rewrite: chain(map[string]string{"": "TOKEN-A", "TOKEN-A": "TOKEN-B", "TOKEN-B": "TOKEN-A"}),
			wantIs:  ErrListCycle, wantText: "page 3 returned the continuation token page 1 returned", pages: 3},
		{name: "cycle of four", keys: 3, pageSize: 1,
			rewrite: chain(map[string]string{"": "A", "A": "B", "B": "C", "C": "D", "D": "B"}),
			wantIs:  ErrListCycle, wantText: "page 5 returned the continuation token page 2 returned", pages: 5},
		{name: "same token again", keys: 3, pageSize: 1,
			rewrite: chain(map[string]string{"": "TOKEN-A", "TOKEN-A": "TOKEN-A"}),
			wantIs:  ErrListCycle, wantText: "page 2 returned the continuation token page 1 returned", pages: 2},
		{name: "truncated without a token", keys: 3, pageSize: 1,
			rewrite:  chain(map[string]string{"": "A"}),
			wantText: "page 2 is truncated but has no continuation token", pages: 2},
		{name: "new empty pages forever", keys: 0, pageSize: 1, maxListKeys: 50,
			rewrite: func(token string, res *listResult) {
				res.IsTruncated = true
				res.NextContinuationToken = token + "x"
			},
			wantIs: ErrListTooLong, wantText: "too many keys: more than 50 below the prefix", pages: 51},
		{name: "more keys than allowed", keys: 10, pageSize: 2, maxListKeys: 5,
			wantIs: ErrListTooLong, wantText: "too many keys: more than 5 below the prefix (after 3 pages)", pages: 3},
		{name: "exactly as many keys as allowed", keys: 6, pageSize: 2, maxListKeys: 6, pages: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			f := newFakeS3(t)
			for i := range tt.keys {
				f.put("bucket", fmt.Sprintf("idx/k%02d", i), []byte{byte(i)})
			}
			s := openTestS3(t, f, "idx")
			if tt.maxListKeys > 0 {
				s.maxListKeys = tt.maxListKeys
			}
			f.mu.Lock()
			f.pageSize, f.rewriteList = tt.pageSize, tt.rewrite
			f.mu.Unlock()
			before := s.Counters().Lists.Load()
			objs, err := s.List(t.Context())
			pages := s.Counters().Lists.Load() - before
			if pages != tt.pages {
				t.Errorf("List made %d list requests, want %d", pages, tt.pages)
			}
			if tt.wantIs == nil && tt.wantText == "" {
				if err != nil || len(objs) != tt.keys {
					t.Fatalf("List = %d objects, %v; want %d objects", len(objs), err, tt.keys)
				}
				return
			}
			if err == nil {
				t.Fatalf("List = %d objects, no error; want an error", len(objs))
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("err = %v, want one wrapping %v", err, tt.wantIs)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.wantText) || !strings.HasPrefix(msg, "s3://bucket/idx: list: ") {
				t.Errorf("err = %q, want it to name the source and say %q", msg, tt.wantText)
			}
			if strings.Contains(msg, "TOKEN-") {
				t.Errorf("err = %q quotes a continuation token", msg)
			}
		})
	}
}
