package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"
)

// UploadParallelism bounds the PutObject calls UploadDir, UploadFiles and
// PutObjects run at once.
const UploadParallelism = 8

// unsignedPayload skips hashing the body before sending it: over plain HTTP
// the SDK would otherwise read every file twice.
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

// CreateBucket creates the bucket name.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

// PutBytes stores data as bucket/key and returns the object's ETag.
func (s *Server) PutBytes(ctx context.Context, bucket, key string, data []byte) (string, error) {
	out, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}, unsignedPayload)
	if err != nil {
		return "", fmt.Errorf("put s3://%s/%s (%d bytes): %w", bucket, key, len(data), err)
	}
	return aws.ToString(out.ETag), nil
}

// GetBytes returns the whole object bucket/key.
func (s *Server) GetBytes(ctx context.Context, bucket, key string) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	return data, nil
}

// Delete removes the object bucket/key.
func (s *Server) Delete(ctx context.Context, bucket, key string) error {
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
		return fmt.Errorf("delete s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}

// PutObjects stores every object of objs (key to content) in bucket,
// UploadParallelism at a time, and returns the first error.
func (s *Server) PutObjects(ctx context.Context, bucket string, objs map[string][]byte) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(UploadParallelism)
	for key, body := range objs {
		g.Go(func() error {
			_, err := s.PutBytes(gctx, bucket, key, body)
			return err
		})
	}
	return g.Wait()
}

// PutFile stores the local file at localPath as bucket/key with one
// streaming PutObject (versitygw takes multi-GB bodies this way) and
// returns the object's ETag.
func (s *Server) PutFile(ctx context.Context, bucket, key, localPath string) (string, error) {
	f, err := os.Open(localPath)
	if err != nil {
		return "", fmt.Errorf("put s3://%s/%s: %w", bucket, key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("put s3://%s/%s: %w", bucket, key, err)
	}
	out, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key),
		Body:          f,
		ContentLength: aws.Int64(st.Size()),
	}, unsignedPayload)
	if err != nil {
		return "", fmt.Errorf("put s3://%s/%s from %s (%d bytes): %w", bucket, key, localPath, st.Size(), err)
	}
	return aws.ToString(out.ETag), nil
}

// UploadDir uploads every regular file below localDir to bucket, each under
// prefix joined with its slash-separated path relative to localDir. prefix
// may be empty; a trailing slash is not needed. Up to UploadParallelism
// uploads run at once; the first error stops the rest and is returned.
func (s *Server) UploadDir(ctx context.Context, bucket, prefix, localDir string) error {
	var names []string
	err := filepath.WalkDir(localDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(localDir, p)
			if err != nil {
				return err
			}
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("upload %s: %w", localDir, err)
	}
	return s.UploadFiles(ctx, bucket, prefix, localDir, names)
}

// UploadFiles uploads the named files (slash-separated paths relative to
// localDir) like UploadDir does.
func (s *Server) UploadFiles(ctx context.Context, bucket, prefix, localDir string, names []string) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(UploadParallelism)
	for _, name := range names {
		g.Go(func() error {
			_, err := s.PutFile(ctx, bucket, path.Join(prefix, name), filepath.Join(localDir, filepath.FromSlash(name)))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("upload %s to s3://%s/%s: %w", localDir, bucket, prefix, err)
	}
	return nil
}
