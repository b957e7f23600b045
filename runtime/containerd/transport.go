package containerd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	remoteerrors "github.com/containerd/containerd/v2/core/remotes/errors"
	"github.com/containerd/errdefs"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/sandbox-resume/sandbox-resume/internal/inputfile"
)

// RegistryOptions says how push and pull reach registries (docs/design.md
// "Moving runs"); NewTransport opens them. The zero value reads credentials from the Docker config
// ($DOCKER_CONFIG/config.json, else ~/.docker/config.json), trusts the
// system certificate pool, speaks https, and retries with the defaults of
// RetryPolicy.
type RegistryOptions struct {
	// ConfigFile is a file in the Docker config.json format ("auths",
	// "credsStore", "credHelpers") read instead of the default one
	// (--registry-config); it must exist. Empty: the default file, which
	// may be absent (no credentials).
	ConfigFile string
	// CACertFile is a PEM file of CA certificates trusted in addition to
	// the system pool (--registry-cacert). Empty: the system pool only.
	CACertFile string
	// PlainHTTP makes loopback registries (docker.MatchLocalhost:
	// localhost, 127.0.0.0/8, ::1), and only those, speak http. The check
	// that a registry named on the command line is loopback is the
	// caller's (RemoteRef.Loopback).
	PlainHTTP bool
	// MaxAttempts and MaxElapsed bound the retries of each blob transfer and
	// of each replayable request (RetryPolicy; 0: the defaults, 5 attempts
	// within 2 minutes).
	MaxAttempts int
	MaxElapsed  time.Duration
	// TagPageSize is the n of each tags-list request (the distribution
	// API's page size); 0 lets the registry choose.
	TagPageSize int
	// Logger receives debug records (each retry); nil discards them.
	Logger *slog.Logger
}

// Transport is the registry transport of push and pull beyond containerd's
// resolver (docs/design.md "Layout": credentials, CA, retries, tag
// listing): it opens the credential store and the CA pool once, and hands
// out a new resolver per push (a reused one silently skips a second push of
// a digest, measured) over one retrying HTTP client. Runtime.Registry puts
// it under migrate's Registry seam. It is safe for concurrent use.
type Transport struct {
	opts       RegistryOptions
	store      credentials.Store
	configPath string
	retry      RetryPolicy // withDefaults applied
	client     *http.Client

	mu    sync.Mutex
	creds map[string]auth.Credential // by host, for the life of the Transport
}

// NewTransport opens the credential store and the CA file of opts. Errors
// wrap errdefs.ErrInvalidArgument (and fs.ErrNotExist for a missing file)
// and name the file: a config file that does not decode, a CA file with no
// PEM certificate.
func NewTransport(opts RegistryOptions) (*Transport, error) {
	store, path, err := openCredentials(opts.ConfigFile)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := registryTLS(opts.CACertFile)
	if err != nil {
		return nil, err
	}
	retry := RetryPolicy{MaxAttempts: opts.MaxAttempts, MaxElapsed: opts.MaxElapsed, Logger: opts.Logger}.withDefaults()
	return &Transport{
		opts:       opts,
		store:      store,
		configPath: path,
		retry:      retry,
		client:     &http.Client{Transport: &retryTransport{base: docker.DefaultHTTPTransport(tlsCfg), policy: retry}},
		creds:      map[string]auth.Credential{},
	}, nil
}

// registryTLS is the system pool plus the certificates of caFile (an empty
// pool when the system's cannot be loaded).
func registryTLS(caFile string) (*tls.Config, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := inputfile.Read(caFile, inputfile.MaxCertBundle)
		if err != nil {
			return nil, fmt.Errorf("registry CA file %s: %w: %w", caFile, errdefs.ErrInvalidArgument, err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("registry CA file %s: no PEM certificate in it: %w", caFile, errdefs.ErrInvalidArgument)
		}
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// RetryPolicy is the policy of t's retries (RegistryOptions' bounds and
// logger, the defaults elsewhere), for RetryBlob around each blob transfer.
func (t *Transport) RetryPolicy() RetryPolicy { return t.retry }

// ConfigPath is the credential file t reads (it may not exist).
func (t *Transport) ConfigPath() string { return t.configPath }

// Resolver returns a new containerd resolver (a new push tracker each
// time) whose hosts use t's retrying client and TLS pool, whose authorizer
// takes credentials from t's store (basic auth and token services alike),
// and which speaks http to loopback registries when PlainHTTP is set. ctx
// bounds the credential helpers it may run; use the resolver within it.
func (t *Transport) Resolver(ctx context.Context) remotes.Resolver {
	authorizer := docker.NewDockerAuthorizer(
		docker.WithAuthClient(t.client),
		docker.WithAuthCreds(t.containerdCreds(ctx)))
	ropts := []docker.RegistryOpt{docker.WithClient(t.client), docker.WithAuthorizer(authorizer)}
	if t.opts.PlainHTTP {
		ropts = append(ropts, docker.WithPlainHTTP(docker.MatchLocalhost))
	}
	return docker.NewResolver(docker.ResolverOptions{
		Hosts:   docker.ConfigureDefaultRegistries(ropts...),
		Tracker: docker.NewInMemoryTracker(),
	})
}

// registryError gives err, a failure talking to registry host, its class:
// a 401, or no credentials where the registry asks for them, becomes
// "registry HOST: unauthorized" wrapping errdefs.ErrUnauthenticated; a
// 403, "registry HOST: permission denied" wrapping
// errdefs.ErrPermissionDenied (both name the credential file); an
// untrusted certificate, "registry HOST: its certificate chains to a CA
// …" naming the CA file. The CLI exits 1 for all. Other errors are returned as
// they are.
func (t *Transport) registryError(host string, err error) error {
	if err == nil {
		return nil
	}
	switch authStatus(err) {
	case http.StatusUnauthorized:
		return fmt.Errorf("registry %s: %w (credentials from %s): %w", host, errdefs.ErrUnauthenticated, t.configPath, err)
	case http.StatusForbidden:
		return fmt.Errorf("registry %s: %w (credentials from %s): %w", host, errdefs.ErrPermissionDenied, t.configPath, err)
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		if t.opts.CACertFile == "" {
			return fmt.Errorf("registry %s: its certificate chains to a CA the system pool does not trust, and no CA file was given: %w", host, err)
		}
		return fmt.Errorf("registry %s: its certificate chains to a CA trusted neither by the system pool nor by CA file %s: %w", host, t.opts.CACertFile, err)
	}
	return err
}

// authStatus is 401 or 403 when err says the registry refused the
// credentials (or their absence), else 0.
func authStatus(err error) int {
	var us remoteerrors.ErrUnexpectedStatus
	var er *errcode.ErrorResponse
	switch {
	case errors.Is(err, docker.ErrInvalidAuthorization), errors.Is(err, auth.ErrBasicCredentialNotFound):
		return http.StatusUnauthorized
	case errors.As(err, &us) && (us.StatusCode == http.StatusUnauthorized || us.StatusCode == http.StatusForbidden):
		return us.StatusCode
	case errors.As(err, &er) && (er.StatusCode == http.StatusUnauthorized || er.StatusCode == http.StatusForbidden):
		return er.StatusCode
	}
	return 0
}
