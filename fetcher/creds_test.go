package fetcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials/processcreds"
	"github.com/aws/aws-sdk-go-v2/credentials/ssocreds"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// credsCanary is a secret a credential provider prints; no error may
// quote it.
const credsCanary = "CANARYPROCESSSECRET0123456789ABCDEFGHIJ"

// useCredentialProcess points the AWS chain at a profile whose
// credential_process is a shell script printing script's output, with
// no credentials in the environment. The script's state file counts its
// runs (1, 2, ...) in $n.
func useCredentialProcess(t *testing.T, script string) {
	t.Helper()
	setAWSEnv(t)
	unsetenv(t, "AWS_ACCESS_KEY_ID")
	unsetenv(t, "AWS_SECRET_ACCESS_KEY")
	dir := t.TempDir()
	prog := filepath.Join(dir, "creds.sh")
	body := fmt.Sprintf("#!/bin/sh\nstate=%s\nn=$(( $(cat \"$state\" 2>/dev/null || echo 0) + 1 ))\necho $n > \"$state\"\n%s\n",
		filepath.Join(dir, "runs"), script)
	if err := os.WriteFile(prog, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "config")
	if err := os.WriteFile(conf, []byte("[profile canary]\ncredential_process = "+prog+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", conf)
	t.Setenv("AWS_PROFILE", "canary")
}

// TestOpenCredentialProcess opens a store whose credential_process
// fails in several ways, each time printing the canary secret: Open
// must fail naming the provider and the cause, never quoting the output,
// both at the credential check and when a request refreshes expired
// credentials.
func TestOpenCredentialProcess(t *testing.T) {
	valid := fmt.Sprintf(`{"Version": 1, "AccessKeyId": %q, "SecretAccessKey": %q, "Expiration": "2000-01-01T00:00:00Z"}`, testAccessKey, testSecretKey)
	tests := []struct {
		name, script string
		wantText     string
		check        bool // fails in the bucket check (a refresh), not at the credential check
	}{
		{name: "malformed JSON", script: `echo '{"Version": 1, "AccessKeyId": "AKIDCANARY", "SecretAccessKey": "` + credsCanary + `"'`,
			wantText: "its output is not valid JSON"},
		{name: "exits non-zero", script: `echo '` + credsCanary + `'; exit 3`,
			wantText: "the command exited with exit status 3"},
		{name: "field of the wrong type", script: `echo '{"Version": "1", "SecretAccessKey": "` + credsCanary + `"}'`,
			wantText: "its output has a field of the wrong type"},
		{name: "no secret", script: `echo '{"Version": 1, "AccessKeyId": "AKIDCANARY", "SessionToken": "` + credsCanary + `"}'`,
			wantText: "is not version 1 credentials"},
		{name: "malformed on refresh", check: true,
			script:   `if [ $n = 1 ]; then echo '` + valid + `'; else echo '{"SecretAccessKey": "` + credsCanary + `"'; fi`,
			wantText: "its output is not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			f := newFakeS3(t)
			useCredentialProcess(t, tt.script)
			st, err := Open(t.Context(), "s3://bucket", testConfig(f))
			if err == nil {
				t.Fatalf("Open = %v, nil; want an error", st)
			}
			msg := err.Error()
			t.Logf("Open: %s", msg)
			if strings.Contains(msg, credsCanary) || strings.Contains(msg, "AKIDCANARY") {
				t.Errorf("the error quotes the provider's output: %s", msg)
			}
			if !strings.Contains(msg, "AWS credentials from credential_process: ") || !strings.Contains(msg, tt.wantText) {
				t.Errorf("err = %q, want it to name credential_process and say %q", msg, tt.wantText)
			}
			var ce *CredentialsError
			if !errors.As(err, &ce) || ce.Provider != "credential_process" {
				t.Errorf("err = %v, want a *CredentialsError of credential_process", err)
			}
			if got := errors.Is(err, ErrAccessDenied); got == tt.check {
				t.Errorf("errors.Is(err, ErrAccessDenied) = %v; want it only for the credential check", got)
			}
			if tt.check && !strings.Contains(msg, "checking the bucket") {
				t.Errorf("err = %q, want it from the bucket check", msg)
			}
		})
	}
}

// TestCredentialsErrorClasses checks the classes of provider errors that
// quote what the provider sent: none may appear in the message.
func TestCredentialsErrorClasses(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	stsRefused := &smithy.OperationError{ServiceID: "STS", OperationName: "AssumeRole", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusForbidden}},
		Err:      &smithy.GenericAPIError{Code: credsCanary, Message: credsCanary},
	}}
	tests := []struct {
		name    string
		ctx     context.Context
		sources []aws.CredentialSource
		err     error
		want    string
		wantIs  error
		retry   bool // the SDK may retry the request
	}{
		{name: "process output", sources: []aws.CredentialSource{aws.CredentialSourceProfileProcess},
			err:  &processcreds.ProviderError{Err: fmt.Errorf("parse failed of process output: %s, error: %w", credsCanary, &json.SyntaxError{})},
			want: "AWS credentials from credential_process: its output is not valid JSON"},
		{name: "process below assume role", sources: []aws.CredentialSource{aws.CredentialSourceProfileSourceProfile, aws.CredentialSourceSTSAssumeRole},
			err:  fmt.Errorf("get credentials: %w", &processcreds.ProviderError{Err: errors.New(credsCanary)}),
			want: "AWS credentials from credential_process: its output is not version 1"},
		{name: "STS refusal", sources: []aws.CredentialSource{aws.CredentialSourceSTSAssumeRole},
			err:  fmt.Errorf("failed to refresh cached credentials, %w", stsRefused),
			want: "AWS credentials from STS AssumeRole: the service refused it (HTTP 403)"},
		{name: "SSO token", sources: []aws.CredentialSource{aws.CredentialSourceProfileSSO},
			err:  &ssocreds.InvalidTokenError{Err: errors.New(credsCanary)},
			want: "AWS credentials from SSO: the SSO session has expired"},
		{name: "unknown error", sources: []aws.CredentialSource{aws.CredentialSourceIMDS},
			err:  errors.New(credsCanary),
			want: "AWS credentials from the EC2 instance metadata service (IMDS): it failed (details withheld"},
		{name: "no sources", err: errors.New(credsCanary), want: "AWS credentials from the AWS credential chain: it failed"},
		{name: "connection reset", sources: []aws.CredentialSource{aws.CredentialSourceHTTP},
			err:  fmt.Errorf("failed to load credentials, %w", &smithyhttp.RequestSendError{Err: fmt.Errorf("%s: %w", credsCanary, syscall.ECONNRESET)}),
			want: "AWS credentials from the container credentials endpoint: cannot reach it", retry: true},
		{name: "interrupted", ctx: canceled, sources: []aws.CredentialSource{aws.CredentialSourceHTTP},
			err:  fmt.Errorf("%s: %w", credsCanary, context.Canceled),
			want: "AWS credentials from the container credentials endpoint: interrupted", wantIs: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = t.Context()
			}
			err := error(newCredentialsError(ctx, tt.sources, tt.err))
			msg := err.Error()
			if !strings.HasPrefix(msg, tt.want) {
				t.Errorf("err = %q, want it to start with %q", msg, tt.want)
			}
			if strings.Contains(msg, credsCanary) || strings.Contains(fmt.Sprintf("%+v", err), credsCanary) {
				t.Errorf("err %q quotes the provider's output", msg)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
			}
			if got := retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary; got != tt.retry {
				t.Errorf("retryable = %v, want %v", got, tt.retry)
			}
		})
	}
}

