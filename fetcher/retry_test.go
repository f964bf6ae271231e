package fetcher

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
)

// TestRetryTruncatedBody: a response body cut short (as the SDK reports
// it when it decodes a LIST answer) is retryable; anything else is left
// to the SDK's own checks.
func TestRetryTruncatedBody(t *testing.T) {
	cut := &smithy.DeserializationError{Err: fmt.Errorf("failed to decode response body: %w", io.ErrUnexpectedEOF)}
	for _, tc := range []struct {
		err  error
		want aws.Ternary
	}{
		{fmt.Errorf("operation error S3: ListObjectsV2: %w", cut), aws.TrueTernary},
		{io.EOF, aws.UnknownTernary},
		{errors.New("access denied"), aws.UnknownTernary},
		{nil, aws.UnknownTernary},
	} {
		if got := (retryTruncatedBody{}).IsErrorRetryable(tc.err); got != tc.want {
			t.Errorf("IsErrorRetryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
