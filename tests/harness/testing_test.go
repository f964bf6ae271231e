package harness

import (
	"regexp"
	"testing"
)

func TestBucketName(t *testing.T) {
	valid := regexp.MustCompile(`^x-testbucketname-[0-9a-f]{6}$`)
	a, b := BucketName(t, "x-"), BucketName(t, "x-")
	if !valid.MatchString(a) || a == b {
		t.Errorf("BucketName = %q, %q; want x-testbucketname-<6 hex>, different each time", a, b)
	}
	t.Run("Sub Test/Ünïcode", func(t *testing.T) {
		name := BucketName(t, "x-")
		if !regexp.MustCompile(`^x-testbucketname-sub-test-n-code-[0-9a-f]{6}$`).MatchString(name) {
			t.Errorf("BucketName = %q", name)
		}
	})
}
