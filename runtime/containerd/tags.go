package containerd

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"
)

// MaxTagPages bounds the pages of one tags listing (a registry that keeps
// sending Link headers cannot make a pull loop forever).
const MaxTagPages = 1000

// Tags lists the tags of repo (REG/REPO; a tag or digest is ignored) with
// the distribution tags API, following its Link headers page by page
// (oras-go's Repository.Tags; containerd's resolver lists no tags), through
// t's retrying client and credentials, over http for a loopback registry
// when PlainHTTP is set. The order is the registry's; a repository the
// registry does not know has no tags. Errors name the repository; refused
// credentials are as registryError says.
func (t *Transport) Tags(ctx context.Context, repo string) ([]string, error) {
	named, err := reference.ParseNormalizedNamed(repo)
	if err != nil {
		return nil, fmt.Errorf("repository %q: %w: %w", repo, errdefs.ErrInvalidArgument, err)
	}
	host := reference.Domain(named)
	apiHost := host
	if host == "docker.io" {
		apiHost = "registry-1.docker.io" // as docker.ConfigureDefaultRegistries
	}
	loop, _ := docker.MatchLocalhost(host)
	rr := &remote.Repository{
		Client: &auth.Client{
			Client: t.client,
			Credential: func(ctx context.Context, hostport string) (auth.Credential, error) {
				return t.credential(ctx, hostport)
			},
			Cache: auth.NewCache(),
		},
		Reference:       registry.Reference{Registry: apiHost, Repository: reference.Path(named)},
		PlainHTTP:       t.opts.PlainHTTP && loop,
		TagListPageSize: t.opts.TagPageSize,
		TagListMaxPages: MaxTagPages,
	}
	var tags []string
	err = rr.Tags(ctx, "", func(page []string) error {
		tags = append(tags, page...)
		return nil
	})
	var er *errcode.ErrorResponse
	if errors.As(err, &er) && er.StatusCode == http.StatusNotFound {
		return nil, nil // NAME_UNKNOWN: no such repository, no tags
	}
	if err != nil {
		return nil, t.registryError(host, fmt.Errorf("list tags of %s: %w", named.Name(), err))
	}
	return tags, nil
}
