package fetcher

import (
	"strings"
	"testing"
)

func TestParseSource(t *testing.T) {
	tests := []struct {
		in      string
		want    Source
		str     string // String(), when it differs from in
		wantErr bool
	}{
		{in: "s3://bucket", want: Source{Scheme: "s3", Bucket: "bucket"}},
		{in: "s3://bucket/", want: Source{Scheme: "s3", Bucket: "bucket"}, str: "s3://bucket"},
		{in: "s3://bucket/idx/shard-0", want: Source{Scheme: "s3", Bucket: "bucket", Prefix: "idx/shard-0"}},
		{in: "s3://bucket//idx/", want: Source{Scheme: "s3", Bucket: "bucket", Prefix: "idx"}, str: "s3://bucket/idx"},
		{in: "file:///data/segs", want: Source{Scheme: "file", Dir: "/data/segs"}},
		{in: "file:///data/segs/", want: Source{Scheme: "file", Dir: "/data/segs"}, str: "file:///data/segs"},
		{in: "file://localhost/data", want: Source{Scheme: "file", Dir: "/data"}, str: "file:///data"},
		{in: "file:///a/../b", want: Source{Scheme: "file", Dir: "/b"}, str: "file:///b"},
		{in: "file:///", want: Source{Scheme: "file", Dir: "/"}},
		{in: "s3://", wantErr: true},
		{in: "s3:///prefix", wantErr: true},
		{in: "s3://bucket:9000/p", wantErr: true},
		{in: "s3://bucket/p?versionId=1", wantErr: true},
		{in: "s3:bucket", wantErr: true},
		{in: "file://host/dir", wantErr: true},
		{in: "file:relative/dir", wantErr: true},
		{in: "/plain/path", wantErr: true},
		{in: "http://bucket/p", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSource(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseSource = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ParseSource = %+v, want %+v", got, tt.want)
			}
			str := tt.str
			if str == "" {
				str = tt.in
			}
			if got.String() != str {
				t.Errorf("String = %q, want %q", got.String(), str)
			}
		})
	}
}

func TestParseSourceHidesCredentials(t *testing.T) {
	_, err := ParseSource("s3://AKIDSECRETID:verysecret@bucket/p")
	if err == nil {
		t.Fatal("credentials in the URL accepted")
	}
	if msg := err.Error(); strings.Contains(msg, "AKIDSECRETID") || strings.Contains(msg, "verysecret") {
		t.Errorf("error %q shows the credentials", msg)
	}
}
