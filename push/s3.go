package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/segfs/segfs/fetcher"
)

// maxParts is kept below S3's limit of 10000 parts per upload.
const maxParts = 9000

// abortTimeout bounds the AbortMultipartUpload sent after a failed or
// interrupted upload.
const abortTimeout = 30 * time.Second

type s3Target struct {
	// Immutable after construction.
	client *s3.Client
	store  fetcher.Store // lists the destination
	src    fetcher.Source
	prefix string
	log    *slog.Logger
}

func newS3Target(client *s3.Client, src fetcher.Source, store fetcher.Store, log *slog.Logger) *s3Target {
	t := &s3Target{client: client, store: store, src: src, log: log}
	if src.Prefix != "" {
		t.prefix = src.Prefix + "/"
	}
	return t
}

func (t *s3Target) String() string { return t.src.String() }

func (t *s3Target) list(ctx context.Context) ([]string, error) {
	objs, err := t.store.List(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys, nil
}

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
// else a multipart upload, which shows nothing under the key until it
// completes. A multipart upload that fails, or whose ctx ends (an
// interrupted push), is aborted here on a context of its own: the
// manager would abort on ctx, which is already done after an interrupt,
// and leave the uploaded parts stored.
func (t *s3Target) put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) error {
	up := manager.NewUploader(t.client, func(u *manager.Uploader) {
		u.PartSize = max(manager.DefaultUploadPartSize, (size+maxParts-1)/maxParts)
		u.Concurrency = 4
		u.LeavePartsOnError = true // aborted below, on a live context
	})
	_, err := up.Upload(ctx, &s3.PutObjectInput{
		Bucket:   aws.String(t.src.Bucket),
		Key:      aws.String(t.prefix + key),
		Body:     r,
		Metadata: meta,
	})
	var mf manager.MultiUploadFailure
	if errors.As(err, &mf) && mf.UploadID() != "" {
		if aerr := t.abort(context.WithoutCancel(ctx), key, mf.UploadID()); aerr != nil {
			err = errors.Join(err, aerr)
		}
	}
	return err
}

// abortRechecks are the waits after an abort before the upload is looked
// for again. A part whose request was already on the wire when the upload
// was cancelled can still be stored after the abort, which brings the
// upload back (S3 documents this: abort again until ListParts finds
// nothing). They cover a part in flight for a few seconds; an interrupted
// push exits that much later.
var abortRechecks = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}

// abort aborts the multipart upload id of key, and again each time a
// recheck finds it back.
func (t *s3Target) abort(ctx context.Context, key, id string) error {
	ctx, cancel := context.WithTimeout(ctx, abortTimeout)
	defer cancel()
	in := &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(t.src.Bucket),
		Key:      aws.String(t.prefix + key),
		UploadId: aws.String(id),
	}
	if _, err := t.client.AbortMultipartUpload(ctx, in); err != nil && !isNoSuchUpload(err) {
		return fmt.Errorf("abort the multipart upload %s of %s: %w (its parts stay stored until aborted or expired by a lifecycle rule)", id, key, err)
	}
	for _, wait := range abortRechecks {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("abort the multipart upload %s of %s: checking that it is gone: %w", id, key, ctx.Err())
		}
		_, err := t.client.ListParts(ctx, &s3.ListPartsInput{Bucket: in.Bucket, Key: in.Key, UploadId: in.UploadId})
		if isNoSuchUpload(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("abort the multipart upload %s of %s: checking that it is gone: %w", id, key, err)
		}
		t.log.Debug("multipart upload back after its abort (a part was in flight); aborting again", "key", t.prefix+key, "upload_id", id)
		if _, err := t.client.AbortMultipartUpload(ctx, in); err != nil && !isNoSuchUpload(err) {
			return fmt.Errorf("abort the multipart upload %s of %s again: %w (its parts stay stored until aborted or expired by a lifecycle rule)", id, key, err)
		}
	}
	t.log.Debug("aborted multipart upload", "key", t.prefix+key, "upload_id", id)
	return nil
}

// isNoSuchUpload reports whether err says the multipart upload does not
// exist (any more).
func isNoSuchUpload(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload"
}

func (t *s3Target) remove(ctx context.Context, key string) error {
	_, err := t.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(t.src.Bucket),
		Key:    aws.String(t.prefix + key),
	})
	return err
}
