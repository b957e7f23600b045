package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/containerd/errdefs"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// openCredentials opens the credential store users already keep
// (docs/design.md "Moving runs"): configFile when set (it must exist), else
// $DOCKER_CONFIG/config.json, else ~/.docker/config.json (either may be
// absent: no credentials). The Docker config format — "auths",
// "credsStore", "credHelpers" and the docker-credential-<helper> protocol —
// is read by oras-go's credentials package, never here. It returns the
// store and the path it reads. Errors wrap errdefs.ErrInvalidArgument and
// name the file; a missing configFile also wraps fs.ErrNotExist.
func openCredentials(configFile string) (credentials.Store, string, error) {
	var (
		s   *credentials.DynamicStore
		err error
	)
	if configFile != "" {
		if _, serr := os.Stat(configFile); serr != nil {
			return nil, configFile, fmt.Errorf("registry config %s: %w: %w", configFile, errdefs.ErrInvalidArgument, serr)
		}
		s, err = credentials.NewStore(configFile, credentials.StoreOptions{})
	} else {
		s, err = credentials.NewStoreFromDocker(credentials.StoreOptions{})
	}
	if err != nil {
		where := configFile
		if where == "" {
			where = "the Docker config ($DOCKER_CONFIG/config.json or ~/.docker/config.json)"
		}
		return nil, where, fmt.Errorf("registry config %s: %w: %w", where, errdefs.ErrInvalidArgument, err)
	}
	return s, s.ConfigPath(), nil
}

// credential returns the credential for a registry host ("host[:port]";
// docker.io's registry-1.docker.io is looked up under Docker's key
// "https://index.docker.io/v1/"), running a credential helper at most once
// per host for the life of t. No entry is the empty credential, not an
// error. Errors (a helper that fails or is not on PATH) name the host and
// the config file.
func (t *Transport) credential(ctx context.Context, host string) (auth.Credential, error) {
	t.mu.Lock()
	c, ok := t.creds[host]
	t.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := credentials.Credential(t.store)(ctx, host)
	if err != nil {
		return auth.EmptyCredential, fmt.Errorf("registry %s: credentials from %s: %w", host, t.configPath, err)
	}
	t.mu.Lock()
	t.creds[host] = c
	t.mu.Unlock()
	return c, nil
}

// containerdCreds adapts credential to docker.WithAuthCreds: a username
// and password, or, for an identity token, an empty username and the token
// (containerd then asks the token service with it as a refresh token).
// ctx bounds the helpers it runs.
func (t *Transport) containerdCreds(ctx context.Context) func(host string) (string, string, error) {
	return func(host string) (string, string, error) {
		c, err := t.credential(ctx, host)
		if err != nil {
			return "", "", err
		}
		if c.RefreshToken != "" {
			return "", c.RefreshToken, nil
		}
		if c.Username == "" && c.Password == "" && c.AccessToken != "" {
			return "", "", fmt.Errorf("registry %s: credentials from %s hold only a registry token, which containerd's resolver cannot send: %w", host, t.configPath, errors.ErrUnsupported)
		}
		return c.Username, c.Password, nil
	}
}