// TestGuardedCredentials checks that the guard passes credentials and
// the provider's sources through.
func TestGuardedCredentials(t *testing.T) {
	if guardCredentials(nil) != nil {
		t.Errorf("guardCredentials(nil) is not nil")
	}
	p := guardCredentials(aws.NewCredentialsCache(staticSources{}))
	c, err := p.Retrieve(t.Context())
	if err != nil || c.AccessKeyID != "id" {
		t.Errorf("Retrieve = %+v, %v", c, err)
	}
	if s := p.(aws.CredentialProviderSource).ProviderSources(); len(s) != 1 || s[0] != aws.CredentialSourceEnvVars {
		t.Errorf("ProviderSources = %v", s)
	}
	if aws.IsCredentialsProvider(p, (*aws.AnonymousCredentials)(nil)) {
		t.Errorf("the guard of a cache passes for anonymous credentials")
	}
	if !aws.IsCredentialsProvider(guardCredentials(aws.AnonymousCredentials{}), aws.AnonymousCredentials{}) {
		t.Errorf("the guard of anonymous credentials does not pass for them")
	}
}

type staticSources struct{}

func (staticSources) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: "id", SecretAccessKey: "secret"}, nil
}

func (staticSources) ProviderSources() []aws.CredentialSource {
	return []aws.CredentialSource{aws.CredentialSourceEnvVars}
}
