package fetcher

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestCacheSourceNamesTheService: the cache name of an S3 store holds the
// service it reaches, normalized, besides the bucket and prefix: spellings
// of one endpoint share a name, and two services holding a bucket of the
// same name do not. What String prints (in logs) does not change.
func TestCacheSourceNamesTheService(t *testing.T) {
	store := func(endpoint, region string) *S3Store {
		src, err := ParseSource("s3://bucket/prefix")
		if err != nil {
			t.Fatal(err)
		}
		return &S3Store{src: src, cfg: Config{Endpoint: endpoint}, client: s3.New(s3.Options{Region: region})}
	}
	for _, tc := range []struct{ endpoint, region, want string }{
		{"http://127.0.0.1:7070", "", "s3://bucket/prefix at http://127.0.0.1:7070"},
		{"HTTP://127.0.0.1:7070/", "", "s3://bucket/prefix at http://127.0.0.1:7070"},
		{"http://127.0.0.1:7071", "", "s3://bucket/prefix at http://127.0.0.1:7071"},
		{"https://S3.Example.com:443/", "", "s3://bucket/prefix at https://s3.example.com"},
		{"https://s3.example.com", "", "s3://bucket/prefix at https://s3.example.com"},
		{"http://s3.example.com:80", "", "s3://bucket/prefix at http://s3.example.com"},
		{"http://s3.example.com:443", "", "s3://bucket/prefix at http://s3.example.com:443"},
		{"https://gw.example.com/s3/", "", "s3://bucket/prefix at https://gw.example.com/s3"},
		{"http://[::1]:9000", "", "s3://bucket/prefix at http://[::1]:9000"},
		{"http://[::1]", "", "s3://bucket/prefix at http://[::1]"},
		{"https://s3.example.com/?x=1#y", "", "s3://bucket/prefix at https://s3.example.com"},
		{"", "us-east-1", "s3://bucket/prefix at aws:us-east-1"},
		{"", "cn-north-1", "s3://bucket/prefix at aws:cn-north-1"},
	} {
		s := store(tc.endpoint, tc.region)
		if got := CacheSource(s); got != tc.want {
			t.Errorf("endpoint %q region %q: CacheSource %q, want %q", tc.endpoint, tc.region, got, tc.want)
		}
		if got := s.String(); got != "s3://bucket/prefix" {
			t.Errorf("endpoint %q: String %q, want s3://bucket/prefix", tc.endpoint, got)
		}
	}
	src, err := ParseSource("file:///srv/shard")
	if err != nil {
		t.Fatal(err)
	}
	d := &DirStore{src: src}
	if got := CacheSource(d); got != "file:///srv/shard" {
		t.Errorf("CacheSource of a directory: %q, want file:///srv/shard", got)
	}
}
