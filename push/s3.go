package push

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/segfs/segfs/fetcher"
)

// maxParts is kept below S3's limit of 10000 parts per upload.
const maxParts = 9000

type s3Target struct {
	client   *s3.Client
	src      fetcher.Source
	prefix   string
	parallel int
}

func newS3Target(client *s3.Client, src fetcher.Source, parallel int) *s3Target {
	t := &s3Target{client: client, src: src, parallel: parallel}
	if src.Prefix != "" {
		t.prefix = src.Prefix + "/"
	}
	return t
}

func (t *s3Target) String() string { return t.src.String() }

func (t *s3Target) upToDate(ctx context.Context, key string, size int64, sha string, _ bool) (bool, error) {
	out, err := t.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(t.src.Bucket),
		Key:    aws.String(t.prefix + key),
	})
	if err != nil {
		var ae smithy.APIError
		var re interface{ HTTPStatusCode() int }
		if (errors.As(err, &ae) && (ae.ErrorCode() == "NotFound" || ae.ErrorCode() == "NoSuchKey")) ||
			(errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound) {
			return false, nil
		}
		return false, err
	}
	var gotSHA, gotSize string
	for k, v := range out.Metadata {
		switch strings.ToLower(k) {
		case MetaSHA256:
			gotSHA = v
		case MetaSize:
			gotSize = v
		}
	}
	return gotSHA == sha && gotSize == strconv.FormatInt(size, 10), nil
}

// put uploads with the upload manager: one PutObject for a small body,
// else a multipart upload that the manager aborts if any part fails.
func (t *s3Target) put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) error {
	up := manager.NewUploader(t.client, func(u *manager.Uploader) {
		u.PartSize = max(manager.DefaultUploadPartSize, (size+maxParts-1)/maxParts)
		u.Concurrency = 4
	})
	_, err := up.Upload(ctx, &s3.PutObjectInput{
		Bucket:   aws.String(t.src.Bucket),
		Key:      aws.String(t.prefix + key),
		Body:     r,
		Metadata: meta,
	})
	return err
}

func (t *s3Target) remove(ctx context.Context, key string) error {
	_, err := t.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(t.src.Bucket),
		Key:    aws.String(t.prefix + key),
	})
	return err
}
