package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/segfs/segfs/tests/harness"
)

// object is one file of a workload: where it is in the bucket, in the
// mount, and in the generated shard.
type object struct {
	Key    string // object key, e.g. shard/_1.fdt
	Local  string // path of the generated file
	Size   int64
	SHA256 string
}

// remote is the baselines' S3 client. It reads no configuration from the
// environment or from files, and talks to one endpoint only (the shaping
// proxy, or the server itself for the loopback profile).
type remote struct {
	client *s3.Client
	bucket string
}

// newRemote returns a client with room for conns idle connections, so that
// the limit baseline reuses its connections as segfs does.
func newRemote(endpoint, accessKey, secretKey, bucket string, conns int) *remote {
	client := harness.NewClient(endpoint, accessKey, secretKey, conns+4)
	return &remote{client: client, bucket: bucket}
}

// get streams key's bytes [off, off+n) (the whole object if n < 0) into w
// and fails unless exactly the expected count arrived.
func (r *remote) get(ctx context.Context, key string, off, n int64, w io.Writer, buf []byte) (int64, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(key)}
	if n >= 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	}
	out, err := r.client.GetObject(ctx, in)
	if err != nil {
		return 0, fmt.Errorf("get %s [%d,+%d): %w", key, off, n, err)
	}
	defer out.Body.Close()
	got, err := io.CopyBuffer(w, out.Body, buf)
	if err != nil {
		return got, fmt.Errorf("get %s [%d,+%d): after %d bytes: %w", key, off, n, got, err)
	}
	if want := aws.ToInt64(out.ContentLength); n >= 0 && got != n || n < 0 && got != want {
		return got, fmt.Errorf("get %s [%d,+%d): got %d bytes", key, off, n, got)
	}
	return got, nil
}

// fileBased downloads each object whole with one GET, one after another,
// into dir (named by the last element of its key): what a recovery does
// without part parallelism.
func (r *remote) fileBased(ctx context.Context, objs []object, dir string) (int64, time.Duration, error) {
	buf := make([]byte, 1<<20)
	var total int64
	start := time.Now()
	for _, o := range objs {
		n, err := r.getToFile(ctx, o.Key, filepath.Join(dir, filepath.Base(o.Key)), buf)
		total += n
		if err != nil {
			return total, time.Since(start), err
		}
	}
	return total, time.Since(start), nil
}

func (r *remote) getToFile(ctx context.Context, key, path string, buf []byte) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	n, err := r.get(ctx, key, 0, -1, f, buf)
	return n, errors.Join(err, f.Close())
}

// span is one ranged GET of a plain client.
type span struct {
	Key string `json:"key"`
	Off int64  `json:"off"`
	N   int64  `json:"n"`
}

// spans cuts every object into aligned ranges of size bytes (the last of
// each object is short), in object order.
func spans(objs []object, size int64) []span {
	var out []span
	for _, o := range objs {
		for off := int64(0); off < o.Size; off += size {
			out = append(out, span{Key: o.Key, Off: off, N: min(size, o.Size-off)})
		}
	}
	return out
}

// fetch gets every span with a ranged GET, conns at a time, in order,
// into io.Discard: no FUSE, no cache, nothing written. Cut into parts
// (spans), it is the most the remote gives a client that keeps conns
// GETs in flight.
func (r *remote) fetch(ctx context.Context, work []span, conns int) (int64, time.Duration, error) {
	next := make(chan span)
	g, gctx := errgroup.WithContext(ctx)
	totals := make([]int64, conns)
	start := time.Now()
	for i := range conns {
		g.Go(func() error {
			buf := make([]byte, 256<<10)
			for s := range next {
				n, err := r.get(gctx, s.Key, s.Off, s.N, io.Discard, buf)
				totals[i] += n
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(next)
		for _, s := range work {
			select {
			case next <- s:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	err := g.Wait()
	elapsed := time.Since(start)
	var total int64
	for _, n := range totals {
		total += n
	}
	return total, elapsed, err
}

// rangedReads does one ranged GET of size bytes at each offset of key, one
// after another, checks each against want, and returns each GET's latency.
func (r *remote) rangedReads(ctx context.Context, key string, offsets []int64, size int, want [][]byte) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, len(offsets))
	var got bytesSink
	got.b = make([]byte, 0, size)
	for i, off := range offsets {
		got.b = got.b[:0]
		start := time.Now()
		if _, err := r.get(ctx, key, off, int64(size), &got, nil); err != nil {
			return lat, err
		}
		lat = append(lat, time.Since(start))
		if string(got.b) != string(want[i]) {
			return lat, fmt.Errorf("get %s [%d,+%d): other bytes than the generated file's", key, off, size)
		}
	}
	return lat, nil
}

// bytesSink collects what is written to it.
type bytesSink struct{ b []byte }

func (s *bytesSink) Write(p []byte) (int, error) {
	s.b = append(s.b, p...)
	return len(p), nil
}
