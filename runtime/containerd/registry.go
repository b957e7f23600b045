package containerd

import (
	"context"
	"fmt"
	"io"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/sandbox-resume/sandbox-resume/migrate"
)

// Registry is the registry transport of migrate.Push and migrate.Pull over
// containerd's docker resolver, reading from and storing into the content
// store of the Runtime that made it. It sends no credentials.
type Registry struct {
	r         *Runtime
	plainHTTP bool
}

var _ migrate.Registry = (*Registry)(nil)

// Registry returns the registry transport over r's content store. With
// plainHTTP, loopback registries (and only those) are reached over plain
// HTTP; the CLI accepts plain HTTP for loopback references only.
func (r *Runtime) Registry(plainHTTP bool) *Registry { return &Registry{r: r, plainHTTP: plainHTTP} }

// resolver returns a new docker resolver (with its own push status
// tracker: a reused resolver silently skips a second push of a digest it
// pushed before, to any repository — measured, notes/derisk.md step 4).
func (g *Registry) resolver() remotes.Resolver {
	var ropts []docker.RegistryOpt
	if g.plainHTTP {
		ropts = append(ropts, docker.WithPlainHTTP(docker.MatchLocalhost))
	}
	return docker.NewResolver(docker.ResolverOptions{
		Hosts:   docker.ConfigureDefaultRegistries(ropts...),
		Tracker: docker.NewInMemoryTracker(),
	})
}

// Resolve implements migrate.Registry (remotes.Resolver.Resolve).
func (g *Registry) Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error) {
	_, desc, err := g.resolver().Resolve(ctx, ref)
	if err != nil {
		return ocispec.Descriptor{}, native(err)
	}
	return desc, nil
}

// Fetch implements migrate.Registry (remotes.Fetcher.Fetch).
func (g *Registry) Fetch(ctx context.Context, ref string, desc ocispec.Descriptor) (io.ReadCloser, error) {
	f, err := g.resolver().Fetcher(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", ref, err)
	}
	rc, err := f.Fetch(ctx, desc)
	if err != nil {
		return nil, native(err)
	}
	return rc, nil
}

// FetchToStore implements migrate.Registry under the lease: one blob with
// remotes.Fetch, or, with tree, desc and every child with images.Dispatch
// over remotes.FetchHandler and images.ChildrenHandler. The content
// store's ingest checks each blob's size and digest; a blob it has is not
// fetched again.
func (g *Registry) FetchToStore(ctx context.Context, ref, lease string, desc ocispec.Descriptor, tree bool, p migrate.Progress) error {
	f, err := g.resolver().Fetcher(ctx, ref)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", ref, err)
	}
	var fetcher remotes.Fetcher = progressFetcher{Fetcher: f, p: p}
	lctx := leases.WithLease(ctx, lease)
	cs := g.r.client.ContentStore()
	if !tree {
		if err := remotes.Fetch(lctx, cs, fetcher, desc); err != nil && !errdefs.IsAlreadyExists(native(err)) {
			return native(err)
		}
		return nil
	}
	h := images.Handlers(remotes.FetchHandler(cs, fetcher), images.ChildrenHandler(cs))
	if err := images.Dispatch(lctx, h, nil, desc); err != nil {
		return native(err)
	}
	return nil
}

// Push implements migrate.Registry with remotes.PushContent, each push
// with a new resolver, blobs read ahead readBufferSize bytes at a time.
func (g *Registry) Push(ctx context.Context, ref string, desc ocispec.Descriptor, p migrate.Progress) error {
	pusher, err := g.resolver().Pusher(ctx, ref)
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	var store content.Provider = readAheadProvider{g.r.client.ContentStore()}
	if _, quiet := p.(migrate.NoProgress); !quiet && p != nil {
		store = progressProvider{Provider: store, p: p}
	}
	if err := remotes.PushContent(ctx, pusher, desc, store, nil, platforms.All, nil); err != nil {
		return fmt.Errorf("push %s: %w", ref, native(err))
	}
	return nil
}
