package fetcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/processcreds"
	"github.com/aws/aws-sdk-go-v2/credentials/ssocreds"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// CredentialsError reports that the AWS credential provider failed to
// give credentials. It names the provider and a class of cause, and
// never carries the provider's own error: the SDK's errors can quote what
// a provider printed (a credential_process whose output is malformed JSON
// has that output, secret included, in the error), and segfs prints its
// errors.
type CredentialsError struct {
	// Provider names the provider, e.g. "credential_process".
	Provider string
	// Cause says what went wrong in words of segfs's own.
	Cause string
	// ctxErr is the context's error when the retrieval was cut short,
	// so that errors.Is(err, context.Canceled) holds; else nil.
	ctxErr error
	// retryable is what the SDK's standard retryer decided for the
	// provider's error, kept for the request that asked for credentials.
	retryable bool
}

func (e *CredentialsError) Error() string {
	return fmt.Sprintf("AWS credentials from %s: %s", e.Provider, e.Cause)
}

// RetryableError tells the SDK's retryer whether the request may be
// retried: as it would have for the provider's error (a connection
// reset, say), which CredentialsError drops.
func (e *CredentialsError) RetryableError() bool { return e.retryable }

// Unwrap returns context.Canceled or context.DeadlineExceeded when the
// retrieval was cut short, else nil: the provider's error is dropped.
func (e *CredentialsError) Unwrap() error { return e.ctxErr }

// guardedCredentials is a credentials provider whose errors are
// *CredentialsError. It wraps the provider the AWS configuration chain
// resolved, so that every credential error, from the check at open or
// from a refresh during a request, is reported without provider output.
type guardedCredentials struct {
	p aws.CredentialsProvider
}

var (
	_ aws.CredentialsProvider      = guardedCredentials{}
	_ aws.CredentialProviderSource = guardedCredentials{}
)

// guardCredentials wraps p (nil stays nil: anonymous access).
func guardCredentials(p aws.CredentialsProvider) aws.CredentialsProvider {
	if p == nil {
		return nil
	}
	return guardedCredentials{p: p}
}

// Retrieve implements aws.CredentialsProvider.
func (g guardedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := g.p.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, newCredentialsError(ctx, providerSources(g.p), err)
	}
	return c, nil
}

// ProviderSources implements aws.CredentialProviderSource (the SDK
// reports the sources in its user agent).
func (g guardedCredentials) ProviderSources() []aws.CredentialSource { return providerSources(g.p) }

// IsCredentialsProvider lets aws.IsCredentialsProvider see through the
// guard (the S3 client checks for anonymous credentials with it).
func (g guardedCredentials) IsCredentialsProvider(target aws.CredentialsProvider) bool {
	return aws.IsCredentialsProvider(g.p, target)
}

func providerSources(p aws.CredentialsProvider) []aws.CredentialSource {
	if s, ok := p.(aws.CredentialProviderSource); ok {
		return s.ProviderSources()
	}
	return nil
}

// newCredentialsError classifies err, the error of a provider whose
// chain is sources, by its types alone: its text may hold the provider's
// output.
func newCredentialsError(ctx context.Context, sources []aws.CredentialSource, err error) *CredentialsError {
	e := &CredentialsError{
		Provider:  sourceName(sources),
		Cause:     "it failed (details withheld: they may quote the provider's output)",
		retryable: retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary,
	}
	var (
		procErr   *processcreds.ProviderError
		exitErr   *exec.ExitError
		execErr   *exec.Error
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		ssoErr    *ssocreds.InvalidTokenError
		emptyErr  *credentials.StaticCredentialsEmptyError
		apiErr    smithy.APIError
		sendErr   *smithyhttp.RequestSendError
		status    interface{ HTTPStatusCode() int }
	)
	isProcess := errors.As(err, &procErr)
	if isProcess {
		e.Provider = "credential_process"
	}
	switch {
	case ctx.Err() != nil:
		e.ctxErr = ctx.Err()
		e.Cause = "interrupted"
		if errors.Is(e.ctxErr, context.DeadlineExceeded) {
			e.Cause = "timed out"
		}
	case errors.Is(err, context.DeadlineExceeded):
		e.Cause = "timed out"
	case errors.As(err, &exitErr):
		// "exit status 1" or "signal: killed": no output.
		e.Cause = "the command exited with " + exitErr.ProcessState.String()
	case errors.As(err, &execErr):
		// Not its name: a command line may hold a secret.
		e.Cause = "the command could not be started"
	case errors.As(err, &syntaxErr):
		e.Cause = "its output is not valid JSON"
	case errors.As(err, &typeErr):
		e.Cause = "its output has a field of the wrong type"
	case isProcess:
		// The process ran and printed JSON that is not usable.
		e.Cause = "its output is not version 1 credentials with an AccessKeyId and a SecretAccessKey"
	case errors.As(err, &ssoErr):
		e.Cause = "the SSO session has expired or is invalid (aws sso login renews it)"
	case errors.As(err, &emptyErr):
		e.Cause = "the access key id or the secret is empty"
	case errors.As(err, &apiErr) && errors.As(err, &status):
		// The status, not the error code or message: both are the
		// provider's output.
		e.Cause = fmt.Sprintf("the service refused it (HTTP %d)", status.HTTPStatusCode())
	case errors.As(err, &apiErr):
		e.Cause = "the service refused it"
	case errors.As(err, &sendErr):
		e.Cause = "cannot reach it"
	}
	switch {
	case isProcess:
		e.Cause += "; run the credential_process command by hand to see what it prints"
	case len(sources) == 1 && sources[0] == aws.CredentialSourceIMDS:
		// The default chain's last resort: nothing else was configured.
		e.Cause += "; the chain asks IMDS when the environment and the AWS config files name no credentials"
	}
	return e
}

// sourceName names the provider of a credential chain: its last source,
// the one whose retrieval gives the credentials.
func sourceName(sources []aws.CredentialSource) string {
	if len(sources) == 0 {
		return "the AWS credential chain"
	}
	switch sources[len(sources)-1] {
	case aws.CredentialSourceCode:
		return "static credentials"
	case aws.CredentialSourceEnvVars:
		return "the environment (AWS_ACCESS_KEY_ID)"
	case aws.CredentialSourceEnvVarsSTSWebIDToken, aws.CredentialSourceProfileSTSWebIDToken, aws.CredentialSourceSTSAssumeRoleWebID:
		return "STS AssumeRoleWithWebIdentity"
	case aws.CredentialSourceSTSAssumeRole:
		return "STS AssumeRole"
	case aws.CredentialSourceSTSAssumeRoleSaml:
		return "STS AssumeRoleWithSAML"
	case aws.CredentialSourceSTSFederationToken, aws.CredentialSourceSTSSessionToken:
		return "STS"
	case aws.CredentialSourceProfile, aws.CredentialSourceProfileSourceProfile:
		return "the shared config profile"
	case aws.CredentialSourceProfileNamedProvider:
		return "the profile's credential_source"
	case aws.CredentialSourceProfileSSO, aws.CredentialSourceSSO, aws.CredentialSourceProfileSSOLegacy, aws.CredentialSourceSSOLegacy:
		return "SSO"
	case aws.CredentialSourceProfileProcess, aws.CredentialSourceProcess:
		return "credential_process"
	case aws.CredentialSourceHTTP:
		return "the container credentials endpoint"
	case aws.CredentialSourceIMDS:
		return "the EC2 instance metadata service (IMDS)"
	case aws.CredentialSourceProfileLogin, aws.CredentialSourceLogin:
		return "the aws login session"
	}
	return "the AWS credential chain"
}
