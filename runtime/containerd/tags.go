package containerd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/sandbox-resume/sandbox-resume/snapshot"
)

// MaxTagPages bounds the pages of one tags listing (a registry that keeps
// sending Link headers cannot make a pull loop forever).
const MaxTagPages = 1000

// Tags lists the tags of repo's repository (its tag or digest, if any, is
// ignored) with the distribution tags API, following its Link headers
// page by page (oras-go's Repository.Tags; containerd's resolver lists no
// tags), through r's retrying client and credentials. The order is the
// registry's. Errors name the repository; refused credentials are
// registryError's.
func (r *Registry) Tags(ctx context.Context, repo *RemoteRef) ([]string, error) {
	host := reference.Domain(repo.Named)
	apiHost := host
	if host == "docker.io" {
		apiHost = "registry-1.docker.io" // as docker.ConfigureDefaultRegistries
	}
	rr := &remote.Repository{
		Client: &auth.Client{
			Client: r.client,
			Credential: func(ctx context.Context, hostport string) (auth.Credential, error) {
				return r.credential(ctx, hostport)
			},
			Cache: auth.NewCache(),
		},
		Reference:       registry.Reference{Registry: apiHost, Repository: reference.Path(repo.Named)},
		PlainHTTP:       r.opts.PlainHTTP && repo.Loopback,
		TagListPageSize: r.opts.TagPageSize,
		TagListMaxPages: MaxTagPages,
	}
	var tags []string
	err := rr.Tags(ctx, "", func(page []string) error {
		tags = append(tags, page...)
		return nil
	})
	if err != nil {
		return nil, r.registryError(host, fmt.Errorf("list tags of %s: %w", repo.Repo, err))
	}
	return tags, nil
}

// GenerationTag is the tag push gives a run's generation when the target
// names no tag: "<run>.g<generation>" (docs/design.md "Moving runs", runs
// by generation; generation ≥ 1, a /1 ref is generation 1).
func GenerationTag(run string, generation int) string {
	return run + ".g" + strconv.Itoa(generation)
}

// LatestGenerationTag picks, among tags, the tag GenerationTag(run, n) with
// the highest n: tags of exactly the form "<run>.g<n>", n a decimal ≥ 1
// without leading zeros (so "a.g1.g2" is generation 2 of run "a.g1", never
// of run "a"). ok is false when no tag is of that form.
func LatestGenerationTag(tags []string, run string) (tag string, generation int, ok bool) {
	prefix := run + ".g"
	for _, t := range tags {
		n, found := strings.CutPrefix(t, prefix)
		if !found || n == "" || n[0] == '0' || strings.TrimLeft(n, "0123456789") != "" {
			continue
		}
		g, err := strconv.Atoi(n)
		if err != nil || g < 1 {
			continue
		}
		if !ok || g > generation {
			tag, generation, ok = t, g, true
		}
	}
	return tag, generation, ok
}

// latestRunRef resolves REG/REPO and a run to REG/REPO:<run>.g<n>, the
// highest generation of run among repo's tags. No such tag wraps
// errdefs.ErrNotFound naming the repository and the run.
func (r *Registry) latestRunRef(ctx context.Context, repo *RemoteRef, run string) (*RemoteRef, int, error) {
	tags, err := r.Tags(ctx, repo)
	if err != nil {
		return nil, 0, err
	}
	tag, gen, ok := LatestGenerationTag(tags, run)
	if !ok {
		return nil, 0, fmt.Errorf("repository %s has no tag %s.g<n> of run %s (%d tags listed): %w", repo.Repo, run, run, len(tags), errdefs.ErrNotFound)
	}
	ref, err := ParseRemoteRef(repo.Repo+":"+tag, false)
	if err != nil {
		return nil, 0, err
	}
	return ref, gen, nil
}

// generationOf is the generation a ref records: a /1 ref is generation 1
// (docs/design.md "Moving runs"; a /2 ref's "generation" member is read
// here once snapshot.Ref carries it).
func generationOf(_ *snapshot.Ref) int { return 1 }
